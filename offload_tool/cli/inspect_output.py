"""What `offload-tool inspect` prints: the table of images (`format_table`), its JSON form
(`to_json`) and the `--sizes` blocks (`format_sizes`).  The inspection itself is
`ops.inspector`'s; this module only words its results for a terminal or a script."""

from __future__ import annotations

from ..ops.inspector import AMBIGUOUS_PRODUCER, DeviceImage
from ..printable import printable

__all__ = ["to_json", "format_table", "format_sizes"]


def to_json(images: list[DeviceImage]) -> str:
    """The images as a JSON array, one object per image (`DeviceImage.to_dict`)."""
    import json  # only for --json
    return json.dumps([img.to_dict() for img in images], indent=2)


_COLUMNS = ("path", "container", "producer", "triple", "arch", "image_kind", "size", "compressed", "sha256")


def format_table(images: list[DeviceImage], hashes: bool = True) -> str:
    """A fixed-width table, one image per line; with `hashes`, the SHA256 column (shortened to 16
    hex digits), which `inspect` prints only with --hash."""
    columns = _COLUMNS if hashes else _COLUMNS[:-1]
    rows = [[str(c).upper() for c in columns]]
    notes: list[str] = []
    for img in images:
        # Names from inside the file, escaped: a newline or escape sequence must not reach the terminal.
        rows.append([printable(c) for c in (img.path, img.container, img.producer, img.triple or "-",
                                            img.arch or "-", img.image_kind)]
                    + [str(img.size), "yes" if img.compressed else "no"] + [(img.sha256 or "")[:16]] * hashes)
        if img.producer_note and img.producer_note not in notes:
            notes.append(img.producer_note)
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines += [f"note: {AMBIGUOUS_PRODUCER}: {printable(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def format_sizes(summaries: list[dict]) -> str:
    """One block per file (`ops.inspector.size_summary`): its size, then bytes and share of the
    file per arch and per container."""
    lines: list[str] = []
    for s in summaries:
        total = s["file_bytes"]
        lines.append(f"{s['path']}: {total} bytes, {s['device_bytes']} in device images")
        for title, table in (("arch", s["archs"]), ("container", s["containers"])):
            for key, row in table.items():
                share = f"{100.0 * row['bytes'] / total:5.1f}%" if total else "    -"
                lines.append(f"  {title:<9} {key:<24} {row['bytes']:>12}  {share}  ({row['images']} image"
                             f"{'' if row['images'] == 1 else 's'})")
        if s["compressed_images"]:
            lines.append(f"  note: {s['compressed_images']} image(s) stored compressed; their decompressed bytes "
                         "are counted")
    return "\n".join(lines) + "\n"
