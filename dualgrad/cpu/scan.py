"""Cumulative sums and products along an axis: the twin of ``shaders/scan.comp`` (float32,
float64) and ``intscan.comp`` (int32). Each line of floats is combined in float64 in order
and every partial result rounded once to the output dtype (the device works in float32, in
chunks); int32 lines wrap as int32 arithmetic does (combined in int64, whose low 32 bits
are int32's results: exact, in any order)."""
from __future__ import annotations

import numpy as np

from . import split
from .jit import kernel


@kernel
def _scan_rows(x, out, reverse, start, product):
    """Lines of stride 1 (rows of x and out): one running sum or product, from ``start``
    (0 or 1, as float64 or int64: the running value's type), in a register."""
    for o in range(x.shape[0]):
        acc = start
        if reverse:
            for j in range(x.shape[1] - 1, -1, -1):
                acc = acc * x[o, j] if product else acc + x[o, j]
                out[o, j] = acc
        else:
            for j in range(x.shape[1]):
                acc = acc * x[o, j] if product else acc + x[o, j]
                out[o, j] = acc


@kernel
def _scan(x, out, outer, n, inner, reverse, start, product):
    acc = np.full(inner, start)
    for o in range(outer):
        acc[:] = start
        for step in range(n):
            j = n - 1 - step if reverse else step
            row = (o * n + j) * inner
            for k in range(inner):
                acc[k] = acc[k] * x[row + k] if product else acc[k] + x[row + k]
                out[row + k] = acc[k]


def cumsum(x, outer: int, n: int, inner: int, reverse: bool, out=None):
    """The cumulative sums of x (float or int32) read as (outer, n, inner) along n, into
    ``out`` (or new)."""
    return _run(x, outer, n, inner, reverse, False, out)


def cumprod(x, outer: int, n: int, inner: int, reverse: bool, out=None):
    """The cumulative products, as ``cumsum``'s sums."""
    return _run(x, outer, n, inner, reverse, True, out)


def _run(x, outer, n, inner, reverse, product: bool, out):
    out = np.empty_like(x) if out is None else out
    kind = np.int64 if x.dtype == np.int32 else np.float64
    start = kind(1 if product else 0)
    if x.size:
        flat, dst = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
        if inner == 1:                # (lines are independent: cut across the cores)
            split.run(_scan_rows, (flat.reshape(outer, n), dst.reshape(outer, n)),
                      bool(reverse), start, product)
        else:
            _scan(flat, dst, outer, n, inner, bool(reverse), start, product)
    return out
