"""What the two OffloadBinary versions share (`offload_binary` reads and writes version 1,
`offload_binary_v2` version 2; each imports this module, neither imports the other's internals).

The magic, the 8-byte alignment and the 40-byte `Entry` layout (the same in both versions); the
image-kind and offload-kind ("producer") numberings of each LLVM release; `OffloadImage`, one
entry as both readers return it and both writers take it; and the helpers both readers and
writers use: NUL-terminated strings found with bounded work (`nul_ends`), strings encoded as LLVM
writes them (`encode`), the entry fields' range checks (`check_entry_fields`)."""

from __future__ import annotations

from ..errors import OffloadBinaryError
from .layout import Layout
from .kinds import OFFLOAD_BINARY_MAGIC
from ..records import Record

__all__ = [
    "MAGIC", "VERSION", "ALIGNMENT", "ENTRY", "IMAGE_KINDS", "IMG_NONE", "IMG_OBJECT", "IMG_BITCODE", "IMG_CUBIN",
    "IMG_FATBINARY", "IMG_PTX", "IMG_SPIRV", "OFFLOAD_KINDS_19", "OFFLOAD_KINDS_22", "DEFAULT_LLVM_VERSION",
    "SUPPORTED_LLVM_VERSIONS", "kinds_for", "offload_kind_value", "offload_kind_name", "image_kind_value",
    "image_kind_name", "objdump_image_kind_name", "OffloadImage", "nul_ends", "encode", "align", "image_nbytes",
    "check_entry_fields",
]

MAGIC = OFFLOAD_BINARY_MAGIC
#: Version 1's header Version (the default of `OffloadImage.version`; version 2 is `offload_binary_v2`'s).
VERSION = 1
ALIGNMENT = 8

# `llvm::object::OffloadBinary`'s Entry, field names as in LLVM (the same in versions 1 and 2).
ENTRY = Layout("Entry", [("TheImageKind", "H"), ("TheOffloadKind", "H"), ("Flags", "I"), ("StringOffset", "Q"),
                         ("NumStrings", "Q"), ("ImageOffset", "Q"), ("ImageSize", "Q")])

IMG_NONE, IMG_OBJECT, IMG_BITCODE, IMG_CUBIN, IMG_FATBINARY, IMG_PTX, IMG_SPIRV = range(7)

# `getImageKindName` (19): value -> name; anything else is "".  IMG_SPIRV (6) exists only in 22.
IMAGE_KINDS = {0: "none", 1: "o", 2: "bc", 3: "cubin", 4: "fatbin", 5: "s"}
_IMAGE_KIND_BY_EXT = {"o": IMG_OBJECT, "bc": IMG_BITCODE, "cubin": IMG_CUBIN, "fatbin": IMG_FATBINARY,
                      "s": IMG_PTX}
# llvm-objdump's names (OffloadDump.cpp `getImageName`).
_OBJDUMP_IMAGE_NAMES = {1: "elf", 2: "llvm ir", 3: "cubin", 4: "fatbinary", 5: "ptx"}

# `getOffloadKind` / `getOffloadKindName` per LLVM release.
OFFLOAD_KINDS_19 = {"none": 0, "openmp": 1, "cuda": 2, "hip": 3}
OFFLOAD_KINDS_22 = {"none": 0, "openmp": 1, "cuda": 2, "hip": 4, "sycl": 8}
DEFAULT_LLVM_VERSION = 19
# 19 and 20 share one numbering (HIP = 3); 22 is checked against llvm-offload-binary-22.
# 21 is left out: when the bit-flag numbering arrived between 20 and 22 was not verified.
# 23 keeps 22's numbering and writes version 2 binaries (several entries in one; see offload_binary_v2).
SUPPORTED_LLVM_VERSIONS = (19, 20, 22, 23)


def kinds_for(llvm_version: int) -> dict[str, int]:
    """The offload-kind numbering of LLVM `llvm_version` (an error naming the supported ones)."""
    if llvm_version in (19, 20):
        return OFFLOAD_KINDS_19
    if llvm_version in (22, 23):
        # Offload kinds are bit flags (HIP = 4) since LLVM 22.
        return OFFLOAD_KINDS_22
    raise OffloadBinaryError(
        f"unsupported LLVM version {llvm_version} (supported: {', '.join(map(str, SUPPORTED_LLVM_VERSIONS))})")


def offload_kind_value(name: str, llvm_version: int = DEFAULT_LLVM_VERSION) -> int:
    """`getOffloadKind(name)` of LLVM `llvm_version`: unknown names are OFK_None (0)."""
    return kinds_for(llvm_version).get(name, 0)


def offload_kind_name(value: int, llvm_version: int | None = None) -> str:
    """`getOffloadKindName(value)` of LLVM `llvm_version`.

    With no version, value 3 is reported as ambiguous: it is HIP as written by LLVM 19/20, but
    the bit-flag combination OpenMP|CUDA for LLVM 22 (whose tools print it as `none`)."""
    if llvm_version is not None:
        for name, v in kinds_for(llvm_version).items():
            if v == value:
                return name
        return "none"
    if value == 3:
        return "hip (LLVM 19) or cuda|openmp (LLVM 22)"
    for name, v in OFFLOAD_KINDS_22.items():
        if v == value:
            return name
    return "none"


def image_kind_value(name: str) -> int:
    """`getImageKind(name)`: image kind from a file extension (without the dot)."""
    return _IMAGE_KIND_BY_EXT.get(name, IMG_NONE)


def image_kind_name(value: int, llvm_version: int | None = None) -> str:
    """`getImageKindName(value)`: the extension LLVM uses for an image kind ("" if none)."""
    if value == IMG_SPIRV and (llvm_version is None or llvm_version >= 22):
        return "spv"
    return IMAGE_KINDS.get(value, "") if value != IMG_NONE else ""


def objdump_image_kind_name(value: int) -> str:
    """The image kind as `llvm-objdump --offloading` prints it."""
    return _OBJDUMP_IMAGE_NAMES.get(value, "<none>")


class OffloadImage(Record):
    """One OffloadBinary entry: kinds, flags, string metadata (in string-entry order) and the image.

    `llvm_version` is the LLVM whose producer numbering applies (None: unknown; see
    `offload_kind_name`).  `offset`/`size` locate the binary in the buffer it was read from."""

    __slots__ = ("image_kind", "offload_kind", "flags", "strings", "image", "llvm_version", "offset", "size",
                 "version", "index")
    _uncompared = frozenset({"offset", "size", "version", "index"})

    def __init__(self, image_kind: int, offload_kind: int, flags: int, strings: dict[str, str],
                 image: bytes | memoryview, llvm_version: int | None = None, offset: int = 0, size: int = 0,
                 version: int = VERSION, index: int = 0) -> None:
        self.image_kind = image_kind
        self.offload_kind = offload_kind
        self.flags = flags
        self.strings = strings
        self.image = image
        self.llvm_version = llvm_version
        self.offset = offset
        self.size = size
        #: The binary's header Version (1 or 2) and this entry's index in it (version 2 holds several).
        self.version = version
        self.index = index

    @property
    def triple(self) -> str:
        return self.strings.get("triple", "")

    @property
    def arch(self) -> str:
        return self.strings.get("arch", "")

    def kind_name(self, llvm_version: int | None = -1) -> str:
        """Producer name (`openmp`, `cuda`, `hip`, ...); defaults to the image's own LLVM version."""
        return offload_kind_name(self.offload_kind, self.llvm_version if llvm_version == -1 else llvm_version)

    @property
    def producer(self) -> str:
        return self.kind_name()

    @property
    def image_kind_name(self) -> str:
        """Extension-style name (`o`, `bc`, ...; "" for none) as in LLVM's generated file names."""
        return image_kind_name(self.image_kind, self.llvm_version)

    def get(self, key: str) -> str:
        """`OffloadBinary::getString(key)`: missing keys read as ""."""
        return self.strings.get(key, "")


def _find_nul(buf, start: int, limit: int) -> int:
    """Index of the first NUL in buf[start:limit], or -1 (searched in chunks, no big copies)."""
    pos = start
    step = 256
    while pos < limit:
        end = min(limit, pos + step)
        i = bytes(buf[pos:end]).find(b"\0")
        if i >= 0:
            return pos + i
        pos = end
        step = min(step * 4, 1 << 20)
    return -1


def nul_ends(buf, base: int, size: int, offsets, what: str) -> dict[int, int]:
    """For each string offset into the table at `base` (`size` bytes), the position of the NUL that
    ends it; offsets are visited in order so strings sharing one unterminated run cost one scan.
    `what` begins the error for a string with no NUL inside the binary."""
    ends: dict[int, int] = {}
    prev_nul = -1
    for off in sorted(offsets):
        start = base + off
        if start > prev_nul:
            prev_nul = _find_nul(buf, start, base + size)
            if prev_nul < 0:
                raise OffloadBinaryError(f"{what} at {off:#x} is not NUL-terminated inside the binary")
        ends[off] = prev_nul
    return ends


def encode(s: str | bytes) -> bytes:
    """A string as the writers store it (any byte sequence round-trips through `surrogateescape`)."""
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)


def align(n: int) -> int:
    """`n` rounded up to the binary's alignment (8)."""
    return (n + ALIGNMENT - 1) & ~(ALIGNMENT - 1)


def image_nbytes(image: OffloadImage) -> int:
    """The size in bytes of `image.image`."""
    return len(image.image) if not isinstance(image.image, memoryview) else image.image.nbytes


def _check_u(value: int, bits: int, what: str) -> None:
    if not isinstance(value, int) or value < 0 or value >= 1 << bits:
        raise OffloadBinaryError(f"{what} {value!r} does not fit in {bits} bits")


def check_entry_fields(image: OffloadImage) -> None:
    """The kinds and flags of `image` fit the Entry's fields (what a writer checks first)."""
    _check_u(image.image_kind, 16, "image kind")
    _check_u(image.offload_kind, 16, "offload kind")
    _check_u(image.flags, 32, "flags")
