"""scan.comp and intscan.comp: cumulative sums or products of floats or int32 along an axis
(forward, or from the end for the gradient); the twin of ``dualgrad/cpu/scan.py``. Lines
of stride 1 longer than a few elements are cut into tiles of RUN * WG elements: a first
dispatch sums the tiles, GROUP a workgroup, and for each line the sums of the tiles before
each (lines of several tiles), a second scans each tile, a workgroup each, from there.
Other lines take a thread each. Products take the same passes (scan.glsl's PRODUCT)."""
from __future__ import annotations

import numpy as np

from ..dispatch import MAX_GROUPS, WG, grid, packer
from ..workspace import COUNTER, COUNTERS

COLUMNS, TOTALS, SCAN = 0, 1, 2
# Elements a thread scans (scan.comp's RUN): a line of one tile takes the longer runs, lines
# of several the shorter (on an H200 over 16M elements: rows of 4096 0.064 ms with 16 a
# thread against 0.096 with 8 in two passes; one line 0.090 ms with 8, 0.108 with 16).
ONE_TILE_RUN, RUN = 16, 8
GROUP = 4                         # tiles a first-dispatch workgroup sums (scan.comp's GROUP)
SHORT = 64                        # lines this long or shorter: a thread each
_PUSH = packer(4, 5)


def cumsum(dev, x, outer: int, n: int, inner: int, reverse: bool, out=None):
    """The cumulative sums of x read as (outer, n, inner) along n, into ``out`` (or new)."""
    return _scan(dev, x, outer, n, inner, reverse, False, out)


def cumprod(dev, x, outer: int, n: int, inner: int, reverse: bool, out=None):
    """The cumulative products, as ``cumsum``'s sums (scan.glsl's PRODUCT)."""
    return _scan(dev, x, outer, n, inner, reverse, True, out)


def _spec(mode: int, run: int, product: bool) -> tuple:
    """scan.glsl's (MODE, RUN, PRODUCT); sums keep the shorter keys they had before
    products existed (MODE alone for COLUMNS, which reads no RUN)."""
    return (mode, run, 1) if product else (mode,) if mode == COLUMNS else (mode, run)


def _scan(dev, x, outer, n, inner, reverse, product: bool, out):
    out = dev.empty(x.shape, x.dtype) if out is None else out
    shader = "intscan" if x.dtype == np.int32 else "scan"
    if not x.size:
        return out
    if inner > 1 or n <= SHORT:
        lines = outer * inner
        dev.launch(shader, _spec(COLUMNS, RUN, product),
                   _PUSH.pack(x.address, out.address, 0, 0, lines, n, inner, 1, reverse),
                   grid(lines), [x], [out])
        return out
    if n <= ONE_TILE_RUN * WG:
        dev.launch(shader, _spec(SCAN, ONE_TILE_RUN, product),
                   _PUSH.pack(x.address, out.address, 0, 0, outer, n, 1, 1, reverse),
                   (1, min(outer, MAX_GROUPS), 1), [x], [out])
        return out
    tiles = -(-n // (RUN * WG))
    totals = dev.empty((outer, tiles), x.dtype)
    for first in range(0, outer, COUNTERS):       # (a counter a line, for each dispatch)
        lines = min(COUNTERS, outer - first)
        skip = 4 * first * n
        with dev.lock:                  # (a workspace range taken for this dispatch)
            counters = dev.workspace.take(COUNTER, lines)
            push = _PUSH.pack(x.address + skip, out.address + skip,
                              totals.address + 4 * first * tiles, counters, lines, n, 1,
                              tiles, reverse)
            rows = min(lines, MAX_GROUPS)
            dev.launch(shader, _spec(TOTALS, RUN, product), push,
                       (min(-(-tiles // GROUP), MAX_GROUPS), rows, 1), [x], [totals])
        dev.launch(shader, _spec(SCAN, RUN, product), push,
                   (min(tiles, MAX_GROUPS), rows, 1), [x, totals], [out])
    return out
