"""Arithmetic of int32 arrays: the twin of ``shaders/intops.comp`` and ``intreduce.comp``.
NumPy's int32 wraps as two's complement does; floor division and remainder are NumPy's
(toward -inf), with 0 for a zero divisor made explicit; powers by repeated squaring,
wrapping, and those of negative exponents as PyTorch's (1 / x ** -y truncated)."""
from __future__ import annotations

import numpy as np

from . import split
from .jit import kernel

INT32 = np.dtype(np.int32)
_BINARY = {"int_add": np.add, "int_sub": np.subtract, "int_mul": np.multiply,
           "int_floor_divide": np.floor_divide, "int_remainder": np.remainder,
           "int_maximum": np.maximum, "int_minimum": np.minimum}


def _power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x ** y in int32, wrapping (each square and product of the squarings wraps, so the
    result is the exact power modulo 2**32); for y < 0, 1 / x ** -y truncated: 1 for x = 1,
    +-1 for x = -1 (the sign of (-1) ** y), else 0 (x = 0 too, as PyTorch's)."""
    x, y = np.broadcast_arrays(x, y)
    result = np.ones(x.shape, INT32)
    base = np.array(x, INT32)
    e = np.where(y < 0, 0, y).astype(np.uint32)
    while e.any():
        odd = (e & 1) == 1
        result = np.where(odd, result * base, result)
        base = base * base
        e >>= 1
    negative = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 == 0, 1, -1), 0))
    return np.where(y < 0, negative, result)


def integer(op: str, x: np.ndarray, y=None) -> np.ndarray:
    with np.errstate(all="ignore"):
        if op == "int_pow":
            return np.asarray(_power(x, y), INT32, order="C")
        if op == "int_neg":
            return np.asarray(np.negative(x), INT32, order="C")
        if op == "int_abs":
            return np.asarray(np.abs(x), INT32, order="C")
        result = _BINARY[op](x, y)
        if op in ("int_floor_divide", "int_remainder"):
            result = np.where(np.broadcast_to(y, result.shape) == 0, 0, result)
    return np.asarray(result, INT32, order="C")


def _extreme(larger: bool):
    def reduce_(lines, out):
        """out[o, i] = the maximum (``larger``) or minimum of lines[o, :, i] (n >= 1): a
        loop the compiler vectorises (NumPy's int32 maximum.reduce took 1.4 times as
        long)."""
        outer, n, inner = lines.shape
        for o in range(outer):
            if inner == 1:
                m = lines[o, 0, 0]
                for r in range(1, n):
                    m = max(m, lines[o, r, 0]) if larger else min(m, lines[o, r, 0])
                out[o, 0] = m
                continue
            for i in range(inner):
                out[o, i] = lines[o, 0, i]
            for r in range(1, n):
                for i in range(inner):
                    v = lines[o, r, i]
                    out[o, i] = max(out[o, i], v) if larger else min(out[o, i], v)
    return kernel(reduce_)


_EXTREME = {"int_max": _extreme(True), "int_min": _extreme(False)}
_COMBINE = {"int_sum": np.add, "int_max": np.maximum, "int_min": np.minimum}


def _reduced(op: str, lines: np.ndarray, out: np.ndarray) -> None:
    """out (outer, inner) = op of lines (outer, n, inner) along n."""
    if op == "int_sum":
        np.add.reduce(lines, axis=1, dtype=INT32, out=out)
    else:
        _EXTREME[op](lines, out)


def int_reduce(op: str, x: np.ndarray, outer: int, n: int, inner: int) -> np.ndarray:
    """op of x read as (outer, n, inner) along n, in int32 (sums wrapping), on every core
    where x is big: cut along outer where it is long enough, else along n, the parts'
    results then combined (each op is associative: the same result however it is cut)."""
    lines = x.reshape(outer, n, inner)
    if outer >= 2 * split.cores():
        out = np.empty((outer, inner), INT32)
        split.run_ranges(lambda lo, hi: _reduced(op, lines[lo:hi], out[lo:hi]),
                         split.cuts(outer, x.size))
        return out.reshape(-1)
    ranges = split.cuts(n, x.size)
    parts = np.empty((len(ranges), outer, inner), INT32)
    part_of = {lo: k for k, (lo, _) in enumerate(ranges)}
    split.run_ranges(lambda lo, hi: _reduced(op, lines[:, lo:hi], parts[part_of[lo]]),
                     ranges)
    return _COMBINE[op].reduce(parts, axis=0, dtype=INT32).reshape(-1)
