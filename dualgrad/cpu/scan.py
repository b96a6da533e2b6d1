"""Cumulative sums along an axis: the twin of ``shaders/scan.comp`` (float32, float64) and
``intscan.comp`` (int32). Each line of floats is added in float64 in order and every partial
sum rounded once to the output dtype (the device adds in float32, in chunks); int32 lines
wrap as int32 arithmetic does (added in int64, whose low 32 bits are int32's sums: exact,
in any order)."""
from __future__ import annotations

import numpy as np

from . import split
from .jit import kernel


@kernel
def _cumsum_rows(x, out, reverse, zero):
    """Lines of stride 1 (rows of x and out): one running sum, from ``zero`` (float64 or
    int64: the sum's type), in a register."""
    for o in range(x.shape[0]):
        acc = zero
        if reverse:
            for j in range(x.shape[1] - 1, -1, -1):
                acc += x[o, j]
                out[o, j] = acc
        else:
            for j in range(x.shape[1]):
                acc += x[o, j]
                out[o, j] = acc


@kernel
def _cumsum(x, out, outer, n, inner, reverse, zero):
    acc = np.full(inner, zero)
    for o in range(outer):
        acc[:] = zero
        for step in range(n):
            j = n - 1 - step if reverse else step
            row = (o * n + j) * inner
            for k in range(inner):
                acc[k] += x[row + k]
                out[row + k] = acc[k]


def cumsum(x, outer: int, n: int, inner: int, reverse: bool, out=None):
    """The cumulative sums of x (float or int32) read as (outer, n, inner) along n, into
    ``out`` (or new)."""
    out = np.empty_like(x) if out is None else out
    zero = np.int64(0) if x.dtype == np.int32 else np.float64(0)
    if x.size:
        flat, dst = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
        if inner == 1:                # (lines are independent: cut across the cores)
            split.run(_cumsum_rows, (flat.reshape(outer, n), dst.reshape(outer, n)),
                      bool(reverse), zero)
        else:
            _cumsum(flat, dst, outer, n, inner, bool(reverse), zero)
    return out
