"""LLVM's rules, with no file format in them: triples (`triple`), target IDs and offload-arch
names (`target_id`), bundle entry IDs and their compatibility (`bundle_id`), the orders LLVM's
hash tables iterate in (`stringmap`, `densemap`) and its path functions (`llvm_path`).  Formats
and operations build on these; nothing here imports from the tiers above."""
