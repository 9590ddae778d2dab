"""offload_tool: LLVM offload container formats (clang offload bundles, OffloadBinary,
heterogeneous archives, ELF offload sections) implemented natively in Python and
byte-compatible with LLVM 19's tools."""

from .errors import OffloadError

__version__ = "0.1.0"

__all__ = ["OffloadError", "__version__"]
