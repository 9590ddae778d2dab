"""What kind of file is this?  One answer for the whole library, from the leading bytes only.

`identify` is LLVM's `llvm::identify_magic` for the kinds offloading meets, plus the containers
LLVM recognises elsewhere (text bundles, NVIDIA fat binaries).  Every caller that dispatches on
content (extraction, inspection, bundling, archive symbols, verification) asks it; a new
container format adds its magic to `_MAGICS` (or a rule to `identify`) and its own module.

`is_object_file` is the other question the bundler asks (LLVM's `createBinary` yields an
`ObjectFile`), and `bundle_handler` is LLVM's `CreateFileHandler`: which bundle format a
`-type` and an input select."""

from __future__ import annotations

import enum
import re

__all__ = ["FileKind", "identify", "is_object_file", "bundle_handler", "text_bundle_type",
           "text_bundle_comment", "OBJECT_KINDS", "COFF_MACHINES", "TEXT_BUNDLE_COMMENTS", "ELF_MAGIC",
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


#: Kinds LLVM's `createBinary` turns into an `ObjectFile` (the bundler's object handler).
OBJECT_KINDS = frozenset({FileKind.ELF, FileKind.COFF, FileKind.MACHO, FileKind.WASM, FileKind.XCOFF})

#: COFF object machine types `identify_magic` recognises (the first two bytes, little-endian):
#: i386, ARMNT, m68k, PA-RISC, x86-64, ARM64, ARM64EC.
COFF_MACHINES = frozenset({0x014C, 0x01C4, 0x0268, 0x0290, 0x8664, 0xAA64, 0xA641})

#: Text bundle comment prefix -> a bundler `-type` whose files use it.
TEXT_BUNDLE_COMMENTS = {b"//": "i", b";": "ll", b"#": "s"}
_TEXT_START = b" " + BUNDLE_MAGIC + b"__START__ "
_TEXT_MARKER = re.compile(rb"\n(//|#|;)" + re.escape(_TEXT_START))

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

# The smallest header `createBinary` accepts per object kind (ELF is checked by parsing it).
_MIN_OBJECT_SIZE = {FileKind.COFF: 20, FileKind.MACHO: 28, FileKind.WASM: 8, FileKind.XCOFF: 20}


def text_bundle_comment(buf) -> bytes | None:
    """The comment prefix of a text bundle starting at `buf` ("\\n// __CLANG_..."), else None."""
    first = bytes(buf[:4 + len(_TEXT_START)])
    for comment in TEXT_BUNDLE_COMMENTS:
        if first.startswith(b"\n" + comment + _TEXT_START):
            return comment
    return None


def text_bundle_type(buf) -> str | None:
    """The bundler `-type` of the first text-bundle marker anywhere in `buf`, else None (the text
    handler, unlike the others, finds its markers after any preamble)."""
    view = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
    m = _TEXT_MARKER.search(view)
    return None if m is None else TEXT_BUNDLE_COMMENTS[m.group(1)]


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
    if head[:1] == b"\n" and text_bundle_comment(buf) is not None:
        return FileKind.TEXT_BUNDLE
    if len(head) >= 2 and (head[0] | head[1] << 8) in COFF_MACHINES:
        return FileKind.COFF
    return FileKind.UNKNOWN


def is_object_file(buf) -> bool:
    """Whether LLVM 19's bundler would pick the object handler for `buf` (`createBinary` gives an
    `ObjectFile`): a well-formed ELF file of any type, or a COFF / Mach-O / Wasm / XCOFF object by
    magic and minimum header size.  Bitcode, archives and everything else are not: LLVM then uses
    the binary bundle format (how `.hip_fatbin` contents, bundled with `-input=/dev/null`, are made)."""
    kind = identify(buf)
    if kind is FileKind.ELF:
        from . import elf
        from ..errors import ElfError

        try:
            elf.read_sections(buf)
        except ElfError:
            return False
        return True
    return kind in _MIN_OBJECT_SIZE and len(buf) >= _MIN_OBJECT_SIZE[kind]


def bundle_handler(files_type: str, buf) -> str:
    """LLVM's `CreateFileHandler`: `"text"` for the text types, `"binary"` for the binary ones,
    and for `o` / `a` `"object"` if `buf` (the host input, or the bundle) is an object file, else
    `"binary"` (how `.hip_fatbin` contents come out as binary bundles)."""
    from .bundle import BINARY_TYPES, TEXT_COMMENTS

    if files_type in TEXT_COMMENTS:
        return "text"
    if files_type in BINARY_TYPES:
        return "binary"
    return "object" if is_object_file(buf) else "binary"
