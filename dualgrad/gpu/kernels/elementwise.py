"""Elementwise kernels: unary.comp (ops with up to two scalar parameters, and their
backward) and binary.comp (NumPy broadcasting up to 4-D, and both operands' gradients); the
twins of ``dualgrad/cpu/unary.py`` and ``dualgrad/cpu/binary.py``."""
from __future__ import annotations

import functools
import math

import numpy as np

from ...kernel_ops import BINARY, UNARY
from ...shapes import broadcast_strides, pad4
from ..dispatch import check_size, grid, packed_uints, packer, quad_grid

_UNARY_PUSH = packer(4, 1, 2)     # x, y, g, out; n; a, b
_ADDRESSES5 = packer(5)
_UNARY_CODE, _BINARY_CODE = UNARY.code, BINARY.code


@functools.lru_cache(maxsize=1024)      # called on every binary dispatch
def broadcast_layout(a_shape: tuple, b_shape: tuple, out_shape: tuple | None) -> tuple:
    """(output shape, the uints binary.comp takes, packed, FLAT) for operands of these
    shapes; ``out_shape`` None: the broadcast of the two."""
    shape = np.broadcast_shapes(a_shape, b_shape) if out_shape is None else out_shape
    check_size(shape)
    s4 = pad4(shape)
    uints = (math.prod(shape), *s4, *broadcast_strides(a_shape, s4),
             *broadcast_strides(b_shape, s4))
    return (tuple(shape), packed_uints(tuple(int(u) for u in uints)),
            int(a_shape == b_shape == tuple(shape)))


def unary(dev, op, x, a=0.0, b=0.0, out=None):
    out = dev.empty(x.shape) if out is None else out
    if x.size:
        dev.launch("unary", (_UNARY_CODE[op], 0),
                   _UNARY_PUSH.pack(x.address, 0, 0, out.address, x.size, a, b),
                   quad_grid(x.size), [x], [out])
    return out


def unary_backward(dev, op, x, y, g, a=0.0, b=0.0, out=None):
    out = dev.empty(g.shape) if out is None else out
    if g.size:
        dev.launch("unary", (_UNARY_CODE[op], 1),
                   _UNARY_PUSH.pack(x.address, y.address, g.address, out.address, g.size, a,
                                    b), quad_grid(g.size), [x, y, g], [out])
    return out


def binary(dev, op, a, b, out=None):
    shape, tail, flat = broadcast_layout(a.shape, b.shape, None)
    out = dev.empty(shape) if out is None else out
    if out.size:
        dev.launch("binary", (_BINARY_CODE[op], 0, flat),
                   _ADDRESSES5.pack(a.address, b.address, 0, out.address, 0) + tail,
                   (quad_grid if flat else grid)(out.size), [a, b], [out])
    return out


def binary_backward(dev, op, a, b, g):
    ga, gb = dev.empty(g.shape), dev.empty(g.shape)
    if g.size:
        _, tail, flat = broadcast_layout(a.shape, b.shape, g.shape)
        dev.launch("binary", (_BINARY_CODE[op], 1, flat),
                   _ADDRESSES5.pack(a.address, b.address, g.address, ga.address, gb.address)
                   + tail, (quad_grid if flat else grid)(g.size), [a, b, g], [ga, gb])
    return ga, gb
