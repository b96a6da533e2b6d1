"""Shape rules both backends and the front end share: ranks, 4-D padding, broadcasting
strides and the shapes of reductions. Arithmetic on tuples only."""
from __future__ import annotations

import functools
import math

MAX_RANK = 4                      # the kernels index tensors as 4-D


def pad4(shape) -> tuple:
    """``shape`` left-padded with ones to 4-D."""
    return (1,) * (4 - len(shape)) + tuple(shape)


def strides4(shape4) -> list:
    """Row-major element strides of a 4-D shape."""
    s, step = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        s[d] = step
        step *= int(shape4[d])
    return s


def broadcast_strides(shape, out4) -> tuple:
    """Element strides of a C-contiguous array of ``shape`` read as the 4-D shape ``out4``
    (0 along broadcast axes); shapes are right-aligned as in NumPy."""
    shape4 = pad4(shape)
    strides, step = [0, 0, 0, 0], 1
    for axis in range(3, -1, -1):
        strides[axis] = 0 if shape4[axis] == 1 and out4[axis] != 1 else step
        step *= shape4[axis]
    return tuple(strides)


def keepdims_shape(shape, axes) -> tuple:
    """The shape of a reduction over ``axes`` with the reduced axes kept as ones."""
    return tuple(1 if axis in axes else n for axis, n in enumerate(shape))


@functools.lru_cache(maxsize=4096)      # called on every reduction
def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    """The shape of a reduction over ``axes``, with or without the reduced axes."""
    if keepdims:
        return keepdims_shape(shape, axes)
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def reduced_count(shape, axes) -> int:
    """How many elements each output of a reduction over ``axes`` combines."""
    return math.prod(shape[a] for a in axes)
