"""Structural checks of one device image: is it whole, as the kind it claims to be?

`check_image(path_or_buffer, kind)` reads headers and tables only (no symbol, relocation or
instruction is decoded), so it costs microseconds per image and can run every time a build step
consumes a device object, and on every image `offload-tool verify` reads.  What it checks:

* `elf` (HIP code objects `.co`, cubins, OpenMP/CUDA device objects `.o`): the ELF header, the
  section header table and every section's `sh_offset + sh_size` within the file (the library's
  ELF reader), and the program header table and every segment's `p_offset + p_filesz` within it;
* `bitcode` (`.bc`): the magic (or the wrapper header, its offset and size within the file) and
  every top-level block's length within the file (blocks are skipped by their length, not read);
* `ptx`: text (no NUL byte, UTF-8) with a `.version` and a `.target` directive, whose braces and
  parentheses balance and which ends with a newline (a truncated module ends inside a
  declaration, a function body or a line);
* `fatbin`: the CUDA fat binary's header and every entry's header and payload within the file;
* `auto`: the kind the file's magic says (ELF, bitcode, fat binary; PTX if it is text; else an error).

A damaged image raises an `OffloadError` subclass (`ElfError`, `BitcodeError`, `FatbinError`,
`IntegrityError` for PTX and unknown kinds) whose message names the offset and the field."""

from __future__ import annotations

from ..errors import BitcodeError, FatbinError, OffloadError

__all__ = ["IntegrityError", "check_image", "kind_of", "KINDS"]

KINDS = ("elf", "bitcode", "ptx", "fatbin", "auto")


class IntegrityError(OffloadError):
    """A device image that is not what its kind says (PTX, unknown kind)."""


def _view(path_or_buffer):
    if isinstance(path_or_buffer, (bytes, bytearray, memoryview)):
        return memoryview(path_or_buffer).cast("B") if isinstance(path_or_buffer, memoryview) else memoryview(path_or_buffer), None
    with open(path_or_buffer, "rb") as f:
        return memoryview(f.read()), str(path_or_buffer)


def kind_of(buf) -> str:
    """The kind `auto` resolves to for `buf` (by its first bytes)."""
    head = bytes(buf[:4])
    if head == b"\x7fELF":
        return "elf"
    if head in (b"BC\xc0\xde", b"\xde\xc0\x17\x0b"):
        return "bitcode"
    if head == b"\x50\xed\x55\xba":
        return "fatbin"
    if b"\0" not in bytes(buf[:4096]).rstrip(b"\0"):
        return "ptx"
    raise IntegrityError(f"offset 0x0: magic {head.hex()}: neither an ELF object, LLVM bitcode, a fat binary "
                         "nor PTX text")


def _check_elf(buf) -> None:
    from ..formats.elf import _Elf
    elf = _Elf(buf)  # header, section table, section extents
    elf.program_headers()  # the program header table and each segment's file bytes within the file


def _check_bitcode(buf, name: str) -> None:
    from ..formats.bitcode import _Walker
    walker = _Walker(buf, name)  # magic / wrapper header and its extent
    blocks = 0
    for _block_id, _width in walker.top_level_blocks():
        walker.skip_block()  # its 32-bit length, within the data
        blocks += 1
    if not blocks:
        raise BitcodeError(f"{name}: no top-level block after the magic (the file is {len(buf)} bytes)")


def _check_ptx(buf) -> None:
    text = bytes(buf).rstrip(b"\0")  # a fat binary's PTX entry is NUL-terminated and padded
    at = text.find(b"\0")
    if at >= 0:
        raise IntegrityError(f"offset {at:#x}: PTX: a NUL byte in what should be text")
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IntegrityError(f"offset {exc.start:#x}: PTX: not UTF-8 text") from None
    lines = [ln.strip() for ln in text[:1 << 16].decode("utf-8", "replace").splitlines()]
    for directive in (".version", ".target"):
        if not any(ln.startswith(directive) for ln in lines):
            raise IntegrityError(f"PTX: no {directive} directive (the text is {len(text)} bytes)")
    # A truncated module stops inside a declaration or a function body (its brackets do not
    # balance), or at least inside a line (cicc and clang end the text with a newline).
    for o, c in ((b"{", b"}"), (b"(", b")")):
        opened, closed = text.count(o), text.count(c)
        if opened != closed:
            raise IntegrityError(f"offset {len(text):#x}: PTX: {opened} '{o.decode()}' but {closed} "
                                 f"'{c.decode()}': the text ends inside a block (truncated?)")
    if not text.endswith(b"\n"):
        raise IntegrityError(f"offset {len(text):#x}: PTX: the text ends inside a line (truncated?)")


def _check_fatbin(buf) -> None:
    from ..formats.fatbin import read_fatbin
    fb = read_fatbin(buf)  # header and entry headers, bounds-checked
    if not fb.entries:
        raise FatbinError("offset 0x0: fat binary holds no entry")


def check_image(path_or_buffer, kind: str = "auto", name: str | None = None) -> str:
    """Check that the image at `path_or_buffer` (a path or bytes) is structurally whole as `kind`
    (one of `KINDS`); the kind checked returned. Raises an `OffloadError` subclass naming the offset
    and field of the first problem."""
    buf, path = _view(path_or_buffer)
    name = name or path or "image"
    if kind == "auto":
        kind = kind_of(buf)
    if kind == "elf":
        _check_elf(buf)
    elif kind == "bitcode":
        _check_bitcode(buf, name)
    elif kind == "ptx":
        _check_ptx(buf)
    elif kind == "fatbin":
        _check_fatbin(buf)
    else:
        raise IntegrityError(f"unknown image kind '{kind}'")
    return kind
