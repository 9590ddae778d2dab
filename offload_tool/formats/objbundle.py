"""Object-file bundles (`clang-offload-bundler -type=o`): device code in host-object sections.

LLVM 19 bundles into an object by running `llvm-objcopy --add-section=__CLANG_OFFLOAD_BUNDLE__<id>=<file>
--set-section-flags=...=readonly,exclude` for each target, the host entry being a one-byte file
holding 0x00.  Here the sections are added natively (`elf.add_sections`):
`SHT_PROGBITS`, flags `SHF_EXCLUDE` only, alignment 1, appended after the existing sections in
`-targets` order, so the static linker drops them and the host code is untouched.

Reading follows `ObjectFileHandler`: every section whose name is at least 25 characters and starts
with `__CLANG_OFFLOAD_BUNDLE__` is an entry (ID = the rest of the name), in section order.  An entry
whose contents are exactly one 0x00 byte is the host entry; its payload is the object itself with
every `__CLANG_OFFLOAD_BUNDLE__*` section removed (LLVM runs `llvm-objcopy --regex
--remove-section=__CLANG_OFFLOAD_BUNDLE__.*`; llvm-objcopy anchors the regex, so that is every name
starting with the magic).  Like objcopy's, our result is a re-serialization, not the original
bytes; it links and runs the same.

Only ELF files are edited and read (relocatable objects, and also executables and shared objects,
which LLVM's objcopy-based bundler accepts as hosts too).  LLVM's handler choice accepts any `ObjectFile` (ELF, COFF,
Mach-O, Wasm, XCOFF); `magic.is_object_file` answers as LLVM does, and reading or writing a non-ELF object
raises `BundleFormatError` rather than silently falling back to another format.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import elf
from ..errors import BundleFormatError
from .kinds import BUNDLE_MAGIC

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["OFFLOAD_BUNDLE_MAGIC", "HOST_MARKER", "is_bundle_section_name", "bundle_entry_id_of",
           "read_object_bundle", "object_bundle_ids", "write_object_bundle", "strip_bundle_sections", "bundle_section_name"]

OFFLOAD_BUNDLE_MAGIC = BUNDLE_MAGIC.decode("ascii")
HOST_MARKER = b"\0"

# identify_magic's `offload_bundle` needs sizeof("__CLANG_OFFLOAD_BUNDLE__") (with its NUL) bytes.
_MIN_BUNDLE_NAME = len(OFFLOAD_BUNDLE_MAGIC) + 1


def is_bundle_section_name(name: str) -> bool:
    """Whether LLVM's object handler reads a section of this name as a bundle entry."""
    return len(name) >= _MIN_BUNDLE_NAME and name.startswith(OFFLOAD_BUNDLE_MAGIC)


def bundle_entry_id_of(section_name: str) -> str:
    """The bundle entry ID a bundle section's name carries."""
    return section_name[len(OFFLOAD_BUNDLE_MAGIC):]


def bundle_section_name(bundle_entry_id: str) -> str:
    return OFFLOAD_BUNDLE_MAGIC + bundle_entry_id


def _require_elf(buf, what: str) -> None:
    if not elf.is_elf(buf):
        raise BundleFormatError(f"cannot {what}: only ELF objects are supported (LLVM also accepts COFF, "
                                f"Mach-O and others; this input is not ELF)")


def object_bundle_ids(buf) -> list[str]:
    """The entry IDs of an ELF object bundle in section order, without extracting anything (what
    `-list` and `-check-input-archive` need; the host entry is not stripped here)."""
    _require_elf(buf, "read an object bundle")
    return [bundle_entry_id_of(s.name) for s in elf.read_sections(buf) if is_bundle_section_name(s.name)]


def read_object_bundle(buf) -> list:
    """The bundle entries of an ELF object (`BundleEntry` list, section order).

    Device payloads are memoryview slices of `buf`; the host entry (contents exactly `b"\\0"`) is
    the object without its bundle sections, as bytes."""
    from .bundle import BundleEntry

    _require_elf(buf, "read an object bundle")
    entries = []
    stripped = None
    for sec in elf.read_sections(buf):
        if not is_bundle_section_name(sec.name):
            continue
        bundle_entry_id = bundle_entry_id_of(sec.name)
        if sec.size == 1 and bytes(sec.data) == HOST_MARKER:
            if stripped is None:
                stripped = _stripped_bytes(buf)
            entries.append(BundleEntry(bundle_entry_id, stripped, 0))
        else:
            entries.append(BundleEntry(bundle_entry_id, sec.data, sec.offset))
    return entries


def _stripped_bytes(buf) -> bytes:
    import io

    out = io.BytesIO()
    strip_bundle_sections(buf, out)
    return out.getvalue()


def write_object_bundle(host_object, entries: Sequence[tuple[str, object]], out: BinaryIO) -> None:
    """Write `host_object` (an ELF relocatable object) with one `__CLANG_OFFLOAD_BUNDLE__<id>`
    section per `(standardized id, payload)` in the order given; the caller passes `b"\\0"` as the
    host entry's payload (as LLVM's bundler does)."""
    _require_elf(host_object, "bundle into an object")
    sections = []
    for bundle_entry_id, payload in entries:
        if not bundle_entry_id:
            raise BundleFormatError("cannot bundle an entry with an empty bundle entry ID")
        sections.append(elf.NewSection(bundle_section_name(bundle_entry_id), payload, elf.SHT_PROGBITS,
                                       elf.SHF_EXCLUDE, 1))
    elf.add_sections(host_object, sections, out)


def strip_bundle_sections(buf, out: BinaryIO) -> None:
    """Write `buf` without any section whose name starts with `__CLANG_OFFLOAD_BUNDLE__`."""
    _require_elf(buf, "strip bundle sections")
    elf.remove_sections(buf, lambda s: s.name.startswith(OFFLOAD_BUNDLE_MAGIC), out)
