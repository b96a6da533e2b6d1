"""argreduce.comp: argmax and argmin along an axis; the twin of
``dualgrad/cpu/argreduce.py``. Long lines of stride 1 are cut into chunks whose best
elements a second dispatch compares (a workgroup a line); others take a thread a line."""
from __future__ import annotations

import numpy as np

from ..dispatch import MAX_GROUPS, WG, grid, packer

COLUMNS, CHUNKS, FINISH = 0, 1, 2
CHUNK = 16 * WG
SHORT = 256                       # lines this long or shorter: a thread each
INT32 = np.dtype(np.int32)
_PUSH = packer(4, 4)


def argreduce(dev, op, x, outer: int, n: int, inner: int):
    out = dev.empty((outer * inner,), INT32)
    spec = (1 if op == "argmin" else 0, 0 if x.dtype.kind == "f" else 1)
    if not out.size:
        return out
    if inner > 1 or n <= SHORT:
        lines = outer * inner
        dev.launch("argreduce", (COLUMNS, *spec),
                   _PUSH.pack(x.address, out.address, 0, 0, lines, n, inner, 1), grid(lines),
                   [x], [out])
        return out
    chunks = -(-n // CHUNK)
    vals, idx = dev.empty((outer, chunks), INT32), dev.empty((outer, chunks), INT32)
    push = _PUSH.pack(x.address, out.address, vals.address, idx.address, outer, n, 1, chunks)
    dev.launch("argreduce", (CHUNKS, *spec), push,
               (min(chunks, MAX_GROUPS), min(outer, MAX_GROUPS), 1), [x], [vals, idx, out])
    if chunks > 1:
        dev.launch("argreduce", (FINISH, *spec), push, (1, min(outer, MAX_GROUPS), 1),
                   [vals, idx], [out])
    return out
