"""The exception hierarchy: every library failure is an `OffloadError`.

Callers (the CLIs, the SCons tool) catch `OffloadError` and print `str(exc)` as one line; nothing
else may escape a parser (no `struct.error`, `IndexError`, `MemoryError`)."""


class OffloadError(Exception):
    """Base class of every error the library raises on bad input or bad arguments."""


class TargetIDError(OffloadError):
    """A target ID, offload arch, triple or bundle entry ID is malformed or not allowed."""


class BundleFormatError(OffloadError):
    """A clang offload bundle (binary, text or object) is malformed."""


class CompressionError(BundleFormatError):
    """A compressed bundle (CCOB) is malformed, corrupt or fails its hash check."""


class BundleError(OffloadError):
    """A bundling or unbundling request cannot be satisfied (missing or conflicting entries)."""


class ArchiveError(OffloadError):
    """A static (ar) archive is malformed."""


class ElfError(OffloadError):
    """An ELF file is malformed or cannot be edited as asked."""


class OffloadBinaryError(OffloadError):
    """An OffloadBinary (0x10FF10AD) package is malformed."""


class BitcodeError(OffloadError):
    """LLVM bitcode is malformed."""


class FatbinError(OffloadError):
    """An NVIDIA fat binary (.nv_fatbin) is malformed."""


class KpackError(OffloadError):
    """A ROCm kpack archive (`KPAK`) or a split binary's kpack reference is malformed."""


class MessagePackError(OffloadError):
    """A MessagePack document (a kpack table of contents) is truncated or malformed."""


class UsageError(OffloadError):
    """A command-line or API argument is invalid."""


class OptionError(UsageError):
    """A mistake LLVM's option parser (`cl`) reports itself: an unknown option, a missing or
    mistyped value, a required option not given.  The drop-in CLIs print it as LLVM does,
    `<program name>: <message>` (the name without its directory, and no `error:`)."""


class OutputPathError(OffloadError):
    """A name taken from inside a file would escape the output directory."""


class BudgetError(OffloadError):
    """An input asks for more work than the run's resource budget allows (`offload_tool.budget`)."""


class ReportError(OffloadError):
    """A build report that is not one (wrong schema, missing or mistyped fields)."""


class InputChangedError(OffloadError):
    """An input was truncated or rewritten by another process while it was being read."""
