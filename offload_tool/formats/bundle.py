"""Binary (`__CLANG_OFFLOAD_BUNDLE__`) and text clang offload bundles: read and write.

The writers reproduce clang-offload-bundler
19's bytes. Readers return payloads as memoryview slices of the input (no copies) and, unlike LLVM
19 (which silently stops, or crashes, on a damaged header), reject truncated or out-of-range headers
with a `BundleFormatError` naming the offset and field."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..errors import BundleFormatError, UsageError
from .layout import Layout
from .kinds import BUNDLE_MAGIC, TEXT_BUNDLE_COMMENTS, TEXT_BUNDLE_START, FileKind, Format
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "BundleEntry", "BINARY_MAGIC", "TEXT_COMMENTS", "BINARY_TYPES", "is_binary_bundle", "read_binary_bundle",
    "read_binary_bundle_index", "binary_bundle_header_size",
    "binary_bundle_layout", "write_binary_bundle", "read_text_bundle", "write_text_bundle", "text_comment",
    "text_bundle_type",
    "stringmap_entries", "bundle_chunks", "bundle_size",
]

BINARY_MAGIC = BUNDLE_MAGIC

#: `-type` values handled by the text handler, and their line-comment string.
TEXT_COMMENTS = {"i": b"//", "ii": b"//", "cui": b"//", "hipi": b"//", "d": b"#", "s": b"#", "ll": b";"}
#: A comment string -> a text `-type` whose files use it (what `text_bundle_type` answers).
_TYPE_OF_COMMENT = {b"//": "i", b";": "ll", b"#": "s"}
_TEXT_MARKER = re.compile(b"\\n(" + b"|".join(re.escape(c) for c in TEXT_BUNDLE_COMMENTS) + b")"
                          + re.escape(TEXT_BUNDLE_START))
#: `-type` values that always use the binary handler (`o` and `a` fall back to it for non-objects).
BINARY_TYPES = ("bc", "gch", "ast")

# Binary header, then per entry its fixed part followed by IdLength bytes of bundle entry ID.
_HEADER = Layout("bundle header", [("Magic", "24s"), ("NumberOfBundles", "Q")])
_ENTRY = Layout("bundle entry", [("Offset", "Q"), ("Size", "Q"), ("IdLength", "Q")])

# IDs are bytes in the file; surrogateescape keeps any byte sequence round-trippable through str.
_ID_ENCODING = ("utf-8", "surrogateescape")


class BundleEntry(Record):
    """One entry of a bundle: its bundle entry ID and payload (often a memoryview slice of the input).

    `offset` is the payload's offset in the bundle it was read from (0 when not read from one)."""

    __slots__ = ("bundle_entry_id", "data", "offset")

    def __init__(self, bundle_entry_id: str, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        self.bundle_entry_id = bundle_entry_id
        self.data = data
        self.offset = offset

    @property
    def size(self) -> int:
        return memoryview(self.data).nbytes


def _nbytes(data) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


def _id_bytes(bundle_entry_id: str) -> bytes:
    return bundle_entry_id.encode(*_ID_ENCODING)


# --- binary bundles ---------------------------------------------------------------------------------


def is_binary_bundle(buf) -> bool:
    """LLVM's `identify_magic(...) == offload_bundle`: at least 25 bytes starting with the magic."""
    return bytes(buf[:len(BUNDLE_MAGIC)]) == BUNDLE_MAGIC and len(buf) > len(BUNDLE_MAGIC)


def read_binary_bundle(buf) -> list[BundleEntry]:
    """All entries of a binary bundle, in file order (duplicates kept; see `stringmap_entries`).

    A buffer without the magic has no entries (as in LLVM). Truncated headers, payloads past the end
    and impossible entry counts raise `BundleFormatError`."""
    view = memoryview(buf).cast("B")
    return [BundleEntry(entry_id, view[offset:offset + length], offset)
            for entry_id, offset, length in read_binary_bundle_index(view)]


def binary_bundle_header_size(head) -> int:
    """How many leading bytes a binary bundle's header (magic, count, entry headers, IDs) takes, as far
    as `head`, a prefix of the bundle, tells: when the result exceeds `len(head)`, read at least that
    many bytes and ask again. Lets a compressed bundle's header be read without its payloads."""
    view = memoryview(head).cast("B")
    size = view.nbytes
    if size < _HEADER.size:
        return _HEADER.size
    count = _HEADER.read(view, 0, BundleFormatError).NumberOfBundles
    pos = _HEADER.size
    for _ in range(count):
        if pos + _ENTRY.size > size:
            return pos + _ENTRY.size
        pos += _ENTRY.size + _ENTRY.unpack_from(view, pos)[2]
        if pos > size:
            return pos
    return pos


def read_binary_bundle_index(head, size: int | None = None) -> list[tuple[str, int, int]]:
    """(bundle entry ID, payload offset, payload size) of every entry, in file order. `head` holds the
    bundle or, with `size` (the whole bundle's size), a prefix of it at least
    `binary_bundle_header_size(head)` bytes long: payload ranges are checked against `size`."""
    view = memoryview(head).cast("B")
    avail = view.nbytes
    if size is None:
        size = avail
    if not is_binary_bundle(view):
        return []
    if size < _HEADER.size:
        raise BundleFormatError(f"bundle header truncated: file has {size} bytes, NumberOfBundles at offset 24 "
                                f"needs {_HEADER.size}")
    count = _HEADER.read(view, 0, BundleFormatError).NumberOfBundles
    pos = _HEADER.size
    if count > (size - pos) // _ENTRY.size:
        raise BundleFormatError(f"bundle header at offset 24: NumberOfBundles {count} cannot fit in a "
                                f"{size}-byte file")
    entries: list[tuple[str, int, int]] = []
    for index in range(count):
        if pos + _ENTRY.size > size:
            raise BundleFormatError(f"bundle entry {index} at offset {pos}: header truncated")
        if pos + _ENTRY.size > avail:
            raise BundleFormatError(f"bundle entry {index} at offset {pos}: header not read")
        offset, length, id_len = _ENTRY.unpack_from(view, pos)
        pos += _ENTRY.size
        if id_len > size - pos:
            raise BundleFormatError(f"bundle entry {index} at offset {pos - 8}: IdLength {id_len} runs past the "
                                    f"end of the {size}-byte file")
        if id_len > avail - pos:
            raise BundleFormatError(f"bundle entry {index} at offset {pos - 8}: ID not read")
        entry_id = bytes(view[pos:pos + id_len]).decode(*_ID_ENCODING)
        pos += id_len
        if offset == 0 or offset > size or length > size - offset:
            raise BundleFormatError(f"bundle entry {index} ('{entry_id}'): payload Offset {offset} Size {length} "
                                    f"is outside the {size}-byte file")
        entries.append((entry_id, offset, length))
    return entries


def stringmap_entries(entries: Sequence[BundleEntry]) -> list[BundleEntry]:
    """Entries as LLVM 19's binary handler iterates them: StringMap order, a duplicate ID keeping the last
    payload (StringMap assignment)."""
    from ..rules.stringmap import StringMap

    m: StringMap[BundleEntry] = StringMap()
    for e in entries:
        m[e.bundle_entry_id] = e
    return [e for _, e in m.items()]


def _align_to(value: int, align: int) -> int:
    return (value + align - 1) // align * align


def binary_bundle_layout(ids: Sequence[str], sizes: Sequence[int], bundle_align: int = 1) -> tuple[bytes, list[int]]:
    """The header bytes and payload offsets of a binary bundle (`WriteHeader`): payloads in `ids` order,
    each at the next multiple of `bundle_align`."""
    if bundle_align < 1:
        raise UsageError(f"invalid -bundle-align value {bundle_align}: must be at least 1")
    encoded = [_id_bytes(i) for i in ids]
    header_size = _HEADER.size + sum(_ENTRY.size + len(e) for e in encoded)
    offsets: list[int] = []
    pos = header_size
    for size in sizes:
        pos = _align_to(pos, bundle_align)
        offsets.append(pos)
        pos += size
    parts = [_HEADER.build(Magic=BINARY_MAGIC, NumberOfBundles=len(encoded))]
    for e, off, size in zip(encoded, offsets, sizes):
        parts.append(_ENTRY.build(Offset=off, Size=size, IdLength=len(e)))
        parts.append(e)
    return b"".join(parts), offsets


def _paddings(ids: Sequence[str], offsets: Sequence[int], sizes: Sequence[int], header_size: int) -> list[int]:
    """Zero bytes LLVM 19 writes before each payload: up to the offset its `BundlesInfo` map holds for the
    ID. With a duplicated ID that is the *last* entry's offset, so the header's first offset points into
    padding (LLVM's quirk, reproduced byte for byte); otherwise exactly the header's offsets."""
    last = dict(zip(ids, offsets))
    pads, pos = [], header_size
    for i, size in zip(ids, sizes):
        pad = max(0, last[i] - pos)
        pads.append(pad)
        pos += pad + size
    return pads


def _binary_chunks(entries: Sequence[BundleEntry], bundle_align: int):
    ids, sizes = [e.bundle_entry_id for e in entries], [_nbytes(e.data) for e in entries]
    header, offsets = binary_bundle_layout(ids, sizes, bundle_align)
    yield header
    for e, pad in zip(entries, _paddings(ids, offsets, sizes, len(header))):
        if pad:
            yield bytes(pad)
        yield e.data


def write_binary_bundle(entries: Sequence[BundleEntry], out: BinaryIO, bundle_align: int = 1) -> int:
    """Stream a binary bundle of `entries` (in the given order) to `out`; returns the bytes written."""
    total = 0
    for chunk in _binary_chunks(entries, bundle_align):
        out.write(chunk)
        total += _nbytes(chunk)
    return total


# --- text bundles -----------------------------------------------------------------------------------


def text_comment(files_type: str) -> bytes:
    """The comment string of a text `-type`."""
    try:
        return TEXT_COMMENTS[files_type]
    except KeyError:
        raise UsageError(f"'{files_type}': invalid file type specified") from None


def text_bundle_type(buf) -> str | None:
    """The `-type` of the first text-bundle marker anywhere in `buf` (one of `i`, `ll`, `s` for its
    comment string), else None: the text handler, unlike the others, finds its markers after any
    preamble."""
    view = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
    m = _TEXT_MARKER.search(view)
    return None if m is None else _TYPE_OF_COMMENT[m.group(1)]


def _markers(comment: bytes) -> tuple[bytes, bytes]:
    start = b"\n" + comment + TEXT_BUNDLE_START
    end = b"\n" + comment + b" " + BINARY_MAGIC + b"__END__ "
    return start, end


def read_text_bundle(buf, files_type: str) -> list[BundleEntry]:
    """Entries of a text bundle in file order (`TextFileHandler`): a payload runs from after its START line
    to the next END marker. No START marker means no entries; a START without an END is an error."""
    start, end = _markers(text_comment(files_type))
    view = memoryview(buf).cast("B")
    start_re, end_re = re.compile(re.escape(start)), re.compile(re.escape(end))
    entries: list[BundleEntry] = []
    pos = 0
    while True:
        m = start_re.search(view, pos)
        if m is None:
            return entries
        id_start = m.end()
        nl = _find_newline(view, id_start)
        if nl < 0:
            raise BundleFormatError(f"text bundle: START marker at offset {m.start()} has no end of line")
        entry_id = bytes(view[id_start:nl]).decode(*_ID_ENCODING)
        payload_start = nl + 1
        e = end_re.search(view, payload_start)
        if e is None:
            raise BundleFormatError(f"text bundle: entry '{entry_id}' at offset {m.start()} has no END marker")
        entries.append(BundleEntry(entry_id, view[payload_start:e.start()], payload_start))
        nl = _find_newline(view, e.end())
        pos = view.nbytes if nl < 0 else nl + 1


_NEWLINE = re.compile(b"\n")


def _find_newline(view: memoryview, pos: int) -> int:
    m = _NEWLINE.search(view, pos)
    return -1 if m is None else m.start()


def _text_chunks(entries: Sequence[BundleEntry], comment: bytes):
    start, end = _markers(comment)
    for e in entries:
        eid = _id_bytes(e.bundle_entry_id)
        yield start + eid + b"\n"
        yield e.data
        yield end + eid + b"\n"


def write_text_bundle(entries: Sequence[BundleEntry], out: BinaryIO, files_type: str) -> int:
    """Stream a text bundle of `entries` (in the given order) to `out`; returns the bytes written."""
    total = 0
    for chunk in _text_chunks(entries, text_comment(files_type)):
        out.write(chunk)
        total += _nbytes(chunk)
    return total


def bundle_chunks(entries: Sequence[BundleEntry], files_type: str, bundle_align: int = 1) -> Iterable:
    """The serialized bundle as a sequence of bytes-like chunks (for streaming into a compressor)."""
    if files_type in TEXT_COMMENTS:
        return _text_chunks(entries, TEXT_COMMENTS[files_type])
    return _binary_chunks(entries, bundle_align)


def bundle_size(entries: Sequence[BundleEntry], files_type: str, bundle_align: int = 1) -> int:
    """The size in bytes of the serialized (uncompressed) bundle."""
    if files_type in TEXT_COMMENTS:
        start, end = _markers(TEXT_COMMENTS[files_type])
        return sum(len(start) + len(end) + 2 * (len(_id_bytes(e.bundle_entry_id)) + 1) + _nbytes(e.data)
                   for e in entries)
    ids, sizes = [e.bundle_entry_id for e in entries], [_nbytes(e.data) for e in entries]
    header, offsets = binary_bundle_layout(ids, sizes, bundle_align)
    return len(header) + sum(_paddings(ids, offsets, sizes, len(header))) + sum(sizes)


# ---------------------------------------------------------------------------------------------
# Recognising bundles, and what `inspect` lists of them (`magic.FORMAT_MODULES`)
# ---------------------------------------------------------------------------------------------

def _is_binary_bundle(head: bytes, buf) -> bool:
    """identify_magic's offload_bundle needs sizeof("__CLANG_OFFLOAD_BUNDLE__"), its NUL included."""
    return head.startswith(BUNDLE_MAGIC) and len(buf) > len(BUNDLE_MAGIC)


def _is_text_bundle(head: bytes, buf) -> bool:
    """Whether `buf` starts with a text bundle's first marker ("\\n// __CLANG_...")."""
    if head[:1] != b"\n":
        return False
    first = bytes(buf[:4 + len(TEXT_BUNDLE_START)])
    return any(first.startswith(b"\n" + comment + TEXT_BUNDLE_START) for comment in TEXT_BUNDLE_COMMENTS)


def _inspect_binary(scan, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
    scan.scan_bundle_entries(read_binary_bundle(data), "bundle", path, wrappers, depth, compressed)


def _inspect_text(scan, data, path: str, wrappers: list[str], depth: int, compressed: bool) -> None:
    scan.scan_bundle_entries(read_text_bundle(data, text_bundle_type(data)), "text-bundle", path, wrappers,
                             depth, compressed)


FORMATS = (
    Format(FileKind.CLANG_BUNDLE, recognise=_is_binary_bundle, container="bundle", inspect=_inspect_binary),
    Format(FileKind.TEXT_BUNDLE, recognise=_is_text_bundle, container="text-bundle", inspect=_inspect_text),
)
