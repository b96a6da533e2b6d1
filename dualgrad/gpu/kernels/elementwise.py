"""Elementwise kernels: unary.comp (ops with up to two scalar parameters, and their
backward) and binary.comp (NumPy broadcasting, in pieces of up to 4-D, and both operands'
gradients); the twins of ``dualgrad/cpu/unary.py`` and ``dualgrad/cpu/binary.py``."""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ...backend import mixed_side
from ...kernel_ops import BINARY, UNARY
from ...shapes import broadcast_strides, contiguous_strides, pieces
from ..dispatch import ROUND16, check_size, grid, packed_uints, packer, quad_grid

_UNARY_PUSH = packer(4, 1, 2)     # x, y, g, out; n; a, b
_ADDRESSES5 = packer(5)
_UNARY_CODE, _BINARY_CODE = UNARY.code, BINARY.code


@functools.lru_cache(maxsize=1024)      # called on every binary dispatch
def broadcast_layout(shapes: tuple, out_shape: tuple | None) -> tuple:
    """(output shape, pieces, FLAT) of an elementwise op over operands of ``shapes`` (the
    broadcast of them where ``out_shape`` is None): each piece (the uints the shader takes
    after its addresses, packed; element count; element offsets of the operands and of the
    output), one for up to 4 dimensions that do not fold (``shapes.pieces``)."""
    shape = tuple(np.broadcast_shapes(*shapes) if out_shape is None else out_shape)
    check_size(shape)
    walks = pieces(shape, tuple(broadcast_strides(s, shape) for s in shapes) +
                   (contiguous_strides(shape),))
    parts = tuple((packed_uints(tuple(int(u) for u in (math.prod(s4), *s4,
                                                       *itertools.chain(*strides[:-1])))),
                   math.prod(s4), offsets) for s4, strides, offsets in walks)
    return shape, parts, int(all(s == shape for s in shapes))


def at(h, offset: int) -> int:
    """The device address of element ``offset`` of h."""
    return h.address + offset * h.dtype.itemsize


def _unary_grid(h):
    """A quad a thread, or for 16-bit storage a word (two elements)."""
    low = ROUND16.get(h.dtype, 0)
    return low, grid((h.size + 1) // 2) if low else quad_grid(h.size)


def unary(dev, op, x, a=0.0, b=0.0, out=None):
    out = dev.empty(x.shape, x.dtype) if out is None else out
    if x.size:
        low, groups = _unary_grid(x)
        dev.launch("unary", (_UNARY_CODE[op], 0, low),
                   _UNARY_PUSH.pack(x.address, 0, 0, out.address, x.size, a, b),
                   groups, [x], [out])
    return out


def unary_backward(dev, op, x, y, g, a=0.0, b=0.0, out=None):
    out = dev.empty(g.shape, g.dtype) if out is None else out
    if g.size:
        low, groups = _unary_grid(g)
        dev.launch("unary", (_UNARY_CODE[op], 1, low),
                   _UNARY_PUSH.pack(x.address, y.address, g.address, out.address, g.size, a,
                                    b), groups, [x, y, g], [out])
    return out


def binary(dev, op, a, b, out=None):
    if a.dtype != b.dtype and 2 in (a.dtype.itemsize, b.dtype.itemsize):
        # one float32, one 16-bit, one shape: a float32 result
        mixed = mixed_side(a, b)
        low = b.dtype if mixed == 1 else a.dtype
        out = dev.empty(a.shape) if out is None else out
        if out.size:
            dev.launch("binary", (_BINARY_CODE[op], 0, 1, ROUND16[low], mixed),
                       _ADDRESSES5.pack(a.address, b.address, 0, out.address, 0) +
                       _flat_tail(out.size), quad_grid(out.size), [a, b], [out])
        return out
    if a.dtype in ROUND16:
        out = dev.empty(a.shape, a.dtype) if out is None else out
        if out.size:
            dev.launch("binary", (_BINARY_CODE[op], 0, 1, ROUND16[a.dtype]),
                       _ADDRESSES5.pack(a.address, b.address, 0, out.address, 0) +
                       _flat_tail(out.size), grid((out.size + 1) // 2), [a, b], [out])
        return out
    shape, parts, flat = broadcast_layout((a.shape, b.shape), None)
    out = dev.empty(shape) if out is None else out
    if out.size:
        for tail, n, (oa, ob, oo) in parts:
            dev.launch("binary", (_BINARY_CODE[op], 0, flat),
                       _ADDRESSES5.pack(at(a, oa), at(b, ob), 0, at(out, oo), 0) + tail,
                       (quad_grid if flat else grid)(n), [a, b], [out])
    return out


def _flat_tail(n: int) -> bytes:
    """The uints binary.comp takes after its addresses, for n elements of one shape."""
    return packed_uints((n, 1, 1, 1, n) + (0,) * 8)


def binary_backward(dev, op, a, b, g):
    if g.dtype in ROUND16:
        ga, gb = dev.empty(g.shape, g.dtype), dev.empty(g.shape, g.dtype)
        if g.size:
            dev.launch("binary", (_BINARY_CODE[op], 1, 1, ROUND16[g.dtype]),
                       _ADDRESSES5.pack(a.address, b.address, g.address, ga.address,
                                        gb.address) + _flat_tail(g.size),
                       grid((g.size + 1) // 2), [a, b, g], [ga, gb])
        return ga, gb
    ga, gb = dev.empty(g.shape), dev.empty(g.shape)
    if g.size:
        _, parts, flat = broadcast_layout((a.shape, b.shape), g.shape)
        for tail, n, (oa, ob, og) in parts:
            dev.launch("binary", (_BINARY_CODE[op], 1, flat),
                       _ADDRESSES5.pack(at(a, oa), at(b, ob), at(g, og), at(ga, og),
                                        at(gb, og)) + tail,
                       (quad_grid if flat else grid)(n), [a, b, g], [ga, gb])
    return ga, gb
