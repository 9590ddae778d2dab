"""What the tool's modules pass each other through SCons: every private construction variable
(`$_OFFLOAD_*`) and every mark the tool sets on a node (`node.attributes.offload_*`) or on a
builder, declared here with a line of meaning each.

Why in one place: these words are how a builder module, a flavour, the link, the report and the
sccache-dist support find what another module made (a compile's language, a source's parts, an
nvcc step's signature); each is written in one module and read in another, so a reader of either
needs its meaning, and a renamed word must not leave a reader behind silently. SCons's own tools
do the same for the few words they share (the `compilation_db` tool's entries). The user's
variables (`OFFLOAD_*`, no leading underscore) are documented in docs/scons-tool.md instead.

tests/scons_tool/test_scons_protocol.py fails on a `_OFFLOAD_*` word or `offload_*` mark in the tool's source
that is not declared here, and on one declared here that no module uses. Imports nothing of the
tool, so any module may import it (`Parts`)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Construction variables the tool sets (per-node overrides, or callables in the environment,
#: `settings.variables.CALLABLES`) and substitutes in its commands or reads back.
WORDS = {
    # -- every compile
    "_OFFLOAD_LANG": "the language record (`settings.languages`) a compile or device step is made for (override)",
    "_OFFLOAD_LAUNCH": "the launcher prefix of a compile: `$OFFLOAD_LAUNCHER`, the local one, or the tool's sccache server",
    "_OFFLOAD_PIC": "1 when the object is position-independent (shared library): the `$SHOBJSUFFIX` names it",
    "_OFFLOAD_SRCFLAGS": "the source's C or C++ flag variables (`$CCFLAGS $CFLAGS` or `$CCFLAGS $CXXFLAGS`)",
    "_OFFLOAD_HOST_LANGFLAGS": "the language's flags of a host compile (`Language.host_flags`)",
    "_OFFLOAD_DEVICE_LANGFLAGS": "the language's flags of a device compile (`Language.device_flags`)",
    "_OFFLOAD_HOST_BACKENDFLAGS": "the flags of a host compile that reads the source's host IR (`Language.host_backend_flags`)",
    "_OFFLOAD_HOST_ARCHFLAGS": "the `--offload-arch=` words of a bundled HIP host compile (its `.hipfb` holds those archs)",
    "_OFFLOAD_VENDORFLAGS": "a device compile's vendor flags: the language's, then the CUDA or ROCm installation's",
    "_OFFLOAD_CUDAPATHFLAG": "`--cuda-path=` of the CUDA installation in use, or nothing (host flags of CUDA)",
    "_OFFLOAD_ROCMFLAGS": "`--rocm-path=` / `--rocm-device-lib-path=` of the ROCm installation in use, or nothing",
    "_OFFLOAD_NVPTX_BCFLAG": "the OpenMP NVIDIA device bitcode flag of the clang in use, or nothing",
    "_OFFLOAD_CUID": "a CUDA/HIP source's `-cuid`, named from its path under the top directory",
    "_OFFLOAD_CUIDFLAG": "how a new-driver CUDA/HIP compile passes `$_OFFLOAD_CUID`: the driver's `-cuid=`, or `-Xclang` where the driver drops it",
    "_OFFLOAD_FAT_ARCHS": "the archs (comma-separated) of an OpenMP source's one-job compile (override)",
    "_OFFLOAD_FATFLAGS": "a one-job OpenMP compile's `-fopenmp --offload-arch=`, installation flags and clang's header wrappers",
    "_OFFLOAD_FAT_XARCHFLAGS": "`OFFLOAD_HOSTFLAGS` / `OFFLOAD_DEVICEFLAGS` of a one-job compile through `-Xarch_host` / `-Xarch_device`",
    "_OFFLOAD_SOURCE_ID": "an OpenMP source's file-identity flag (offload entry names), outside signatures",
    "_OFFLOAD_CLANG_ID": "the identity (`--version`) of the clang in use, in the varlist of its compiles",
    "_OFFLOAD_HIPFB_INCLUDE": "a bundled HIP host compile's `-fcuda-include-gpubinary` of its `.hipfb` (second source)",
    "_OFFLOAD_HIPFB_TARGETS": "the `.hipfb` bundle's entry IDs: the empty host one, then one per arch",
    "_OFFLOAD_FATBIN_ID": "a hash of the `.hipfb` a host compile embeds, so that a new one rebuilds it",
    # -- the library's steps (package, embed, bundle, manifest)
    "_OFFLOAD_LIBRARY_ID": "offload_tool's version and the tool's schema, in the varlist of every library step",
    "_OFFLOAD_PACKAGERFLAGS": "the packager's `--llvm-version=` for the clang in use, or nothing",
    "_OFFLOAD_IMAGES": "one `--image=file=...,triple=...,arch=...,kind=...` per device object (package, carrier)",
    "_OFFLOAD_EMBED_IMAGES": "the `--image=` words of package + embed (its device objects, after the host object)",
    "_OFFLOAD_INPUTFLAG": "the bundler's `-input=` of the one source",
    "_OFFLOAD_INPUTFLAGS": "one bundler `-input=` word per source",
    "_OFFLOAD_OUTPUTFLAG": "the bundler's `-output=` of the one target",
    "_OFFLOAD_OUTPUTFLAGS": "one bundler `-output=` word per target",
    "_OFFLOAD_COMPRESSFLAG": "the bundler's `-compress` when `OFFLOAD_COMPRESS` asks for it",
    "_OFFLOAD_BUNDLETARGETS": "`OFFLOAD_TARGETS` (bundle entry IDs) as the bundler's `-targets=` takes them",
    "_OFFLOAD_BUNDLETYPE": "the bundler's `-type`: `OFFLOAD_BUNDLE_TYPE`, else the bundle file's suffix",
    "_OFFLOAD_BUNDLE_FILE": "the bundle file whose suffix gives `$_OFFLOAD_BUNDLETYPE` (override of bundle/unbundle)",
    "_OFFLOAD_CONVERT_NAMED": "true when the caller named a converted archive's target (override)",
    "_OFFLOAD_LLVMVERSIONFLAG": "a library CLI's `--llvm-version=` for the clang in use, or nothing",
    "_OFFLOAD_TARGET_TMP": "`${TARGET}.tmp` as one word: the manifest is written there, then renamed",
    "_OFFLOAD_VERIFY_CMDS": "the `offload-tool verify` commands run before a manifest is written",
    "_OFFLOAD_CANONICAL_ARCHS": "the archs a manifest's verify step requires when `OFFLOAD_REQUIRE` is True (override)",
    # -- links
    "_OFFLOAD_LINKFLAGS": "a link's own flags: the runtimes of the flavours among its objects",
    "_OFFLOAD_LINK_ARCHS": "the archs of a link's objects (override)",
    "_OFFLOAD_LINK_FLAVOURS": "the flavours of a link's objects, whose runtimes it links (override)",
    "_OFFLOAD_LINK_OPENMP": "whether a link's objects include OpenMP offload ones (override)",
    "_OFFLOAD_LINK_OPTFLAG": "the last `-O` of the final link's `$LINKFLAGS`, for a split device link",
    "_OFFLOAD_DEVICE_RUNTIME": "`-L<dir> -l<name>` of the OpenMP device runtime of the clang in use",
    "_OFFLOAD_RELOCATABLE": "1 on a relocatable link (`-r`): no runtime is linked",
    "_OFFLOAD_LDSCRIPT": "the text of a linker script node the tool writes (override)",
    "_OFFLOAD_CARRIER_REF": "the host object whose entries a split device link and its carrier reference (override)",
    "_OFFLOAD_DEVLINK_LLVM": "the major LLVM release of the clang a split device link runs (override)",
    # -- nvcc's steps as nodes
    "_OFFLOAD_NVCC_ARCHS": "the archs an nvcc compile or device link builds (override)",
    "_OFFLOAD_NVCC_GENCODE": "nvcc's `-gencode` words for `$_OFFLOAD_NVCC_ARCHS`",
    "_OFFLOAD_NVCC_HOSTFLAGS": "the host compiler's flags as nvcc passes them (`-Xcompiler`)",
    "_OFFLOAD_NVCC_CPPFLAGS": "`$_CCCOMCOM` (`$CPPFLAGS`, `CPPDEFINES`, `CPPPATH`) as nvcc takes it",
    "_OFFLOAD_NVCC_DLINKFLAGS": "the flags of nvcc's device link (`-dlink`)",
    "_OFFLOAD_NVCC_SOURCES": "`$SOURCES` as nvcc takes file names",
    "_OFFLOAD_NVCC_TARGET": "`$TARGET` as nvcc takes a file name",
    "_OFFLOAD_NVCC_ID": "the identity (`--version`) of the nvcc in use, in its steps' signatures",
    "_OFFLOAD_NVCC_STEP": "the command line of one of nvcc's steps, from its `--dryrun` plan (override)",
    "_OFFLOAD_NVCC_STEPSIG": "that step's signature text, computed once when its node is made (override)",
    "_OFFLOAD_NVCCSTEPCOM": "the command of a compile step node: `$_OFFLOAD_NVCC_STEP`",
    "_OFFLOAD_NVCCDLINKSTEPCOM": "the command of a device link step node: `$_OFFLOAD_NVCC_STEP`",
    "_OFFLOAD_NVCC_SRC": "the source a step works for, as its progress line names it (override)",
    "_OFFLOAD_NVCC_PROGRAM": "the program a device link step works for, as its progress line names it (override)",
    "_OFFLOAD_NVCC_VARCH": "the virtual arch (`compute_NN`) of a device preprocess or compile step (override)",
    "_OFFLOAD_NVCC_RARCH": "the SASS arch (`sm_NN`) of an nvlink step (override)",
    "_OFFLOAD_NVCC_RARCHS": "the SASS archs a device compile step's `ptxas` writes (override)",
    "_OFFLOAD_NVCC_II": "the preprocessed text a preprocess step reads its `__CUDA_ARCH_LIST__` use from (override)",
    "_OFFLOAD_NVCC_II_TEMP": "true when that text is the step's own temporary, removed once read (override)",
    "_OFFLOAD_NVCC_ARCHLIST": "the `__CUDA_ARCH_LIST__` a preprocess step records when its source uses it (override)",
    "_OFFLOAD_NVCCDB_FLAGS": "what clangd needs of an nvcc compile (toolkit, archs) in `compile_commands.json`",
    # -- progress
    "_OFFLOAD_USER_PRINT_CMD_LINE_FUNC": "the user's `PRINT_CMD_LINE_FUNC`, which the progress prefix calls on",
}

#: What the tool records on a node (`node.attributes.<name>`), who sets it and what it says.
NODE_ATTRIBUTES = {
    "offload_lang": "the language a source's object or container was made as (`graph.objects`, the builders)",
    "offload_flavour": "the flavour (way of building) that made an object, read by links and the split device link",
    "offload_parts": "a source's object's `Parts`: its host object, device objects per arch and package",
    "offload_image": "a device object's image: {arch, triple, kind} for the packager's `--image=`",
    "offload_fat_job": "true on an OpenMP source's fat object made by one driver job (sent to sccache-dist whole)",
    "offload_host_ir": "the host IR node an OpenMP device compile reads instead of making it",
    "offload_file_id": "(st_dev, st_ino) of a source or header, in OpenMP compile signatures",
    "offload_device_code": "true on a library or archive the tool made that carries device code",
    "offload_nvcc_rdc": "the archs of an object nvcc compiled with relocatable device code (its device link)",
    "offload_dist_launcher": "the launcher prefix of a compile that goes through the tool's sccache server",
}

#: What the tool records on a builder (`graph.common.reported`), read by the build report.
BUILDER_ATTRIBUTES = {
    "offload_report_kind": "what the build report calls the builder's actions (`host-compile`, `device-link`, ...)",
    "offload_final_binary": "true when the builder's targets are final binaries, measured per arch by the report",
}


#: How the name of every builder the tool adds to `BUILDERS` begins (they are no user's API): the
#: registry tells the steps it made for a request from a user's generator of a source by it.
BUILDER_PREFIX = "_Offload"

@dataclass
class Parts:
    """What one source's object was made of (`offload_parts`): its host object, its device objects
    per arch, and the package or bundle that carries them into the object (None when there is none).
    Read by the split device link (which links the device objects itself) and by sccache-dist
    (which sends them with the host compile). Item access (`parts["host"]`) reads a field, as
    SConstructs written when this was a dict do (docs/scons-tool.md)."""

    host: object = None
    devices: dict = field(default_factory=dict)
    package: object = None

    def __getitem__(self, name: str):
        if name not in ("host", "devices", "package"):
            raise KeyError(name)
        return getattr(self, name)
