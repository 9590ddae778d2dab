"""Finding OffloadBinary images wherever LLVM finds them (`extractOffloadBinaries`).

Dispatch is on the file's magic, as LLVM's `identify_magic` (`magic.identify_format`), and what
is searched is what each format module declares (`Format.offload_binaries`, `Format.members`):
a raw package (`10 FF 10 AD`) is read back to back; ELF relocatable objects, executables and
shared libraries contribute every section of type `SHT_LLVM_OFFLOADING` (the name does not
matter), COFF objects every section whose name starts with `.llvm.offloading`; LLVM bitcode
contributes the globals listed in the `llvm.embedded.objects` named metadata whose section is
`.llvm.offloading`; static archives are searched member by member, recursively.  Anything else
holds no images (not an error, as in LLVM).  Nothing here is particular to one format.

As in LLVM, every section header counts, even several naming the same bytes; such bytes are
parsed once, and every image found is charged to the run's `entries` budget, archive nesting to
its `depth` budget (`offload_tool.budget`), so work stays bounded by what the input holds."""

from __future__ import annotations

from .. import budget
from ..errors import OffloadBinaryError
from ..fileio import byte_view
from ..formats.magic import Format, identify_format
from ..formats.offload_binary import OffloadImage, read_offload_binaries
from ..records import Record

__all__ = ["FoundImage", "find_offload_images", "file_kind", "why_no_images", "MAX_ARCHIVE_DEPTH"]

#: The default archive nesting limit (the `depth` budget, raised with --budget=depth=N).
MAX_ARCHIVE_DEPTH = budget.DEFAULT_LIMITS.depth


class FoundImage(Record):
    """An image and where it was found.

    `path` names the file, archive member and section, e.g. `lib.a(member.o):.llvm.offloading[0]`
    (the index counts binaries within that section or package).  `container` is `package` (a raw
    OffloadBinary file), `elf`, `coff` or `bitcode`.  `member` is the innermost archive member name (the
    buffer identifier LLVM gives the image: the input path, or the archive child's name)."""

    __slots__ = ("path", "container", "image", "section", "member", "index")

    def __init__(self, path: str, container: str, image: OffloadImage, section: str | None,
                 member: str | None = None, index: int = 0) -> None:
        self.path = path
        self.container = container
        self.image = image
        self.section = section
        self.member = member
        self.index = index


def file_kind(buf) -> str:
    """Which searcher extraction uses for `buf` (its format's word, `Format.extract`): `package`,
    `elf`, `coff`, `bitcode`, `archive` or `other` (holds no images)."""
    fmt = identify_format(buf)
    return fmt.extract if fmt is not None and fmt.extract else "other"


def why_no_images(buf) -> str:
    """Why `find_offload_images` found nothing in `buf`, in a few words (for a warning)."""
    fmt = identify_format(buf)
    if fmt is not None and fmt.extract and fmt.no_images:
        return fmt.no_images
    if fmt is not None:
        return f"not a container offload images are extracted from (a file of kind '{fmt.kind.value}')"
    return ("not an offload package, object file, bitcode or archive (no known magic number)" if len(buf) else
            "the file is empty")


def _offload_images(fmt: Format, buf, name: str, member: str | None, llvm_version: int | None) -> list[FoundImage]:
    """The OffloadBinaries at each place `fmt` names in `buf`; a place whose key an earlier one
    had (several section headers naming the same bytes) is parsed once."""
    found: list[FoundImage] = []
    parsed: dict[object, list[OffloadImage]] = {}
    for place in fmt.offload_binaries(buf, name):
        images = parsed.get(place.key) if place.key is not None else None
        if images is None:
            try:
                images = read_offload_binaries(place.data, llvm_version=llvm_version)
            except OffloadBinaryError as exc:
                raise OffloadBinaryError(f"{place.where}: {exc}") from None
            if place.key is not None:
                parsed[place.key] = images
        budget.charge("entries", len(images), place.where)
        prefix = f"{name}:{place.section}" if place.section is not None else name
        found.extend(FoundImage(f"{prefix}[{i}]", fmt.extract, img, place.section, member, i)
                     for i, img in enumerate(images))
    return found


def _member_images(fmt: Format, buf, name: str, llvm_version: int | None, depth: int) -> list[FoundImage]:
    members = fmt.members(buf, name)  # a thin archive is refused here, before any nesting
    found: list[FoundImage] = []
    with budget.nested(f"{name}: {fmt.extract}"):
        for member_name, data in members:
            found.extend(_find(data, f"{name}({member_name})", member_name, llvm_version, depth + 1))
    return found


def _find(buf, name: str, member: str | None, llvm_version: int | None, depth: int) -> list[FoundImage]:
    fmt = identify_format(buf)
    if fmt is None or not fmt.extract:
        return []
    if fmt.members is not None:
        return _member_images(fmt, buf, name, llvm_version, depth)
    if fmt.offload_binaries is not None:
        return _offload_images(fmt, buf, name, member, llvm_version)
    return []


def find_offload_images(buf, name: str, *, llvm_version: int | None = None) -> list[FoundImage]:
    """Every OffloadBinary image in `buf` (a file's contents; `name` is used in paths and errors).

    Bad packages raise `OffloadBinaryError`; bad containers the container's `OffloadError`."""
    with budget.run():
        return _find(byte_view(buf), name, None, llvm_version, 0)
