"""strided.comp: strided copies (permutations, slices, flips) and the scatter that is the
gradient of an injective one; the twin of ``dualgrad/cpu/strided.py``."""
from __future__ import annotations

import struct

from ...shapes import pad4, strides4
from ..dispatch import grid, packer


def _push(src, out, n, shape, strides, offset) -> bytes:
    lead = 4 - len(shape)
    return packer(2, 5).pack(src.address, out.address, n, *map(int, pad4(shape))) + \
        struct.pack("<5i", *([0] * lead + [int(s) for s in strides]), int(offset))


def permute(dev, x, axes):
    return permute_into(dev, x, axes, dev.empty(tuple(x.shape[a] for a in axes), x.dtype))


def permute_into(dev, x, axes, out):
    """x with its axes permuted, written into ``out`` (of the permuted shape)."""
    xs = strides4(pad4(x.shape))[4 - len(x.shape):]
    return strided_into(dev, x, [xs[a] for a in axes], 0, out)


def strided(dev, x, shape, strides, offset):
    return strided_into(dev, x, strides, offset, dev.empty(tuple(shape), x.dtype))


def strided_into(dev, x, strides, offset, out):
    if out.size:
        dev.launch("strided", (0,), _push(x, out, out.size, out.shape, strides, offset),
                   grid(out.size), [x], [out])
    return out


def strided_backward(dev, g, size, strides, offset, out=None):
    if out is None:
        out = dev.empty((size,), g.dtype)
        dev.fill(out, 0)
    if g.size:
        dev.launch("strided", (1,), _push(g, out, g.size, g.shape, strides, offset),
                   grid(g.size), [g, out], [out])
    return out
