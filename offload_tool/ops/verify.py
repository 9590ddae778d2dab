"""`offload-tool verify`: assert what a build ships.

Two checks:

1. **Required archs** (`--require`): every requested arch must be satisfied by some device
   image in the file.  AMDGPU archs follow target-ID compatibility (an image built for `gfx90a`
   satisfies `gfx90a:xnack+`; one built for `gfx90a:xnack+` does not satisfy `gfx90a:xnack-`),
   via `target_id.is_compatible_target_id` after canonicalising the processor name.  Other archs
   compare by name (`sm_80`); `compute_XX` asks for a PTX image of that SM.

2. **Host/device entry consistency** (`--check-entries`; on by default when the file has
   OpenMP offload entries).  clang names each OpenMP target region after the *file identity*
   of its source, `__omp_offloading_<device-id>_<inode>_<function>_l<line>`, in both the host and
   the device compile.  If a source file is re-created between the two (new inode), the names
   differ and the program silently falls back to the host at run time.  Here every host offload
   entry must name a symbol that every OpenMP device image of the same object (or program)
   defines.

Where the host entries are (checked with clang 19 and 22 on x86-64):

* clang 19 (and 20): section `omp_offloading_entries`, 32-byte `__tgt_offload_entry`
  `{ptr addr; ptr name; u64 size; i32 flags; i32 reserved}`; `name` points at a C string in a
  mergeable `.rodata.str*` section (symbol `.offloading.entry_name*`).
* clang 22 (21+): section `llvm_offload_entries`, 56-byte entries
  `{u64 reserved; u16 version=1; u16 kind; u32 flags; ptr addr; ptr name; u64 size; u64 data; ptr aux}`
  (kind 1 = OpenMP); names in `.llvm.rodata.offloading`.
* Relocatable objects: the `name` field is 0 and carries a relocation in the section's
  `SHT_RELA`/`SHT_REL` section (symbol + addend -> section offset of the string).
* Linked programs and shared libraries (clang-linker-wrapper keeps the section, with
  `__start_`/`__stop_` symbols): the field holds the string's address, or, in PIE / shared
  objects, 0 plus an `R_*_RELATIVE` dynamic relocation whose addend is the address.

Only entries whose names start with `__omp_offloading_` (target regions; the names that carry
the file identity) are checked; declare-target variables keep their source names.

Where the device names are: ELF device images (CUDA cubins, AMDGPU code objects) define them
in `.symtab`, read through the library's ELF reader (pyelftools); LLVM bitcode images (the
default for AMDGPU and `-foffload-lto`) list them in the module's IR symbol table, read exactly
as for an archive's symbol table (`bitcode.bitcode_symbols`).  Images without a symbol table
(PTX text, bitcode written without the irsymtab clang always adds) are searched for the name's
bytes: that cannot miss a name that is present, and since a wrong file identity changes the
middle of the name it still catches the mismatch this check is for; a match followed by a
decimal digit does not count (`..._l3` inside `..._l30`).

3. **Named GPUs** (`--runs-on sm_86,gfx90a:xnack-`): for each GPU, whether it can run the file's
   device code and how, by NVIDIA's and LLVM's documented compatibility (`runs_on` has the rules
   and their sources):

   * NVIDIA: SASS `sm_XY` runs on `sm_XZ` with Z >= Y (same major; not on or across Tegra SMs
     `sm_53/62/72/87/101/110`); arch-specific `sm_XYa` only on `sm_XY`; family-specific `sm_XYf`
     (CUDA 12.9+) on the same major with minor >= Y.  PTX `compute_XY` is JIT-compiled for any GPU
     of compute capability >= X.Y (`compute_XYa` only X.Y, `compute_XYf` its family).  clang's
     nvptx images are cubins (SASS) of their `sm_XY`; an LLVM IR image becomes one at link.
   * AMD: a code object runs only on its processor, except a generic target (`gfx9-generic`,
     `gfx9-4-generic`, `gfx10-1-generic`, `gfx10-3-generic`, `gfx11-generic`, `gfx12-generic`) on
     each processor of its AMDGPUUsage list; `xnack+` code needs XNACK on, `xnack-` off, code
     without the feature runs either way (`sramecc` alike).  A GPU named without a mode gets
     "only if XNACK is on", which fails the check, unless the file has code for each mode.

   A file runs on a GPU when every unit of device code in it (an object's or archive member's
   images, each fat binary of a CUDA program) has an image the GPU runs."""

from __future__ import annotations

import functools
import re

from .. import budget
from ..rules import offload_arch, openmp_runtime
from ..rules.offload_arch import arch_satisfied
from ..formats.bitcode import bitcode_symbols
from ..formats.elf import elf_type, needed_libraries, open_elffile
from ..formats.layout import Layout
from ..errors import ElfError, OffloadError, UsageError
from .inspector import DeviceImage, inspect_buffer, with_file_name
from ..formats.magic import FileKind, identify
from ..records import FrozenRecord, Record

__all__ = ["VerifyResult", "HostEntry", "verify_buffer", "verify_file", "host_offload_entries",
           "device_symbol_names", "image_has_symbol", "arch_satisfied", "OMP_ENTRY_PREFIX", "ENTRY_SECTIONS", "EntryTable",
           "parse_max_bytes", "check_max_bytes"]

OMP_ENTRY_PREFIX = "__omp_offloading_"


class EntryTable(FrozenRecord):
    """The host offload entries of one section, declared as LLVM declares the struct (`fields`:
    name and struct code, `P` for a pointer or `size_t`): which field points at the entry's name
    and which holds its offload kind (1 = OpenMP), where there is one."""

    __slots__ = ("struct", "fields", "name_field", "kind_field")

    def __init__(self, struct: str, fields: tuple[tuple[str, str], ...], name_field: str,
                 kind_field: str | None = None) -> None:
        self._set("struct", struct)
        self._set("fields", fields)
        self._set("name_field", name_field)
        self._set("kind_field", kind_field)

    def layout(self, pointer: int, byte_order: str) -> Layout:
        """The entry's layout on a host of `pointer`-byte pointers: packed, as LLVM lays the
        struct out for x86 (a 64-bit field 4-aligned on 32-bit hosts)."""
        return _entry_layout(self, pointer, byte_order)


@functools.lru_cache(maxsize=None)
def _entry_layout(table: EntryTable, pointer: int, byte_order: str) -> Layout:
    word = "Q" if pointer == 8 else "I"
    return Layout(table.struct, [(f, word if c == "P" else c) for f, c in table.fields], byte_order)


#: section name -> its entries: clang 19-20's `__tgt_offload_entry`, clang 21+'s
#: `llvm::offloading::EntryTy` (llvm/Frontend/Offloading/Utility.cpp, `getEntryTy`).
ENTRY_SECTIONS = {
    "omp_offloading_entries": EntryTable(
        "__tgt_offload_entry",
        (("addr", "P"), ("name", "P"), ("size", "P"), ("flags", "i"), ("reserved", "i")), "name"),
    "llvm_offload_entries": EntryTable(
        "EntryTy",
        (("Reserved", "Q"), ("Version", "H"), ("Kind", "H"), ("Flags", "I"), ("Address", "P"),
         ("SymbolName", "P"), ("Size", "Q"), ("Data", "Q"), ("AuxAddr", "P")), "SymbolName", "Kind"),
}
_OFK_OPENMP = 1
_MAX_NAME = 4096
_MAX_ENTRIES = 1 << 20

# pyelftools reports section types by name.
_SHT_SYMTAB, _SHT_RELA, _SHT_REL, _SHT_NOBITS, _SHT_DYNSYM = "SHT_SYMTAB", "SHT_RELA", "SHT_REL", "SHT_NOBITS", "SHT_DYNSYM"
_RELATIVE = {62: 8, 183: 1027, 3: 8, 40: 23, 243: 3, 21: 22}  # e_machine -> R_*_RELATIVE


class HostEntry(Record):
    """One host offload entry: its name and where it was read (`section`, byte `offset` in it)."""

    __slots__ = ("name", "section", "offset")

    def __init__(self, name: str, section: str, offset: int) -> None:
        self.name = name
        self.section = section
        self.offset = offset


class VerifyResult(Record):
    """What `verify` found: `problems` is empty when everything holds."""

    __slots__ = ("path", "images", "missing_archs", "missing_entries", "entries_checked", "notes", "runs_on",
                 "damaged")

    def __init__(self, path: str, images: list[DeviceImage], missing_archs: list[str] | None = None,
                 missing_entries: list[tuple[str, str]] | None = None, entries_checked: int = 0,
                 notes: list[str] | None = None, runs_on: list | None = None,
                 damaged: list[tuple[str, str]] | None = None) -> None:
        self.path = path
        self.images = images
        self.missing_archs = [] if missing_archs is None else missing_archs
        self.missing_entries = [] if missing_entries is None else missing_entries  # (entry name, image path)
        self.entries_checked = entries_checked
        self.notes = [] if notes is None else notes
        self.runs_on = [] if runs_on is None else runs_on  # runs_on.Verdict per --runs-on GPU
        self.damaged = [] if damaged is None else damaged  # (image path, what is wrong)

    @property
    def ok(self) -> bool:
        return not self.missing_archs and not self.missing_entries and all(v.ok for v in self.runs_on) \
            and not self.damaged

    @property
    def problems(self) -> list[str]:
        out = [f"{self.path}: {v.gpu.text}: {v.line}" for v in self.runs_on if not v.ok]
        out += [f"{self.path}: missing required arch '{a}'" for a in self.missing_archs]
        out += [f"{img}: missing host offload entry '{name}'" for name, img in self.missing_entries]
        out += [f"{img}: damaged image: {why}" for img, why in self.damaged]
        return out


# --------------------------------------------------------------------------------------------
# Architectures

def _check_requested(arch: str) -> None:
    """Refuse a --require value that is no arch at all (a typo must not pass silently)."""
    if not arch or any(c.isspace() for c in arch) or arch.startswith("-"):
        raise UsageError(f"invalid --require arch '{arch}'")
    vendor = offload_arch.vendor(arch)
    if vendor == "amd":
        offload_arch.canonical_amd(arch)  # raises TargetIDError for bad features
    elif vendor is None and not re.fullmatch(r"(sm|compute)_\d+[af]?", arch):
        raise UsageError(f"unknown --require arch '{arch}' (expected e.g. sm_80, compute_90, gfx90a:xnack+)")


# --------------------------------------------------------------------------------------------
# Host offload entries (pyelftools for the ELF structure; every read bounds-checked)

def _c_string(data: bytes, off: int, what: str) -> str:
    if off < 0 or off >= len(data):
        raise ElfError(f"{what}: string offset {off:#x} is outside its section ({len(data)} bytes)")
    end = data.find(b"\0", off, off + _MAX_NAME)
    if end < 0:
        raise ElfError(f"{what}: string at offset {off:#x} is not NUL-terminated within {_MAX_NAME} bytes")
    return data[off:end].decode("utf-8", "surrogateescape")


def host_offload_entries(buf) -> list[HostEntry]:
    """The offload entries of a host ELF object, program or shared library (see module doc)."""
    elf = open_elffile(buf)
    try:
        return _host_entries(elf)
    except OffloadError:
        raise
    except Exception as exc:
        raise ElfError(f"malformed ELF while reading offload entries: {exc}") from None


def _sections(elf):
    return [elf.get_section(i) for i in range(elf.num_sections())]


def _host_entries(elf) -> list[HostEntry]:
    sections = _sections(elf)
    etype = elf.header["e_type"]
    pointer = 8 if elf.elfclass == 64 else 4
    byte_order = "<" if elf.little_endian else ">"
    result: list[HostEntry] = []
    for index, sec in enumerate(sections):
        table = ENTRY_SECTIONS.get(sec.name)
        if table is None or sec["sh_type"] == _SHT_NOBITS:
            continue
        layout = table.layout(pointer, byte_order)
        esize = layout.size
        data = sec.data()
        if len(data) % esize:
            raise ElfError(f"section {sec.name}: size {len(data)} is not a multiple of the entry size {esize}")
        count = len(data) // esize
        if count > _MAX_ENTRIES:
            raise ElfError(f"section {sec.name}: {count} entries is implausibly many")
        if etype == "ET_REL":
            names = _names_from_relocations(elf, sections, index, sec, layout, table.name_field, count)
        else:
            names = _names_from_addresses(elf, sections, sec, data, layout, table.name_field, count)
        for i in range(count):
            if table.kind_field is not None:
                entry = layout.read(data, i * esize, ElfError, where=f"section {sec.name}")
                if getattr(entry, table.kind_field) != _OFK_OPENMP:
                    continue
            name = names.get(i)
            if name is None:
                raise ElfError(f"section {sec.name}: entry {i} at offset {i * esize:#x} has no name")
            result.append(HostEntry(name, sec.name, i * esize))
    return result


def _symbol_string(sections, symtab, sym_index: int, addend: int, what: str) -> str:
    if sym_index >= symtab.num_symbols():
        raise ElfError(f"{what}: symbol index {sym_index} is out of range")
    sym = symtab.get_symbol(sym_index)
    shndx = sym["st_shndx"]
    if not isinstance(shndx, int) or not 0 < shndx < len(sections):
        raise ElfError(f"{what}: symbol {sym.name!r} is not defined in a section")
    target = sections[shndx]
    if target["sh_type"] == _SHT_NOBITS:
        raise ElfError(f"{what}: name points into {target.name}, which has no contents")
    return _c_string(target.data(), sym["st_value"] + addend, f"{what} -> {target.name}")


def _names_from_relocations(elf, sections, index: int, sec, layout: Layout, name_field: str,
                            count: int) -> dict[int, str]:
    esize, name_off, width = layout.size, layout.offset_of(name_field), layout.size_of(name_field)
    names: dict[int, str] = {}
    for rsec in sections:
        if rsec["sh_type"] not in (_SHT_RELA, _SHT_REL) or rsec["sh_info"] != index:
            continue
        link = rsec["sh_link"]
        if not 0 < link < len(sections):
            raise ElfError(f"section {rsec.name}: sh_link {link} is not a section")
        symtab = sections[link]
        if symtab["sh_type"] not in (_SHT_SYMTAB, _SHT_DYNSYM):
            raise ElfError(f"section {rsec.name}: sh_link {link} is not a symbol table")
        data = sec.data()
        for rel in rsec.iter_relocations():
            off = rel["r_offset"]
            i, field_off = divmod(off, esize)
            if field_off != name_off or i >= count:
                continue
            if rel.is_RELA():
                addend = rel["r_addend"]
            else:
                addend = int.from_bytes(data[off:off + width], "little" if elf.little_endian else "big")
            names[i] = _symbol_string(sections, symtab, rel["r_info_sym"], addend,
                                      f"section {sec.name}: entry {i}")
    return names


def _names_from_addresses(elf, sections, sec, data: bytes, layout: Layout, name_field: str,
                          count: int) -> dict[int, str]:
    esize, name_off = layout.size, layout.offset_of(name_field)
    base = sec["sh_addr"]
    relative_type = _RELATIVE.get(elf.header["e_machine"])
    dynamic: dict[int, int] = {}
    if relative_type is not None:
        lo, hi = base, base + len(data)
        for rsec in sections:
            if rsec["sh_type"] != _SHT_RELA:
                continue
            for rel in rsec.iter_relocations():
                if lo <= rel["r_offset"] < hi and rel["r_info_type"] == relative_type:
                    dynamic[rel["r_offset"]] = rel["r_addend"]
    mapped = [s for s in sections if s["sh_addr"] and s["sh_type"] != _SHT_NOBITS and s["sh_size"]]
    names: dict[int, str] = {}
    for i in range(count):
        field_addr = base + i * esize + name_off
        addr = getattr(layout.read(data, i * esize, ElfError, where=f"section {sec.name}"), name_field)
        addr = dynamic.get(field_addr, addr)
        for s in mapped:
            if s["sh_addr"] <= addr < s["sh_addr"] + s["sh_size"]:
                names[i] = _c_string(s.data(), addr - s["sh_addr"], f"section {sec.name}: entry {i}")
                break
        else:
            raise ElfError(f"section {sec.name}: entry {i} name address {addr:#x} is not in any section")
    return names


# --------------------------------------------------------------------------------------------
# Device images

def device_symbol_names(image) -> set[str] | None:
    """The names a device image defines, exactly: an ELF image's symbol tables, a bitcode image's
    IR symbol table (`bitcode.bitcode_symbols`, the names an archive symbol table lists); None
    for images without a symbol table (PTX text, or bitcode written without its irsymtab)."""
    kind = identify(image)
    if kind is FileKind.BITCODE:
        names = bitcode_symbols(image)
        return None if names is None else {n.decode("utf-8", "surrogateescape") for n in names}
    if kind is not FileKind.ELF:
        return None
    elf = open_elffile(image)
    try:
        names: set[str] = set()
        for sec in _sections(elf):
            if sec["sh_type"] in (_SHT_SYMTAB, _SHT_DYNSYM):
                for sym in sec.iter_symbols():
                    if sym["st_shndx"] != "SHN_UNDEF" and sym.name:
                        names.add(sym.name)
        return names
    except Exception as exc:
        raise ElfError(f"malformed device ELF symbol table: {exc}") from None


def image_has_symbol(image, name: str, symbols: set[str] | None = None) -> bool:
    """Is `name` among the image's `symbols` (`device_symbol_names`), or, for an image without a
    symbol table (`symbols` None: PTX text), present in its bytes (see the module doc)?"""
    if symbols is not None:
        return name in symbols
    needle = re.escape(name.encode()) + rb"(?![0-9])"
    return re.search(needle, bytes(image)) is not None


# --------------------------------------------------------------------------------------------
# The check

def _host_objects(buf, name: str, depth: int = 0):
    """(path, buffer) of every ELF host file: the file itself, or each archive member."""
    kind = identify(buf)
    if kind is FileKind.ELF:
        yield name, buf
    elif kind is FileKind.ARCHIVE and depth < 8:
        from ..formats.archive import read_archive
        for m in read_archive(buf):
            yield from _host_objects(m.data, f"{name}({m.name})", depth + 1)


def _openmp_runtime(buf, name: str) -> openmp_runtime.Runtime | None:
    """The OpenMP offload runtime a program or shared library loads (its `DT_NEEDED`), or None
    for other files: what loads an object's or archive's images is decided where it is linked."""
    if identify(buf) is not FileKind.ELF or elf_type(buf) not in ("exec", "dyn"):
        return None
    try:
        return openmp_runtime.runtime_of(needed_libraries(buf))
    except OffloadError as exc:
        raise with_file_name(exc, name) from None


def verify_buffer(buf, name: str, *, require: list[str] = (), check_entries: bool | None = None,
                  llvm_version: int | None = None, runs_on: list[str] = ()) -> VerifyResult:
    """Run the checks on one file's contents.  `check_entries=None`: check when entries exist.
    `runs_on`: GPUs (`sm_86`, `gfx90a:xnack+`) that must be able to run the file's device code."""
    from . import runs_on as _runs_on
    for arch in require:
        _check_requested(arch)
    gpus = [_runs_on.parse_gpu(g) for g in runs_on]
    # No hashes: verify prints none, and an image's bytes are read only where a check reads them
    # (headers and tables for the structure check, symbols for the entry check).
    images = inspect_buffer(buf, name, llvm_version=llvm_version, hashes=False)
    result = VerifyResult(name, images)
    runtime = _openmp_runtime(buf, name) if gpus else None
    result.runs_on = [_runs_on.runs_on(images, name, gpu, runtime) for gpu in gpus]
    result.damaged = damaged_images(images)
    for arch in require:
        if not any(arch_satisfied(img.arch, arch, img.image_kind) for img in images):
            result.missing_archs.append(arch)
    if check_entries is False:
        return result
    any_entries = False
    for host_path, host_buf in _host_objects(memoryview(buf), name):
        try:
            entries = [e for e in host_offload_entries(host_buf) if e.name.startswith(OMP_ENTRY_PREFIX)]
        except OffloadError as exc:
            raise with_file_name(exc, host_path) from None
        if not entries:
            continue
        any_entries = True
        device = [img for img in images if img.file == host_path and img.producer == "openmp"]
        if not device:
            if check_entries:
                result.notes.append(f"{host_path}: {len(entries)} host offload entries but no OpenMP device images")
            continue
        for img in device:
            try:
                symbols = device_symbol_names(img.data)
            except OffloadError as exc:
                raise with_file_name(exc, img.path) from None
            for entry in entries:
                result.entries_checked += 1
                if not image_has_symbol(img.data, entry.name, symbols):
                    result.missing_entries.append((entry.name, img.path))
    if check_entries and not any_entries:
        result.notes.append(f"{name}: no OpenMP host offload entries to check")
    return result


#: What `integrity.check_image` checks an image as, by the kind `inspect` gives it (other kinds,
#: `unknown` or `empty` among them, are not checked here).
_STRUCTURE_KINDS = {"elf": "elf", "cubin": "elf", "llvm ir": "bitcode", "bitcode": "bitcode", "ptx": "ptx",
                    "fatbinary": "fatbin"}


def damaged_images(images: list[DeviceImage]) -> list[tuple[str, str]]:
    """(image path, what is wrong) for each image that is not structurally whole as its kind says
    (`integrity.check_image`: headers and tables, not a full parse)."""
    from ..printable import printable
    from .integrity import check_image
    damaged = []
    for img in images:
        kind = _STRUCTURE_KINDS.get(img.image_kind)
        if kind is None or not len(img.data):
            continue
        try:
            check_image(img.data, kind, name=img.path)
        except OffloadError as exc:
            damaged.append((img.path, printable(str(exc))))
    return damaged


@budget.metered
def verify_file(path: str, *, require: list[str] = (), check_entries: bool | None = None,
                llvm_version: int | None = None, runs_on: list[str] = ()) -> VerifyResult:
    from ..fileio import open_input
    with open_input(path, sparse=True) as buf:  # headers and tables: no readahead around them
        result = verify_buffer(buf, str(path), require=require, check_entries=check_entries,
                               llvm_version=llvm_version, runs_on=runs_on)
        for img in result.images:
            img.data = b""  # do not keep views into the closed map
        return result


# --------------------------------------------------------------------------------------------
# Size budgets (`--max-bytes`)

#: Budget keys that are not archs: the whole file, and all of its device images together.
BUDGET_TOTAL, BUDGET_DEVICE = "total", "device"
_SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30}


def parse_max_bytes(text: str) -> dict[str, int]:
    """`ARCH:N,total:N,device:N` -> {key: bytes}. N is a byte count, optionally with a binary
    suffix (K/KiB, M/MiB, G/GiB: powers of 1024). Raises UsageError naming the bad item."""
    budgets: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        key, sep, value = item.rpartition(":")
        m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
        if not sep or not key.strip() or not m or m.group(2).lower() not in _SIZE_SUFFIXES:
            raise UsageError(f"--max-bytes: '{item}' is not ARCH:N, total:N or device:N "
                             "(N in bytes, or with a K, M or G suffix)")
        budgets[key.strip()] = int(m.group(1)) * _SIZE_SUFFIXES[m.group(2).lower()]
    return budgets


def _arch_bytes(images: list[DeviceImage], arch: str) -> int:
    """Bytes of the images built for `arch`: same name, or (an AMDGPU processor asked without
    features) any target ID of that processor, gfx90a counting gfx90a:xnack+ too."""
    return sum(img.size for img in images
               if img.arch == arch or (":" not in arch and img.arch.split(":", 1)[0] == arch))


def check_max_bytes(images: list[DeviceImage], path: str, file_bytes: int, budgets: dict[str, int]) -> list[str]:
    """One line per budget a file exceeds: `total` is the file's size, `device` the bytes of all
    its device images, any other key an arch's device images (as `inspect --sizes` counts them)."""
    problems = []
    for key, limit in budgets.items():
        if key == BUDGET_TOTAL:
            used, what = file_bytes, "file size"
        elif key == BUDGET_DEVICE:
            used, what = sum(img.size for img in images), "device images"
        else:
            used, what = _arch_bytes(images, key), f"{key} device images"
        if used > limit:
            problems.append(f"{path}: {what} take {used} bytes, over the budget of {limit} bytes "
                            f"(--max-bytes={key}:{limit}, {used - limit} bytes over)")
    return problems
