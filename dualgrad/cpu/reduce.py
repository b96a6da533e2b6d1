"""Reductions (sum, mean, max over any axes, with keepdims) and their backward kernels.

The input is read as 4-D; each element adds into the output element its index maps to (the
output's strides are 0 along reduced axes), in row-major order, accumulating in float64. So
the reference sum is sequential, deterministic and carries no float32 rounding until the end.
"""
from __future__ import annotations

import math

import numpy as np

from .elementwise import pad4
from .jit import kernel

REDUCE_OPS = ("sum", "mean", "max")
SUM, MEAN, MAX = range(len(REDUCE_OPS))


def keepdims_shape(shape, axes):
    return tuple(1 if axis in axes else n for axis, n in enumerate(shape))


def reduced_count(shape, axes) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _out_strides(shape, axes) -> np.ndarray:
    """4-D strides into the keepdims output for an input of `shape`: 0 on reduced axes."""
    kept = pad4(keepdims_shape(shape, axes))
    reduced = set(a + 4 - len(shape) for a in axes)
    strides, step = np.zeros(4, np.int64), 1
    for axis in range(3, -1, -1):
        strides[axis] = 0 if axis in reduced else step
        step *= int(kept[axis])
    return strides


def _reduce_kernel(op):
    def reduce_kernel(x, acc, shape, so):
        if op == MAX:
            acc[:] = -math.inf
        else:
            acc[:] = 0.0
        i = 0
        for i0 in range(shape[0]):
            for i1 in range(shape[1]):
                for i2 in range(shape[2]):
                    base = i0 * so[0] + i1 * so[1] + i2 * so[2]
                    for i3 in range(shape[3]):
                        o = base + i3 * so[3]
                        v = np.float64(x[i])
                        if op == MAX:
                            a = acc[o]
                            if a == a and (v > a or v != v):   # NaN, once seen, stays
                                acc[o] = v
                        else:
                            acc[o] += v
                        i += 1
    return kernel(reduce_kernel)


def _reduce_grad_kernel(op):
    def reduce_grad_kernel(x, y, g, out, count, divisor, shape, so):
        if op == MAX:
            count[:] = 0.0
            i = 0
            for i0 in range(shape[0]):
                for i1 in range(shape[1]):
                    for i2 in range(shape[2]):
                        base = i0 * so[0] + i1 * so[1] + i2 * so[2]
                        for i3 in range(shape[3]):
                            o = base + i3 * so[3]
                            if x[i] == y[o]:
                                count[o] += 1.0
                            i += 1
        i = 0
        for i0 in range(shape[0]):
            for i1 in range(shape[1]):
                for i2 in range(shape[2]):
                    base = i0 * so[0] + i1 * so[1] + i2 * so[2]
                    for i3 in range(shape[3]):
                        o = base + i3 * so[3]
                        if op == MAX:
                            # Ties share the gradient evenly, as PyTorch's amax does.
                            out[i] = np.float64(g[o]) / count[o] if x[i] == y[o] else 0.0
                        else:
                            out[i] = np.float64(g[o]) / divisor
                        i += 1
    return kernel(reduce_grad_kernel)


_REDUCE = [_reduce_kernel(op) for op in range(len(REDUCE_OPS))]
_REDUCE_GRAD = [_reduce_grad_kernel(op) for op in range(len(REDUCE_OPS))]


def reduce(op: str, x: np.ndarray, axes: tuple, keepdims: bool = False) -> np.ndarray:
    """Sum, mean or max of x over `axes` (a tuple of non-negative axes)."""
    kshape = keepdims_shape(x.shape, axes)
    acc = np.empty(kshape, np.float64)
    code = REDUCE_OPS.index(op)
    _REDUCE[code](x.reshape(-1), acc.reshape(-1), pad4(x.shape), _out_strides(x.shape, axes))
    if code == MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):   # the mean of nothing is NaN
            acc /= reduced_count(x.shape, axes)
    out = acc.astype(x.dtype)
    return out if keepdims else out.reshape(tuple(n for a, n in enumerate(kshape)
                                                  if a not in axes))


def reduce_backward(op: str, x: np.ndarray, y: np.ndarray, g: np.ndarray,
                    axes: tuple) -> np.ndarray:
    """dL/dx of y = reduce(op, x, axes, keepdims=True), given dL/dy = g (keepdims shape)."""
    out = np.empty_like(x)
    code = REDUCE_OPS.index(op)
    n = reduced_count(x.shape, axes)
    scale = float(n) if (code == MEAN and n) else 1.0
    count = np.empty(g.shape, np.float64)
    _REDUCE_GRAD[code](x.reshape(-1), y.reshape(-1), g.reshape(-1), out.reshape(-1),
                       count.reshape(-1), scale, pad4(x.shape), _out_strides(x.shape, axes))
    return out
