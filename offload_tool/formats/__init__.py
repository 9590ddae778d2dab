"""One module per container format, each a `read(...) -> model` / `write(model)` pair over plain
dataclasses: clang offload bundles (`bundle`, compressed `ccob`, in object sections `objbundle`),
OffloadBinary (`offload_binary`, `offload_binary_v2`, what both share in
`offload_binary_common`), `ar` archives (`archive`), ELF (`elf`), COFF (`coff`), NVIDIA fat
binaries (`fatbin`), kpack archives (`kpack`) and LLVM bitcode (`bitcode`).  Each declares what it
is and how the operations look inside it in its `FORMATS` (`kinds.Format`); `magic.FORMAT_MODULES`
lists those modules, and `magic.identify` says from them what a file is (the only detector);
`layout` declares the binary headers every format reads and writes."""
