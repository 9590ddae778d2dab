"""The words the formats share, below every format module: the kinds of file `magic.identify`
tells apart (`FileKind`), the magic numbers, and `Format`, the record in which a format module
declares what it is and how the operations look inside it.

This module imports nothing of the library.  The format modules import their magic numbers and
`Format` from here, and `magic`, above them all, gathers their declarations into one table; a
format module never asks `magic.identify` (that would make an import circle), it checks its own
leading bytes."""

from __future__ import annotations

import enum
from collections import namedtuple
from collections.abc import Callable, Iterable

from ..records import FrozenRecord

__all__ = ["FileKind", "Format", "OffloadBinariesAt", "FORMATS", "COFF_MACHINES", "TEXT_BUNDLE_COMMENTS",
           "TEXT_BUNDLE_START", "ELF_MAGIC", "AR_MAGIC", "THIN_AR_MAGIC", "OFFLOAD_BINARY_MAGIC", "BC_MAGIC",
           "BC_WRAPPER_MAGIC", "CCOB_MAGIC", "BUNDLE_MAGIC", "FATBIN_MAGIC", "KPACK_MAGIC"]

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
    """The kinds `identify` tells apart (values are stable words, usable in messages).  A format
    module added later may declare a kind of its own (any enum member with a word as its value)."""

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


class OffloadBinariesAt(namedtuple("OffloadBinariesAt", ("section", "key", "data", "where"))):
    """Bytes of a file that hold OffloadBinaries back to back, as a format's `offload_binaries`
    names them for `extract`.  `section` (str or None) names them in image paths
    (`file:section[i]`; None: the images are numbered after the file itself, `file[i]`); `key`
    is the same for two places that are the same bytes (parsed once), None when no other place
    can name them; `data` holds the bytes; `where` (str) prefixes errors about them and names
    their budget charges."""

    __slots__ = ()


class Format(FrozenRecord):
    """What one format module declares about one kind of file, in its `FORMATS` tuple.

    Recognising it (`magic.identify`): `magics`, leading bytes that say it is this kind (the
    longest match wins); otherwise `recognise(head, buf)`, asked in the table's order after every
    magic failed to match (`head` is the first 32 bytes as `bytes`).

    Inspecting it (`ops.inspector`): a format with a `container` word is listed wherever it is
    found, as a whole file or as bytes inside another container.  Either `members(buf, name)`
    yields `(member name, bytes)` searched like whole files (archives), or
    `inspect(scan, data, path, wrappers, depth, compressed)` lists its images through the scanner
    it is given (`ops.inspector._Scanner`: its `llvm_version` and `keep_data`, and its public
    methods, `add_image`, `image_kind`, `leaf_or_nested`, `scan_container`, `add_offload_image`,
    `scan_bundle_entries`, `remember` / `forget`, `container_at`), so the format module needs
    nothing above its tier.  A container declares one of `inspect` and `members`.
    Host objects that carry containers in sections (ELF, COFF, bitcode) have no `container` word:
    the inspector searches them itself.

    Extracting from it (`ops.extract`): `extract` is the format's word in `file_kind`,
    `offload_binaries(buf, name)` yields the `OffloadBinariesAt` places in it (lazily: an error in
    one stops the search there, as in LLVM), `members` is searched member by member, and
    `no_images` says why a file of this kind yielded none."""

    __slots__ = ("kind", "magics", "recognise", "container", "inspect", "members", "extract", "offload_binaries",
                 "no_images")
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(self, kind: enum.Enum, magics: tuple[bytes, ...] = (),
                 recognise: Callable[[bytes, object], bool] | None = None, container: str | None = None,
                 inspect: Callable[..., None] | None = None,
                 members: Callable[[object, str], Iterable[tuple[str, object]]] | None = None,
                 extract: str | None = None,
                 offload_binaries: Callable[[object, str], Iterable[OffloadBinariesAt]] | None = None,
                 no_images: str | None = None) -> None:
        self._set("kind", kind)
        self._set("magics", magics)
        self._set("recognise", recognise)
        self._set("container", container)
        self._set("inspect", inspect)
        self._set("members", members)
        self._set("extract", extract)
        self._set("offload_binaries", offload_binaries)
        self._set("no_images", no_images)
        if container and (inspect is None) == (members is None):
            raise TypeError(f"format {container!r}: a container declares either `inspect` or `members`")


#: The object-file kinds `identify_magic` recognises whose contents the library reads through no
#: module of its own.
FORMATS = (
    Format(FileKind.MACHO, magics=(b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe",
                                    b"\xcf\xfa\xed\xfe")),
    Format(FileKind.WASM, magics=(b"\0asm",)),
    Format(FileKind.XCOFF, magics=(b"\x01\xdf", b"\x01\xf7")),   # 32-bit, 64-bit
)
