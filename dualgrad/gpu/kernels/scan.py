"""scan.comp: cumulative sums along an axis (forward, or from the end for the gradient); the
twin of ``dualgrad/cpu/scan.py``. Lines of stride 1 longer than a few elements are scanned
in chunks of CHUNK by workgroups, the chunks' totals scanned the same way (recursively), and
added back; other lines by a thread each."""
from __future__ import annotations

from ..dispatch import MAX_GROUPS, WG, grid, packer

COLUMNS, CHUNKS, ADD = 0, 1, 2
CHUNK = 4 * WG
SHORT = 64                        # lines this long or shorter: a thread each
_PUSH = packer(3, 5)


def cumsum(dev, x, outer: int, n: int, inner: int, reverse: bool, out=None):
    """The cumulative sums of x read as (outer, n, inner) along n, into ``out`` (or new)."""
    out = dev.empty(x.shape) if out is None else out
    if not x.size:
        return out
    if inner > 1 or n <= SHORT:
        lines = outer * inner
        dev.launch("scan", (COLUMNS,), _PUSH.pack(x.address, out.address, 0, lines, n, inner,
                                                   1, reverse), grid(lines), [x], [out])
        return out
    chunks = -(-n // CHUNK)
    sums = dev.empty((outer, chunks))
    groups = (min(chunks, MAX_GROUPS), min(outer, MAX_GROUPS), 1)
    dev.launch("scan", (CHUNKS,), _PUSH.pack(x.address, out.address, sums.address, outer, n,
                                              1, chunks, reverse), groups, [x], [out, sums])
    if chunks > 1:
        cumsum(dev, sums, outer, chunks, 1, False, out=sums)
        dev.launch("scan", (ADD,), _PUSH.pack(x.address, out.address, sums.address, outer, n,
                                               1, chunks, reverse), groups, [sums, out], [out])
    return out
