"""argreduce.comp: argmax and argmin along an axis; the twin of
``dualgrad/cpu/argreduce.py``. Long lines of stride 1 are cut into chunks, a workgroup
each, and the workgroup that finishes a line's last chunk compares the chunks' best
elements in the same dispatch; other lines take a thread each."""
from __future__ import annotations

import numpy as np

from ..dispatch import MAX_GROUPS, WG, grid, packer
from ..workspace import COUNTER

COLUMNS, CHUNKS = 0, 1
SHORT = 256                       # lines this long or shorter: a thread each
BUSY_GROUPS = 1024                # workgroups a dispatch aims for over all its lines
MIN_CHUNK = 16 * WG               # the fewest elements a workgroup compares
INT32 = np.dtype(np.int32)
_PUSH = packer(5, 5)


def chunking(lines: int, n: int) -> tuple:
    """(chunks a line, elements a chunk, a multiple of 4 but for a line's last)."""
    chunks = max(1, min(-(-BUSY_GROUPS // lines), n // MIN_CHUNK))
    chunk = (-(-n // chunks) + 3) // 4 * 4
    return -(-n // chunk), chunk


def argreduce(dev, op, x, outer: int, n: int, inner: int):
    out = dev.empty((outer * inner,), INT32)
    spec = (1 if op == "argmin" else 0, 0 if x.dtype.kind == "f" else 1)
    if not out.size:
        return out
    if inner > 1 or n <= SHORT:
        lines = outer * inner
        dev.launch("argreduce", (COLUMNS, *spec),
                   _PUSH.pack(x.address, out.address, 0, 0, 0, lines, n, inner, 1, n),
                   grid(lines), [x], [out])
        return out
    chunks, chunk = chunking(outer, n)
    groups = (min(chunks, MAX_GROUPS), min(outer, MAX_GROUPS), 1)
    if chunks == 1:
        dev.launch("argreduce", (CHUNKS, *spec),
                   _PUSH.pack(x.address, out.address, 0, 0, 0, outer, n, 1, 1, chunk),
                   groups, [x], [out])
        return out
    with dev.lock:                      # (workspace ranges taken for this dispatch)
        partials, writes = dev.workspace.partials((2, outer * chunks), [out])
        counters = dev.workspace.take(COUNTER, outer)
        dev.launch("argreduce", (CHUNKS, *spec),
                   _PUSH.pack(x.address, out.address, partials, partials + 4 * outer * chunks,
                              counters, outer, n, 1, chunks, chunk),
                   groups, [x], writes)
    return out
