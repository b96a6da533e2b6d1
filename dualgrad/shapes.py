"""Shape rules both backends and the front end share: ranks, 4-D padding, broadcasting
strides, the pieces a strided walk of up to MAX_RANK dimensions takes in the 4-D kernels,
and the shapes of reductions. Arithmetic on tuples only."""
from __future__ import annotations

import functools
import itertools
import math

MAX_RANK = 6                      # tensors' dimensions (the kernels index 4, see pieces)
KERNEL_RANK = 4


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


def broadcast_strides(shape, out) -> tuple:
    """Element strides of a C-contiguous array of ``shape`` read as the shape ``out`` (of
    its rank or more; 0 along broadcast axes); shapes are right-aligned as in NumPy."""
    rank = len(out)
    full = (1,) * (rank - len(shape)) + tuple(shape)
    strides, step = [0] * rank, 1
    for axis in range(rank - 1, -1, -1):
        strides[axis] = 0 if full[axis] == 1 and out[axis] != 1 else step
        step *= full[axis]
    return tuple(strides)


def contiguous_strides(shape) -> tuple:
    """Row-major element strides of ``shape``."""
    return broadcast_strides(shape, tuple(shape))


def fold(shape, strides: tuple) -> tuple:
    """The same walk over fewer dimensions: axes of size 1 dropped, and neighbours merged
    where every stride list in ``strides`` steps over them as one (outer stride = inner
    stride x inner size). Returns (shape, stride lists)."""
    out_shape, out_strides = [], [[] for _ in strides]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if out_shape and all(ss[-1] == st[d] * n for ss, st in zip(out_strides, strides)):
            out_shape[-1] *= n
            for ss, st in zip(out_strides, strides):
                ss[-1] = st[d]
        else:
            out_shape.append(n)
            for ss, st in zip(out_strides, strides):
                ss.append(st[d])
    return tuple(out_shape), tuple(tuple(ss) for ss in out_strides)


@functools.lru_cache(maxsize=1024)       # called on every broadcast or strided dispatch
def pieces(shape: tuple, strides: tuple) -> tuple:
    """A walk over ``shape`` reading each of ``strides`` (element stride lists, one per
    operand) as 4-D pieces for the kernels: ((shape4, stride4 lists, element offsets per
    operand), ...). Folded first (``fold``); where more than 4 dimensions remain, one piece
    per index of the leading ones."""
    shape, strides = fold(shape, strides)
    lead = max(len(shape) - KERNEL_RANK, 0)
    inner = pad4(shape[lead:])
    inner_strides = tuple((0,) * (KERNEL_RANK - len(st[lead:])) + tuple(st[lead:])
                          for st in strides)
    out = []
    for index in itertools.product(*(range(n) for n in shape[:lead])):
        offsets = tuple(sum(i * s for i, s in zip(index, st[:lead])) for st in strides)
        out.append((inner, inner_strides, offsets))
    return tuple(out)


def reduction_layout(shape: tuple, axes: tuple) -> tuple:
    """A reduction over ``axes`` as one of at most 4 dimensions: (permutation or None, the
    folded shape, the folded axes). Neighbouring axes both reduced or both kept merge;
    where more than 4 dimensions remain, the input is to be permuted first (reduced axes
    last), which leaves two."""
    def merged(dims, reduced):
        out, out_reduced = [], []
        for n, r in zip(dims, reduced):
            if out and out_reduced[-1] == r:
                out[-1] *= n
            else:
                out.append(n)
                out_reduced.append(r)
        return tuple(out), tuple(i for i, r in enumerate(out_reduced) if r)
    reduced = [d in axes for d in range(len(shape))]
    folded, folded_axes = merged(shape, reduced)
    if len(folded) <= KERNEL_RANK:
        return None, folded, folded_axes
    perm = tuple([d for d in range(len(shape)) if not reduced[d]] +
                 [d for d in range(len(shape)) if reduced[d]])
    folded, folded_axes = merged([shape[d] for d in perm], [reduced[d] for d in perm])
    return perm, folded, folded_axes


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
