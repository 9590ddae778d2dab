"""nvcc on the per-arch graph: a `.cu` source built with `OFFLOAD_CUDA_COMPILER='nvcc'` becomes
the sub-steps nvcc itself runs, as nodes:

    <stem>.cu --NVCC-FE-->          <stem>.cudafe1.cpp, <stem>.module_id  (gcc -E, then cudafe++)
    <stem>.cu --NVCC-PP compute_NN--> <stem>.compute_NN.cpp1.ii          (device preprocess, per arch)
    .cpp1.ii + .module_id --NVCC-DEVICE compute_NN--> <stem>.compute_NN.ptx, <stem>.sm_NN.cubin
                                                                         (cicc, then ptxas per SASS arch)
    cubins + PTX --NVCC-FATBIN--> <stem>.fatbin.c                        (fatbinary)
    .cudafe1.cpp + stub + .fatbin.c --NVCC-HOST--> <stem>.o               (host compile)

The steps are not hard-coded: they come from `nvcc --dryrun` with the same flags and `-gencode`
list (as sccache splits nvcc), read once per distinct command line. Each node's command is the
one nvcc would run, with nvcc's temporary files renamed to the nodes' files, so each node's
signature holds exactly the flags that step gets (a host-only flag change reruns no `cicc` or
`ptxas`; the device preprocess reruns, and its unchanged output stops the rebuild there) and the
object equals the one `nvcc -c` makes. A plan of another shape (another CUDA release, a flag
that adds steps) falls back to the one-action compile with a one-line note, as does an
`$OFFLOAD_NVCC` that is not nvcc itself (a script around it: `plan._not_nvcc`). On by default
(`OFFLOAD_NVCC_SPLIT`); objects of relocatable device code (`-rdc=true`) are marked (`rdc.mark`)
for the device link of the links that take them (`device_link`).

Adding an arch changes `__CUDA_ARCH_LIST__`, which every preprocess gets; only a text whose
files name it depends on it (CUB and Thrust put it in their namespace names), so each preprocess
records whether it did (`arch_list`) and reruns on a list change only then.

One concept a module: `shell_words` (the words the shell makes of a line), `flags` (nvcc's flag
variables, each word as nvcc passes it on), `plan` (reading `--dryrun`), `variants` (the arch
variants nvcc builds), `steps` (the split graph), `arch_list` (`__CUDA_ARCH_LIST__` tracking),
`builders` (the steps' builders, emitters and commands), `cleaning` (`scons -c`), `rdc` (the
relocatable device code mark) and `device_link` (nvcc's device link as nodes)."""
