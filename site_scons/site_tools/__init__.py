"""SCons tool directory; installed (pip) as the package `offload_scons`, whose directory is a toolpath:
`Environment(tools=['default', 'offload'], toolpath=[PyPackageDir('offload_scons')])`."""
