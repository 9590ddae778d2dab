"""Converting heterogeneous static libraries between the old and the new offload driver.

The old driver's archives hold bundles: fat objects with `__CLANG_OFFLOAD_BUNDLE__<id>` sections
(`-fgpu-rdc -c`), or binary/compressed bundles whose host entry is the host object. clang's old
driver unbundles them at link time (`clang-offload-bundler -type=a`); the new driver does not, and
upstream clang's main drops that path. The new driver's archives hold fat objects whose
`.llvm.offloading` section carries OffloadBinary packages, which clang-linker-wrapper extracts.

`convert_archive(..., to="new")` rewrites each bundle member as such a fat object: the host
object without its bundle sections, plus one OffloadBinary per device entry (producer from the
entry's offload kind: `hip`/`hipv4` -> hip, `openmp` -> openmp; triple and target ID as the entry
names them, so `gfx90a:xnack+` stays `gfx90a:xnack+`; image kind from the payload's magic).
`to="old"` goes back: each fat object becomes an object bundle, one section per image
(`hip-` for bitcode, `hipv4-` for code objects, `openmp-`) plus the host entry, in sorted ID
order as clang writes them. Members with no device code (plain objects, symbol-less files) are
copied unchanged. The output is written only when every member converted, atomically."""

from __future__ import annotations

import io

from ..errors import ArchiveError, BundleError, OffloadBinaryError, UsageError
from ..fileio import atomic_output, open_input
from ..formats import elf
from ..formats.archive import read_archive, write_archive
from ..formats.magic import FileKind, identify
from ..formats.offload_binary import (DEFAULT_LLVM_VERSION, IMG_BITCODE, IMG_NONE, OFFLOADING_SECTION, OffloadImage,
                                      image_kind_from_content, offload_kind_value, read_offload_binaries,
                                      write_offload_binary)
from ..rules.triple import split_triple4
from .embed import embed_offload_package
from ..records import Record

__all__ = ["MemberConversion", "convert_archive", "infer_direction", "DIRECTIONS"]

DIRECTIONS = ("new", "old")

# Bundle offload kinds -> OffloadBinary producers, and back (bitcode or code object for HIP).
_PRODUCER_OF_BUNDLE_KIND = {"hip": "hip", "hipv4": "hip", "openmp": "openmp"}
_HOST_TRIPLE_OF_MACHINE = {"EM_X86_64": "x86_64-unknown-linux-gnu", "EM_AARCH64": "aarch64-unknown-linux-gnu",
                           "EM_PPC64": "powerpc64le-unknown-linux-gnu", "EM_RISCV": "riscv64-unknown-linux-gnu"}


class MemberConversion(Record):
    """What became of one archive member: its name, and the device entry IDs (old world) or
    `producer triple arch` images (new world) it now carries; none when it was copied as is."""

    __slots__ = ("name", "entries")

    def __init__(self, name: str, entries: list[str] | None = None) -> None:
        self.name = name
        self.entries = [] if entries is None else entries


def _triple_text(four: str) -> str:
    """A bundle entry's 4-field triple (`amdgcn-amd-amdhsa-`) as clang names it in an OffloadBinary."""
    return "-".join(split_triple4(four)).rstrip("-")


def _old_member_entries(name: str, data):
    """(host object, device entries) of a member that is a bundle, or None when it is not one."""
    from .hda import archive_member_entries

    kind = identify(data)
    if kind is FileKind.ELF:
        if not any(s.name.startswith("__CLANG_OFFLOAD_BUNDLE__") for s in elf.read_sections(data)):
            return None
    elif kind not in (FileKind.CLANG_BUNDLE, FileKind.COMPRESSED_BUNDLE):
        return None
    from ..rules.bundle_id import standardize
    host, devices = None, []
    for entry in archive_member_entries(data, where=f"archive member '{name}'"):
        bid = standardize(entry.bundle_entry_id)
        if bid.is_host:
            host = entry.data
        else:
            devices.append((bid, entry.data))
    if host is None or not elf.is_elf(host):
        raise BundleError(f"archive member '{name}': its bundle has no host object (a host entry holding an ELF "
                          "object), so it cannot become a fat object")
    return host, devices


def _to_new(name: str, data, llvm_version: int) -> tuple[bytes, MemberConversion] | None:
    found = _old_member_entries(name, data)
    if found is None:
        return None
    host, devices = found
    package = bytearray()
    report = MemberConversion(name)
    for bid, payload in devices:
        producer = _PRODUCER_OF_BUNDLE_KIND.get(bid.kind)
        if producer is None:
            raise BundleError(f"archive member '{name}': entry '{bid}' has offload kind '{bid.kind}', which the new "
                              f"driver has no producer for (expected {', '.join(sorted(_PRODUCER_OF_BUNDLE_KIND))})")
        if not bid.target_id:
            raise BundleError(f"archive member '{name}': entry '{bid}' names no target ID (arch)")
        triple = _triple_text(bid.triple)
        kind = image_kind_from_content(payload)
        image = OffloadImage(IMG_NONE if kind is None else kind, offload_kind_value(producer, llvm_version), 0,
                             {"triple": triple, "arch": bid.target_id}, payload, llvm_version)
        package += write_offload_binary(image)
        report.entries.append(f"{producer} {triple} {bid.target_id}")
    out = io.BytesIO()
    if package:
        embed_offload_package(host, bytes(package), out)
    else:
        out.write(bytes(host))
    return out.getvalue(), report


def _host_triple(name: str, data) -> str:
    machine = elf.open_elffile(data)["e_machine"]
    triple = _HOST_TRIPLE_OF_MACHINE.get(machine)
    if triple is None:
        raise UsageError(f"archive member '{name}': no host triple known for ELF machine {machine}; "
                         "give one (--host-triple)")
    return triple


def _to_old(name: str, data, llvm_version: int | None, host_triple: str | None) -> tuple[bytes, MemberConversion] | None:
    from ..formats.objbundle import write_object_bundle
    from ..rules.bundle_id import standard_entry_id

    if identify(data) is not FileKind.ELF:
        return None
    sections = [s for s in elf.read_sections(data)
                if s.sh_type == elf.SHT_LLVM_OFFLOADING or s.name == OFFLOADING_SECTION]
    if not sections:
        return None
    images: list[OffloadImage] = []
    for sec in sections:
        try:
            images.extend(read_offload_binaries(sec.data, llvm_version=llvm_version))
        except OffloadBinaryError as exc:
            raise OffloadBinaryError(f"archive member '{name}', section '{sec.name}' at offset {sec.offset:#x}: "
                                     f"{exc}") from None
    entries: dict[str, object] = {}
    for img in images:
        producer = img.kind_name(llvm_version if llvm_version is not None else img.llvm_version)
        if producer.startswith("hip"):
            kind = "hip" if img.image_kind == IMG_BITCODE or identify(img.image) is FileKind.BITCODE else "hipv4"
        elif producer == "openmp":
            kind = "openmp"
        else:
            raise BundleError(f"archive member '{name}': image for '{img.arch}' has producer '{producer}', which "
                              "old-format bundles cannot name (they know hip and openmp)")
        if not img.triple or not img.arch:
            raise BundleError(f"archive member '{name}': an image without triple or arch cannot be a bundle entry")
        bundle_entry_id = standard_entry_id(kind, img.triple, img.arch)
        if bundle_entry_id in entries:
            raise BundleError(f"archive member '{name}': two images for bundle entry '{bundle_entry_id}'")
        entries[bundle_entry_id] = img.image
    host_id = standard_entry_id("host", host_triple or _host_triple(name, data))
    stripped = io.BytesIO()
    elf.remove_sections(data, lambda s: s.sh_type == elf.SHT_LLVM_OFFLOADING or s.name == OFFLOADING_SECTION,
                        stripped)
    entries[host_id] = b"\0"
    out = io.BytesIO()
    write_object_bundle(stripped.getvalue(), sorted(entries.items()), out)
    return out.getvalue(), MemberConversion(name, sorted(i for i in entries if i != host_id))


def _member_format(data) -> str | None:
    """'old' for a member that is a clang offload bundle (an object with `__CLANG_OFFLOAD_BUNDLE__*`
    sections, a binary or compressed bundle), 'new' for a fat object with `.llvm.offloading`,
    None for a member without device code."""
    kind = identify(data)
    if kind in (FileKind.CLANG_BUNDLE, FileKind.COMPRESSED_BUNDLE):
        return "old"
    if kind is not FileKind.ELF:
        return None
    for s in elf.read_sections(data):
        if s.name.startswith("__CLANG_OFFLOAD_BUNDLE__"):
            return "old"
        if s.sh_type == elf.SHT_LLVM_OFFLOADING or s.name == OFFLOADING_SECTION:
            return "new"
    return None


def infer_direction(input_path: str) -> tuple[str, str]:
    """Which way to convert the archive `input_path` when no direction is given, and why: ('new',
    ...) when its members are clang offload bundles, ('old', ...) when they carry `.llvm.offloading`.
    An archive holding both, or neither, is a `UsageError` asking for `--to`."""
    with open_input(input_path) as buf:
        if identify(buf) is not FileKind.ARCHIVE:
            raise ArchiveError(f"'{input_path}' is not a static archive (no '!<arch>' magic)")
        found: dict[str, str] = {}
        for m in read_archive(buf):
            fmt = _member_format(m.data)
            if fmt is not None:
                found.setdefault(fmt, m.name)
    if len(found) == 2:
        raise UsageError(f"'{input_path}' holds both clang offload bundles ('{found['old']}') and .llvm.offloading "
                         f"fat objects ('{found['new']}'); say which way to convert (--to=new or --to=old)")
    if "old" in found:
        return "new", f"'{input_path}' holds clang offload bundles (member '{found['old']}')"
    if "new" in found:
        return "old", f"'{input_path}' holds .llvm.offloading fat objects (member '{found['new']}')"
    raise UsageError(f"'{input_path}' holds no device code (no clang offload bundles, no .llvm.offloading); "
                     "nothing tells which way to convert (--to=new or --to=old)")


def convert_archive(input_path: str, output_path: str, *, to: str, llvm_version: int | None = None,
                    host_triple: str | None = None) -> list[MemberConversion]:
    """Write `output_path`, the archive `input_path` with its members converted to the `to`
    ('new' or 'old') driver's format (see the module docstring); one `MemberConversion` per member.
    `llvm_version` is how OffloadBinary producers are numbered (written for 'new', read for 'old')."""
    if to not in DIRECTIONS:
        raise UsageError(f"unknown conversion target '{to}' (expected 'new' or 'old')")
    with open_input(input_path) as buf:
        if identify(buf) is not FileKind.ARCHIVE:
            raise ArchiveError(f"'{input_path}' is not a static archive (no '!<arch>' magic)")
        members = []
        reports = []
        for m in read_archive(buf):
            if to == "new":
                done = _to_new(m.name, m.data, DEFAULT_LLVM_VERSION if llvm_version is None else llvm_version)
            else:
                done = _to_old(m.name, m.data, llvm_version, host_triple)
            data, report = done if done is not None else (m.data, MemberConversion(m.name))
            members.append((m.name, data))
            reports.append(report)
        with atomic_output(output_path) as out:
            write_archive(members, out)
    return reports
