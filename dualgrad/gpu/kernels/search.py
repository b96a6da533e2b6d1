"""search.comp: binary searches of sorted rows (searchsorted, bucketize), a thread a value;
the twin of ``dualgrad/cpu/search.py``."""
from __future__ import annotations

import numpy as np

from ..dispatch import grid, packer

INT32 = np.dtype(np.int32)
_PUSH = packer(3, 4)


def searchsorted(dev, rows, values, n: int, m: int, shared: bool, right: bool):
    out = dev.empty((values.size,), INT32)
    if values.size:
        spec = (0 if rows.dtype.kind == "f" else 1, int(right))
        dev.launch("search", spec,
                   _PUSH.pack(rows.address, values.address, out.address, values.size, n, m,
                              0 if shared else m),
                   grid(values.size), [rows, values], [out])
    return out
