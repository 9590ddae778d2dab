"""Binary (`__CLANG_OFFLOAD_BUNDLE__`) and text clang offload bundles: read and write.

Layouts per llvm-formats.md §1/§2; writers reproduce clang-offload-bundler 19's bytes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BundleEntry"]


@dataclass
class BundleEntry:
    """One entry of a bundle: its bundle entry ID and payload (often a memoryview slice of the input).

    `offset` is the payload's offset in the bundle file it was read from (0 when not read from one)."""

    bundle_entry_id: str
    data: bytes | memoryview
    offset: int = 0

    @property
    def size(self) -> int:
        return len(self.data) if not isinstance(self.data, memoryview) else self.data.nbytes
