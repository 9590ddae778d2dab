"""`scons -c` and nvcc's steps: the files they wrote that are no targets of this build (an arch
no longer configured, a source no longer split) are cleaned with the object that owned them."""

from __future__ import annotations

import re

from ..common import names_when_cleaning


#: What nvcc's split steps write beside an object `<stem>.o` (the per-arch files for any arch).
_STEP_FILES = re.compile(r"(?:sm|compute)_\d+[a-z]?\.(?:(?:sm|compute)_\d+[a-z]?\.)?"
                         r"(?:cpp1\.ii|archlist|ptx|cudafe1\.stub\.c|ptx\.cudafe1\.c|ptx\.cudafe1\.gpu|cubin)|"
                         r"cudafe1\.cpp|cudafe1\.stub\.c|module_id|cpp4\.archlist|cpp4\.ii|fatbin\.c")


def clean_leftovers(env, owners, folder, prefix: str, names=_STEP_FILES) -> None:
    """Under `scons -c`, also remove the files nvcc's steps wrote that are not targets of this
    build (`<prefix><name>` with `names` matching `<name>`): those of an arch no longer
    configured (`x.compute_89.ptx`, `x.sm_89.cubin`, ...), and all of them when the source is
    no longer split (`OFFLOAD_NVCC_SPLIT=False`, a wrapper)."""
    for name in names_when_cleaning(folder):
        if name.startswith(prefix) and names.fullmatch(name[len(prefix):]):
            env.Clean(owners, folder.File(name))
