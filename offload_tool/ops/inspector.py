"""`offload-tool inspect`: every device image in a file, however it is wrapped.

Containers are recognised by content, never by file name, and unwrapped recursively:

* OffloadBinary packages (`10 FF 10 AD`), raw, in ELF `SHT_LLVM_OFFLOADING` sections, in COFF
  sections whose name starts with `.llvm.offloading` and in LLVM bitcode (as `extract` finds them);
* clang offload bundles: binary `__CLANG_OFFLOAD_BUNDLE__`, text (`// __CLANG_OFFLOAD_BUNDLE____START__`),
  compressed `CCOB`; in ELF objects as `__CLANG_OFFLOAD_BUNDLE__<id>` sections (object bundles)
  and as the `.hip_fatbin` section (HIP's old driver);
* NVIDIA fat binaries (`.nv_fatbin`, `__nv_relfatbin`, `.fatbin` files; `fatbin`);
* ROCm kpack archives (`KPAK`, `.kpack` files: one per architecture family, kernels by binary and
  architecture); a host binary whose device code was split out into them (`HIPK` wrappers and a
  `.rocm_kpack_ref` marker) holds no image, and the reason given for it names the archives;
* static archives, member by member.

The scan is driven by the format modules' declarations (`magic.FORMAT_MODULES`): a format with a
`container` word is listed wherever it is found, by its `inspect` (which calls back the scanner's
`add_image`, `leaf_or_nested`, ... ) or, for archives, member by member; `_HOSTS` adds ELF and
COFF objects and bitcode, searched here when they are whole files or archive members.  Inspecting
a new container format needs nothing here.

An image whose bytes are themselves a container (a fat binary inside an OffloadBinary, a bundle
inside a package, a bundle inside an archive member, ...) is replaced by the images inside it,
so the listing always shows the innermost device code.  Host entries of bundles are not device
images and are not listed.

Work is bounded by the input, not by how often it refers to the same bytes: nesting is bounded by
the run's `depth` budget, every container and image visited is charged to its `entries` budget,
and a container at bytes already listed in this scan (entries, sections or headers pointing at
one payload, a bundle whose entries point at itself) is not listed again but shown as one row
whose `same_as` names the first listing.  Images that share bytes are hashed once; overlapping
ones may not make the scan hash more than the input (plus what was decompressed) holds.

Hashes are made only when asked for (`hashes=True`, the library's default; `inspect --hash`):
without them an image's bytes are read only where its listing needs them (its first bytes for its
kind, a PTX text for its length, a nested container's headers), so a listing, and `verify`, page
in headers and tables, not images."""

from __future__ import annotations

import ctypes
import itertools

from .. import budget
from ..formats import fatbin as _fatbin
from ..formats import objbundle
from ..errors import OffloadError
from ..fileio import byte_view
from ..formats.magic import FileKind, Format, format_of_kind, identify, identify_format
from ..formats.offload_binary import OffloadImage, objdump_image_kind_name, offload_kind_name
from ..records import Record

__all__ = ["DeviceImage", "inspect_buffer", "inspect_file", "MAX_DEPTH", "size_summary",
           "AMBIGUOUS_PRODUCER", "AMBIGUOUS_PRODUCER_NOTE"]

#: The default nesting limit (the `depth` budget, raised with --budget=depth=N).
MAX_DEPTH = budget.DEFAULT_LIMITS.depth

#: How producer value 3 is shown when the producing LLVM is not known (see `offload_binary`).
AMBIGUOUS_PRODUCER = "hip?"
AMBIGUOUS_PRODUCER_NOTE = ("offload kind 3 is HIP as written by LLVM 19/20 but OpenMP|CUDA as read by LLVM 21+; "
                           "pass --llvm-version to decide")

_HIP_FATBIN_SECTIONS = (".hip_fatbin",)
#: Files that begin with one of these may hold several bundles back to back (`scan_bundles`).
_BUNDLE_KINDS = (FileKind.CLANG_BUNDLE, FileKind.COMPRESSED_BUNDLE)

# `llvm-objdump --offloading`'s words for an image's content, where they apply.
_IMAGE_KIND_WORDS = {FileKind.ELF: "elf", FileKind.BITCODE: "llvm ir", FileKind.FATBIN: "fatbinary",
                     FileKind.OFFLOAD_BINARY: "offload-binary"}


class DeviceImage(Record):
    """One device image and where it was found.

    `path` names the file, then `(member)` for archive members, `:section` for ELF sections and
    `[i]` / `[id]` for entries inside a container.  `container` is the innermost container format
    (`offload-binary`, `bundle`, `text-bundle`, `object-bundle`, `fatbin`); `wrappers` lists the
    outer layers, outermost first.  `file` is the innermost file or archive member holding
    the image (the object whose host code goes with it).  `data` is the image itself (decompressed), not serialised.
    `sha256` is the image's hash when the scan was asked for hashes (`hashes=True`), None when it
    was not (`to_dict` then leaves the field out); a hashed scan's `same_as` row has "" (it has
    no bytes of its own)."""

    __slots__ = ("path", "container", "producer", "triple", "arch", "image_kind", "size", "compressed", "sha256",
                 "wrappers", "file", "producer_note", "details", "data")
    _uncompared = _unrepresented = frozenset({"data"})

    def __init__(self, path: str, container: str, producer: str, triple: str, arch: str, image_kind: str, size: int,
                 compressed: bool, sha256: str | None, wrappers: list[str] | None = None, file: str = "",
                 producer_note: str | None = None, details: dict | None = None,
                 data: bytes | memoryview = b"") -> None:
        self.path = path
        self.container = container
        self.producer = producer
        self.triple = triple
        self.arch = arch
        self.image_kind = image_kind
        self.size = size
        self.compressed = compressed
        self.sha256 = sha256
        self.wrappers = [] if wrappers is None else wrappers
        self.file = file
        self.producer_note = producer_note
        self.details = {} if details is None else details
        self.data = data

    def to_dict(self) -> dict:
        d = {
            "path": self.path, "container": self.container, "producer": self.producer, "triple": self.triple,
            "arch": self.arch, "image_kind": self.image_kind, "size": self.size, "compressed": self.compressed,
        }
        if self.sha256 is not None:  # only when hashes were asked for (`inspect --hash`)
            d["sha256"] = self.sha256
        d["wrappers"] = list(self.wrappers)
        if self.producer_note:
            d["producer_note"] = self.producer_note
        d.update(self.details)
        return d


def content_image_kind(data) -> str:
    """Name an image by its bytes, with `llvm-objdump --offloading`'s words where they apply."""
    word = _IMAGE_KIND_WORDS.get(identify(data))
    if word is not None:
        return word
    return "unknown" if len(data) else "empty"


class _Scanner:
    def __init__(self, llvm_version: int | None, keep_data: bool = True, hashes: bool = True) -> None:
        self.llvm_version = llvm_version
        self.keep_data = keep_data
        # Without hashes an image's bytes are read only where its listing needs them (a PTX
        # entry's length, a nested container's header): a listing reads headers and tables.
        self.hashes = hashes
        self.found: list[DeviceImage] = []
        self.files: list[str] = []
        # Per buffer the scan reads from (the input, each decompressed payload), by id: the buffer
        # (kept alive so that no id or address is reused), the containers listed from it by where
        # they start ((address, kind) -> path) and the hashes of its images ((address, size) -> sha256).
        self.buffers: dict[int, tuple[object, dict, dict]] = {}
        self.hash_allowance = 0  # bytes the scan may still hash (see `add`)

    def remember(self, view: memoryview) -> None:
        """Record what is listed from `view`'s buffer (the input, or a decompressed payload)."""
        self.buffers.setdefault(id(view.obj), (view.obj, {}, {}))
        self.hash_allowance += len(view)

    def forget(self, view: memoryview) -> None:
        """Drop what was recorded about a (decompressed) buffer that is about to be freed."""
        self.buffers.pop(id(view.obj), None)

    def where(self, data) -> tuple[dict, dict, int, int] | None:
        """(listed, hashes, address, size) of `data` if it lies in a remembered buffer."""
        view = data if isinstance(data, memoryview) else memoryview(data)
        entry = self.buffers.get(id(view.obj))
        if entry is None or entry[0] is not view.obj:
            return None
        return entry[1], entry[2], _address(view), len(view)

    # -- dispatch ---------------------------------------------------------------------------

    def container_at(self, data) -> Format | None:
        """The container `data` starts with, or None if it is a leaf (device code, host code)."""
        fmt = identify_format(data)
        return fmt if fmt is not None and fmt.container else None

    def scan_file(self, data, path: str, wrappers: list[str], depth: int) -> None:
        """A whole file or archive member: containers, ELF and COFF objects and bitcode are searched.
        A file that begins with a bundle may hold several, as a `.hip_fatbin` section does (the
        section's bytes dumped to a file): each is listed (`scan_bundles`)."""
        container = identify_format(data)
        if container is not None and not container.container:
            container = _HOSTS.get(container.kind)
        self.files.append(path)
        try:
            if container is not None and container.kind in _BUNDLE_KINDS:
                self.scan_bundles(data, path, wrappers, depth)
            elif container is not None:
                self.scan_container(container, data, path, wrappers, depth, compressed=False)
        finally:
            self.files.pop()

    def scan_bundles(self, data, path: str, wrappers: list[str], depth: int) -> None:
        """Bundles (binary or compressed) back to back with zero padding between, as a linker
        lays out a program's `.hip_fatbin` (`ccob.split_bundles`): each is listed, as `path@offset`
        when there are several."""
        from ..formats.ccob import split_bundles
        parts = split_bundles(data)
        ahead = list(itertools.islice(parts, 2))  # one part, or several: named by offset
        for off, part in itertools.chain(ahead, parts):
            container = self.container_at(part)
            if container is None:
                raise OffloadError(f"no known container at offset {off:#x}")
            ppath = path if len(ahead) == 1 else f"{path}@{off:#x}"
            self.scan_container(container, part, ppath, wrappers, depth, False)

    def first_listing(self, data, kind: str, path: str, wrappers: list[str], compressed: bool) -> bool:
        """False if the container at `data` was listed before in this scan (or is being listed:
        an entry pointing at its own container); then one row saying so is added instead."""
        budget.charge("entries", 1, path)
        place = self.where(data)
        if place is None:
            return False
        listed, _hashes, address, _size = place
        first = listed.get((address, kind))
        if first is None:
            listed[address, kind] = path
            return False
        self.found.append(DeviceImage(
            path=path, container=kind, producer="", triple="", arch="", image_kind=kind, size=len(data),
            compressed=compressed, sha256="" if self.hashes else None, wrappers=list(wrappers),
            file=self.files[-1] if self.files else "", details={"same_as": first}))
        return True

    def scan_container(self, container: Format, data, path: str, wrappers: list[str], depth: int,
                       compressed: bool) -> None:
        """List what `container` (a format's declaration, `container_at`) holds at `data`: its
        members as files, or what its `inspect` lists."""
        if self.first_listing(data, container.container, path, wrappers, compressed):
            return
        with budget.nested(path):
            if container.members is not None:
                for name, member in container.members(data, path):
                    self.scan_file(member, f"{path}({name})", wrappers + [container.container], depth + 1)
            else:
                container.inspect(self, data, path, wrappers, depth, compressed)

    def leaf_or_nested(self, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> bool:
        """If `data` is itself a container, list what it holds and return True."""
        container = self.container_at(data)
        if container is None:
            return False
        self.scan_container(container, data, path, wrappers, depth + 1, compressed)
        return True

    # -- what format modules call (`kinds.Format.inspect`) --------------------------------------

    def add_image(self, **fields) -> None:
        """One device image, `DeviceImage`'s fields by name."""
        self.add(DeviceImage(**fields))

    @staticmethod
    def image_kind(data) -> str:
        """What an image is, by its bytes (`content_image_kind`)."""
        return content_image_kind(data)

    def add_offload_image(self, img: OffloadImage, path: str, wrappers: list[str], depth: int,
                          compressed: bool) -> None:
        producer, note = self.producer_of(img)
        # A fat binary or bundle inside a package: list the device code inside it, but keep the
        # package's producer (the nested container does not record one).
        if self.container_at(img.image) is not None:
            before = len(self.found)
            self.leaf_or_nested(img.image, path, wrappers + ["offload-binary"], depth, compressed)
            for d in self.found[before:]:
                if d.producer in ("", "cuda") and producer not in ("none", ""):
                    d.producer, d.producer_note = producer, note
            return
        kind = objdump_image_kind_name(img.image_kind)
        self.add(DeviceImage(
            path=path, container="offload-binary", producer=producer, triple=img.triple, arch=img.arch,
            image_kind=kind, size=len(img.image), compressed=compressed, sha256="", wrappers=list(wrappers),
            producer_note=note, details={"offload_kind": img.offload_kind, "flags": img.flags,
                                         "strings": dict(img.strings), "binary_version": img.version,
                                         "entry_index": img.index}, data=img.image))

    def producer_of(self, img: OffloadImage) -> tuple[str, str | None]:
        if self.llvm_version is None and img.offload_kind == 3:
            return AMBIGUOUS_PRODUCER, AMBIGUOUS_PRODUCER_NOTE
        return offload_kind_name(img.offload_kind, self.llvm_version), None

    def scan_bundle_entries(self, entries, container: str, path: str, wrappers: list[str], depth: int,
                            compressed: bool) -> None:
        from ..rules.bundle_id import parse_bundle_entry_id
        for entry in entries:
            raw_id = entry.bundle_entry_id
            bid = parse_bundle_entry_id(raw_id)
            if bid.kind == "host":
                continue
            data = byte_view(entry.data) if not isinstance(entry.data, (bytes, bytearray)) else entry.data
            epath = f"{path}[{raw_id}]"
            if self.leaf_or_nested(data, epath, wrappers + [container], depth, compressed):
                continue
            self.add(DeviceImage(
                # Bundle IDs spell the triple with 4 fields ("amdgcn-amd-amdhsa-"); show it as the
                # OffloadBinary and clang do, without empty trailing fields (the raw ID is kept).
                path=epath, container=container, producer=bid.kind, triple=bid.triple.rstrip("-"),
                arch=bid.target_id or "",
                image_kind=content_image_kind(data), size=len(data), compressed=compressed, sha256="",
                wrappers=list(wrappers), details={"bundle_entry_id": raw_id}, data=data))

    # -- host objects: searched as whole files (`_HOSTS`) ------------------------------------

    def scan_bitcode(self, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
        from .extract import find_offload_images
        for f in find_offload_images(data, path, llvm_version=self.llvm_version):
            self.add_offload_image(f.image, f.path, wrappers + ["bitcode"], depth, False)

    def scan_coff(self, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
        """COFF objects: every section whose name starts with `.llvm.offloading` (LLVM's rule, as
        `extract` and `offload-packager` read them)."""
        from ..formats import coff
        from ..formats.offload_binary import OFFLOADING_SECTION
        for sec in coff.read_sections(data, path):
            if not sec.name.startswith(OFFLOADING_SECTION):
                continue
            # A damaged package is reported as `file:section: ...` (`offload_binary`'s `inspect`).
            self.scan_container(_PACKAGE, data[sec.offset:sec.offset + sec.size],
                                self.section_path(path, sec.name), wrappers + ["coff"], depth + 1, False)

    def scan_elf(self, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
        from ..formats import elf, kpack
        for sec in elf.read_sections(data):
            name = sec.name
            if sec.sh_type == elf.SHT_LLVM_OFFLOADING:
                self.scan_container(_PACKAGE, sec.data, self.section_path(path, name),
                                    wrappers + ["elf"], depth + 1, False)
            elif name in (kpack.KPACK_REF_SECTION, kpack.WRAPPER_SECTION) and sec.sh_type != 8:
                # A binary whose device code was split into kpack archives: no image here, but a
                # malformed reference is reported like any malformed container.
                where = f"{self.section_path(path, name)} (file offset {sec.offset:#x})"
                if name == kpack.KPACK_REF_SECTION:
                    kpack.read_kpack_ref(sec.data, where=where)
                else:
                    kpack.read_kpack_wrappers(sec.data, where=where)
            elif objbundle.is_bundle_section_name(name):
                # Object bundle: one entry per section; the host entry is a single 0 byte.
                bid = objbundle.bundle_entry_id_of(name)
                self.scan_bundle_entries([_Entry(bid, sec.data)], "object-bundle", path, wrappers + ["elf"],
                                         depth + 1, False)
            elif name in _HIP_FATBIN_SECTIONS or name in _fatbin.FATBIN_SECTIONS:
                if sec.sh_type == 8 or not len(sec.data):  # SHT_NOBITS / empty: nothing stored
                    continue
                spath = self.section_path(path, name)
                if self.first_listing(sec.data, "section", spath, wrappers + ["elf"], False):
                    continue  # another header for the same bytes
                try:
                    if name in _HIP_FATBIN_SECTIONS:
                        # A linked program's .hip_fatbin holds one bundle per translation unit, each
                        # aligned (4096) by the linker.
                        self.scan_bundles(sec.data, spath, wrappers + ["elf"], depth + 1)
                    else:
                        container = self.container_at(sec.data)
                        if container is None:
                            raise OffloadError("no known container at offset 0x0")
                        self.scan_container(container, sec.data, spath, wrappers + ["elf"], depth + 1, False)
                except OffloadError as exc:
                    raise with_file_name(exc, f"{spath} (file offset {sec.offset:#x})") from None

    @staticmethod
    def section_path(path: str, name: str) -> str:
        """`file:section`, made only for sections with offload content (a long name shared by
        thousands of other headers is not copied for each) and charged to the `names` budget."""
        budget.charge("names", len(name), f"{path}: section name")
        return f"{path}:{name}"

    def add(self, image: DeviceImage) -> None:
        budget.charge("entries", 1, image.path)
        image.file = self.files[-1] if self.files else ""
        if not self.hashes:
            image.sha256 = None  # not asked for: the image's bytes are not read for it
            if not self.keep_data:
                image.data = b""
            self.found.append(image)
            return
        import hashlib  # only with hashes (`inspect --hash`)
        place = self.where(image.data)
        if image.sha256:  # hashed while it was decompressed
            pass
        elif place is None:  # bytes of its own (a decompressed fat binary entry): hashed once anyway
            image.sha256 = hashlib.sha256(image.data).hexdigest()
        else:
            _listed, hashes, address, size = place
            digest = hashes.get((address, size))
            if digest is None:
                # Images that overlap without being the same bytes would each be hashed anew; those
                # of a legitimate file cover each byte of the input (or of a decompressed payload) once.
                self.hash_allowance -= size
                if self.hash_allowance < 0:
                    raise OffloadError(f"{image.path}: device images overlap: listing them would hash more "
                                       f"bytes than the input and its decompressed contents hold")
                digest = hashes[address, size] = hashlib.sha256(image.data).hexdigest()
            image.sha256 = digest
        if not self.keep_data:
            image.data = b""  # listing only: do not hold every (decompressed) image in memory
        self.found.append(image)


#: Host objects, searched (their sections, their embedded packages) when they are whole files or
#: archive members; such an object inside a container is a device image, a leaf.  Every container
#: format is its module's declaration (`magic.FORMAT_MODULES`), listed wherever it is found.
_HOSTS: dict[FileKind, Format] = {
    FileKind.ELF: Format(FileKind.ELF, container="elf", inspect=_Scanner.scan_elf),
    FileKind.COFF: Format(FileKind.COFF, container="coff", inspect=_Scanner.scan_coff),
    FileKind.BITCODE: Format(FileKind.BITCODE, container="bitcode", inspect=_Scanner.scan_bitcode),
}
#: Where ELF and COFF sections hold packages.
_PACKAGE = format_of_kind(FileKind.OFFLOAD_BINARY)


class _PyBuffer(ctypes.Structure):
    """CPython's `Py_buffer`: only `buf`, the address of the first byte, is read.

    Read through `PyObject_GetBuffer` because nothing else gives a read-only buffer's address:
    `ctypes.c_char.from_buffer` (then `addressof`) takes writable buffers only, and the inputs
    are read-only maps and `bytes`; a memoryview does not say where a slice starts in its base
    object; numpy's `__array_interface__` would, at the cost of numpy as a dependency for one
    integer.  The layout cannot drift: `Py_buffer` is part of the stable ABI from Python 3.11."""

    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _address(view: memoryview) -> int:
    """The address of `view`'s first byte.  Slices of one buffer that start at the same byte have
    the same address: that is how entries pointing at the same bytes are recognised without
    comparing or hashing them."""
    buf = _PyBuffer()
    _get_buffer(view, ctypes.byref(buf), 0)  # PyBUF_SIMPLE: a contiguous view
    try:
        return buf.buf or 0
    finally:
        _release_buffer(ctypes.byref(buf))


class _Entry(Record):
    __slots__ = ("bundle_entry_id", "data")

    def __init__(self, bundle_entry_id: str, data: object) -> None:
        self.bundle_entry_id = bundle_entry_id
        self.data = data


def with_file_name(exc: OffloadError, name: str) -> OffloadError:
    """`exc`, its message prefixed with the file name unless it already names the file."""
    msg = str(exc)
    if msg.startswith(name) or f"'{name}'" in msg:
        return exc
    try:
        return type(exc)(f"{name}: {msg}")
    except TypeError:  # a subclass with another constructor signature
        return OffloadError(f"{name}: {msg}")


def inspect_buffer(buf, name: str, *, llvm_version: int | None = None, keep_data: bool = True,
                   hashes: bool = True) -> list[DeviceImage]:
    """Every device image in `buf` (the contents of the file called `name`).

    With `keep_data=False` each image's bytes are dropped once hashed.  With `hashes=False` no
    image is hashed (`sha256` is None) and, with `keep_data=False` too, an image's bytes are not
    read at all unless its listing needs them (the length of a PTX text, the header of a container
    inside it): on a memory-mapped file only headers and tables are paged in."""
    scanner = _Scanner(llvm_version, keep_data, hashes)
    view = byte_view(buf)
    scanner.remember(view)
    scanner.hash_allowance += len(view) + (1 << 20)
    try:
        with budget.run():
            scanner.scan_file(view, name, [], 0)
    except OffloadError as exc:
        raise with_file_name(exc, name) from None
    except (ValueError, IndexError, KeyError, UnicodeError, OverflowError, MemoryError) as exc:
        # Last line of defence for a parser we call: still one OffloadError line.
        raise OffloadError(f"{name}: malformed input ({type(exc).__name__}: {exc})") from None
    return scanner.found


def inspect_file(path: str, *, llvm_version: int | None = None, keep_data: bool = True,
                 reasons: dict[str, str] | None = None, hashes: bool = True) -> list[DeviceImage]:
    """`inspect_buffer` on a (memory-mapped) file.  Image data is copied out of the map, or
    dropped (`keep_data=False`) when only the listing is wanted; `hashes` as for `inspect_buffer`.
    When the file holds no image and `reasons` is given, `reasons[path]` says why in a few words
    (the file is read only once)."""
    from ..fileio import open_input
    # Without data or hashes only headers are read: no readahead around them.
    with open_input(path, sparse=not keep_data and not hashes) as buf:
        images = inspect_buffer(buf, str(path), llvm_version=llvm_version, keep_data=keep_data, hashes=hashes)
        if not images and reasons is not None:
            reasons[str(path)] = no_images_reason(buf)
        for img in images:
            if isinstance(img.data, memoryview):
                img.data = bytes(img.data)
            for k, v in list(img.details.items()):
                if isinstance(v, memoryview):
                    img.details[k] = bytes(v)
        return images


def no_images_reason(buf) -> str:
    """Why a file without device images has none, from its kind."""
    if not len(buf):
        return "the file is empty"
    kind = identify(buf)
    if kind is FileKind.UNKNOWN:
        return "not an offload container, object file, bitcode or archive (no known magic number)"
    if kind is FileKind.ELF and (split := _kpack_split(buf)) is not None:
        return split
    return f"a file of kind '{kind.value}' with no offload sections or entries"


def _kpack_split(buf) -> str | None:
    """How a host binary whose device code was split into kpack archives says where it went."""
    from ..formats import elf, kpack
    wrappers, ref = [], None
    with budget.run():
        for sec in elf.read_sections(buf):
            if sec.sh_type == 8:
                continue
            if sec.name == kpack.WRAPPER_SECTION:
                wrappers = kpack.read_kpack_wrappers(sec.data)
            elif sec.name == kpack.KPACK_REF_SECTION:
                ref = kpack.read_kpack_ref(sec.data)
    if ref is None:
        return None
    split = [w.co_index for w in wrappers if w.is_kpack]
    return (f"device code split out into kpack archives {', '.join(ref.search_paths) or '(none named)'} "
            f"as {ref.kernel_name!r} (HIPK wrappers for code objects "
            f"{', '.join(f'#{i}' for i in split) or 'none'})")


# --------------------------------------------------------------------------------------------
# Sizes: what each arch and each container kind takes in a file (`inspect --sizes`, budgets)

def size_summary(images: list[DeviceImage], path: str, file_bytes: int) -> dict:
    """Bytes of device code in one file, per arch and per (innermost) container kind.

    An image counts its own bytes as `inspect` lists them (decompressed when it was stored
    compressed; `compressed_images` says how many were), so per-arch sums are what each arch's
    device code weighs, and a budget on them does not depend on the compression in use.
    `file_bytes` is the whole file; `host_bytes` the rest of it once device images are taken off
    (0 when compressed images make the device bytes exceed the file)."""
    archs: dict[str, dict] = {}
    containers: dict[str, dict] = {}
    for img in images:
        for table, key in ((archs, img.arch or "-"), (containers, img.container)):
            row = table.setdefault(key, {"bytes": 0, "images": 0})
            row["bytes"] += img.size
            row["images"] += 1
    device = sum(img.size for img in images)
    return {"path": path, "file_bytes": file_bytes, "device_bytes": device,
            "host_bytes": max(0, file_bytes - device),
            "compressed_images": sum(1 for img in images if img.compressed),
            "archs": dict(sorted(archs.items())), "containers": dict(sorted(containers.items()))}
