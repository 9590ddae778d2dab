"""What kind of file is this?  One answer for the whole library, from the leading bytes only.

`identify` is LLVM's `llvm::identify_magic` for the kinds offloading meets, plus the containers
LLVM recognises elsewhere (text bundles, NVIDIA fat binaries).  Every caller that dispatches on
content (extraction, inspection, bundling, archive symbols, verification) asks it; a new
container format adds its magic to `_MAGICS` (or a rule to `identify`) and its own module.

This module imports nothing of the library: the format modules import their magic numbers from
here.  What the bundler asks beyond the kind (is it an object file? which handler reads it?) is
answered by `ops.bundler_handlers`; text-bundle markers are read by `bundle`."""

from __future__ import annotations

import enum

__all__ = ["FileKind", "identify", "COFF_MACHINES", "TEXT_BUNDLE_COMMENTS", "TEXT_BUNDLE_START", "ELF_MAGIC",
           "AR_MAGIC", "THIN_AR_MAGIC", "OFFLOAD_BINARY_MAGIC", "BC_MAGIC", "BC_WRAPPER_MAGIC", "CCOB_MAGIC",
           "BUNDLE_MAGIC", "FATBIN_MAGIC", "KPACK_MAGIC"]

# The magic numbers, written once; the format modules use these for reading and writing.
ELF_MAGIC = b"\x7fELF"
AR_MAGIC = b"!<arch>\n"
THIN_AR_MAGIC = b"!<thin>\n"
OFFLOAD_BINARY_MAGIC = b"\x10\xff\x10\xad"
BC_MAGIC = b"BC\xc0\xde"
BC_WRAPPER_MAGIC = b"\xde\xc0\x17\x0b"
CCOB_MAGIC = b"CCOB"
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
FATBIN_MAGIC = 0xBA55ED50  # a little-endian u32
KPACK_MAGIC = b"KPAK"  # ROCm's per-architecture kernel archives (`kpack`)


class FileKind(str, enum.Enum):
    """The kinds `identify` tells apart (values are stable words, usable in messages)."""

    UNKNOWN = "unknown"
    OFFLOAD_BINARY = "offload-binary"   # 10 FF 10 AD
    CLANG_BUNDLE = "bundle"             # __CLANG_OFFLOAD_BUNDLE__ (binary bundle)
    COMPRESSED_BUNDLE = "ccob"          # CCOB
    TEXT_BUNDLE = "text-bundle"         # "\n// __CLANG_OFFLOAD_BUNDLE____START__ ..."
    FATBIN = "fatbin"                   # NVIDIA fat binary, 50 ED 55 BA
    ARCHIVE = "archive"                 # !<arch>\n
    THIN_ARCHIVE = "thin-archive"       # !<thin>\n
    BITCODE = "bitcode"                 # BC C0 DE, or the bitcode wrapper DE C0 17 0B
    KPACK = "kpack"                     # KPAK: ROCm's per-architecture kernel archive
    ELF = "elf"
    COFF = "coff"
    MACHO = "macho"
    WASM = "wasm"
    XCOFF = "xcoff"


#: COFF object machine types `identify_magic` recognises (the first two bytes, little-endian):
#: i386, ARMNT, m68k, PA-RISC, x86-64, ARM64, ARM64EC.
COFF_MACHINES = frozenset({0x014C, 0x01C4, 0x0268, 0x0290, 0x8664, 0xAA64, 0xA641})

#: The line comments text bundles mark their entries with, and what follows the comment on an
#: entry's first line: "\n<comment> __CLANG_OFFLOAD_BUNDLE____START__ <id>\n".
TEXT_BUNDLE_COMMENTS = (b"//", b";", b"#")
TEXT_BUNDLE_START = b" " + BUNDLE_MAGIC + b"__START__ "

# Leading bytes -> kind, longest first where one is a prefix of another.
_MAGICS: tuple[tuple[bytes, FileKind], ...] = (
    (AR_MAGIC, FileKind.ARCHIVE),
    (THIN_AR_MAGIC, FileKind.THIN_ARCHIVE),
    (OFFLOAD_BINARY_MAGIC, FileKind.OFFLOAD_BINARY),
    (ELF_MAGIC, FileKind.ELF),
    (BC_MAGIC, FileKind.BITCODE),
    (BC_WRAPPER_MAGIC, FileKind.BITCODE),
    (CCOB_MAGIC, FileKind.COMPRESSED_BUNDLE),
    (FATBIN_MAGIC.to_bytes(4, "little"), FileKind.FATBIN),
    (KPACK_MAGIC, FileKind.KPACK),
    (b"\xfe\xed\xfa\xce", FileKind.MACHO),
    (b"\xfe\xed\xfa\xcf", FileKind.MACHO),
    (b"\xce\xfa\xed\xfe", FileKind.MACHO),
    (b"\xcf\xfa\xed\xfe", FileKind.MACHO),
    (b"\0asm", FileKind.WASM),
    (b"\x01\xdf", FileKind.XCOFF),   # 32-bit
    (b"\x01\xf7", FileKind.XCOFF),   # 64-bit
)


def _starts_text_bundle(buf) -> bool:
    """Whether `buf` starts with a text bundle's first marker ("\\n// __CLANG_...")."""
    first = bytes(buf[:4 + len(TEXT_BUNDLE_START)])
    return any(first.startswith(b"\n" + comment + TEXT_BUNDLE_START) for comment in TEXT_BUNDLE_COMMENTS)


# `_MAGICS` by their first 4 bytes (the 2-byte XCOFF ones apart): one dict lookup per call, as
# archives and bundles identify thousands of members and payloads.
_MAGICS_BY_HEAD: dict[bytes, tuple[tuple[bytes, FileKind], ...]] = {}
for _magic, _kind in _MAGICS:
    if len(_magic) >= 4:
        _MAGICS_BY_HEAD[_magic[:4]] = _MAGICS_BY_HEAD.get(_magic[:4], ()) + ((_magic, _kind),)
_SHORT_MAGICS = tuple((m, k) for m, k in _MAGICS if len(m) < 4)


def identify(buf) -> FileKind:
    """The kind of the file whose contents start `buf` (see `FileKind`)."""
    head = bytes(buf[:32])
    for magic, kind in _MAGICS_BY_HEAD.get(head[:4], _SHORT_MAGICS):
        if head.startswith(magic):
            return kind
    # identify_magic's offload_bundle needs sizeof("__CLANG_OFFLOAD_BUNDLE__"), its NUL included.
    if head.startswith(BUNDLE_MAGIC) and len(buf) > len(BUNDLE_MAGIC):
        return FileKind.CLANG_BUNDLE
    if head[:1] == b"\n" and _starts_text_bundle(buf):
        return FileKind.TEXT_BUNDLE
    if len(head) >= 2 and (head[0] | head[1] << 8) in COFF_MACHINES:
        return FileKind.COFF
    return FileKind.UNKNOWN

