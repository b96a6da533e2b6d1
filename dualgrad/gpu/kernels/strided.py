"""strided.comp: strided copies (permutations, slices, flips) and the scatter that is the
gradient of an injective one; the twin of ``dualgrad/cpu/strided.py``."""
from __future__ import annotations

import math
import struct

from ...shapes import contiguous_strides, pieces
from ..dispatch import grid, packer
from .elementwise import at

_ADDRESSES = packer(2)


def _pieces(shape, strides, offset):
    """(push tail, element count, source offset, contiguous offset) of each 4-D piece of a
    strided walk over ``shape`` (``shapes.pieces``)."""
    for s4, (src, _), (o_src, o_out) in pieces(tuple(shape), (tuple(int(s) for s in strides),
                                                              contiguous_strides(shape))):
        n = math.prod(s4)
        yield (struct.pack("<5I", n, *map(int, s4)) +
               struct.pack("<5i", *src, int(offset) + o_src), n, o_out)


def permute(dev, x, axes):
    return permute_into(dev, x, axes, dev.empty(tuple(x.shape[a] for a in axes), x.dtype))


def permute_into(dev, x, axes, out):
    """x with its axes permuted, written into ``out`` (of the permuted shape)."""
    xs = contiguous_strides(x.shape)
    return strided_into(dev, x, [xs[a] for a in axes], 0, out)


def strided(dev, x, shape, strides, offset):
    return strided_into(dev, x, strides, offset, dev.empty(tuple(shape), x.dtype))


def strided_into(dev, x, strides, offset, out):
    if out.size:
        for tail, n, o_out in _pieces(out.shape, strides, offset):
            dev.launch("strided", (0,), _ADDRESSES.pack(x.address, at(out, o_out)) + tail,
                       grid(n), [x], [out])
    return out


def strided_backward(dev, g, size, strides, offset, out=None):
    if out is None:
        out = dev.empty((size,), g.dtype)
        dev.fill(out, 0)
    if g.size:
        for tail, n, o_g in _pieces(g.shape, strides, offset):
            dev.launch("strided", (1,), _ADDRESSES.pack(at(g, o_g), out.address) + tail,
                       grid(n), [g, out], [out])
    return out
