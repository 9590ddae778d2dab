"""Object-file bundles (`clang-offload-bundler -type=o`): device code in host-object sections.

LLVM 19 bundles into an object by running `llvm-objcopy --add-section=__CLANG_OFFLOAD_BUNDLE__<id>=<file>
--set-section-flags=...=readonly,exclude` for each target, the host entry being a one-byte file
holding 0x00 (llvm-formats.md §3).  Here the sections are added natively (`elf.add_sections`):
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
Mach-O, Wasm, XCOFF); `is_object_file` answers as LLVM does, and reading or writing a non-ELF object
raises `BundleFormatError` rather than silently falling back to another format.
"""

from __future__ import annotations

from typing import BinaryIO, Sequence

from . import elf
from .errors import BundleFormatError, ElfError

__all__ = ["OFFLOAD_BUNDLE_MAGIC", "HOST_MARKER", "is_object_file", "is_elf_object", "read_object_bundle",
           "object_bundle_ids",
           "write_object_bundle", "strip_bundle_sections", "bundle_section_name"]

OFFLOAD_BUNDLE_MAGIC = "__CLANG_OFFLOAD_BUNDLE__"
HOST_MARKER = b"\0"

# identify_magic's `offload_bundle` needs sizeof("__CLANG_OFFLOAD_BUNDLE__") (with its NUL) bytes.
_MIN_BUNDLE_NAME = len(OFFLOAD_BUNDLE_MAGIC) + 1

_MACHO_MAGICS = {b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe"}
# COFF object machine types identify_magic recognizes (first two bytes, little-endian): i386, ARMNT,
# m68k, PA-RISC, x86-64, ARM64, ARM64EC.
_COFF_MACHINES = {0x014C, 0x01C4, 0x0268, 0x0290, 0x8664, 0xAA64, 0xA641}


def is_elf_object(buf) -> bool:
    """True if `buf` is an ELF file whose headers parse (what LLVM's createBinary needs for ELF)."""
    if not elf.is_elf(buf):
        return False
    try:
        elf.read_sections(buf)
    except ElfError:
        return False
    return True


def is_object_file(buf) -> bool:
    """Whether LLVM 19's bundler would pick the object handler for `buf` (`createBinary` gives an
    `ObjectFile`): a well-formed ELF file of any type, or a COFF / Mach-O / Wasm / XCOFF object by
    magic.  Bitcode, archives, Mach-O universal files and everything else are not: LLVM then uses
    the binary bundle format (how `.hip_fatbin` contents, bundled with `-input=/dev/null`, are made).
    For non-ELF formats only the magic is checked here, not the full header."""
    n = len(buf)
    if n >= 4 and bytes(buf[:4]) == b"\x7fELF":
        return is_elf_object(buf)
    head = bytes(buf[:4])
    if n >= 28 and head in _MACHO_MAGICS:
        return True
    if n >= 8 and head == b"\0asm":
        return True
    if n >= 20 and (head[0] | head[1] << 8) in _COFF_MACHINES:
        return True
    if n >= 20 and head[:2] in (b"\x01\xdf", b"\x01\xf7"):  # XCOFF 32 / 64
        return True
    return False


def bundle_section_name(bundle_entry_id: str) -> str:
    return OFFLOAD_BUNDLE_MAGIC + bundle_entry_id


def _require_elf(buf, what: str) -> None:
    if not elf.is_elf(buf):
        raise BundleFormatError(f"cannot {what}: only ELF objects are supported (LLVM also accepts COFF, "
                                f"Mach-O and others; this input is not ELF)")


def _is_bundle_section(sec: elf.ElfSection) -> bool:
    return len(sec.name) >= _MIN_BUNDLE_NAME and sec.name.startswith(OFFLOAD_BUNDLE_MAGIC)


def object_bundle_ids(buf) -> list[str]:
    """The entry IDs of an ELF object bundle in section order, without extracting anything (what
    `-list` and `-check-input-archive` need; the host entry is not stripped here)."""
    _require_elf(buf, "read an object bundle")
    return [s.name[len(OFFLOAD_BUNDLE_MAGIC):] for s in elf.read_sections(buf) if _is_bundle_section(s)]


def read_object_bundle(buf) -> list:
    """The bundle entries of an ELF object (`BundleEntry` list, section order).

    Device payloads are memoryview slices of `buf`; the host entry (contents exactly `b"\\0"`) is
    the object without its bundle sections, as bytes."""
    from .bundle import BundleEntry

    _require_elf(buf, "read an object bundle")
    entries = []
    stripped = None
    for sec in elf.read_sections(buf):
        if not _is_bundle_section(sec):
            continue
        bundle_entry_id = sec.name[len(OFFLOAD_BUNDLE_MAGIC):]
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
