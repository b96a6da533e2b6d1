"""permute.comp: a contiguous copy with the axes permuted; the twin of
``dualgrad/cpu/permute.py``."""
from __future__ import annotations

from ...shapes import pad4, strides4
from ..dispatch import grid, push_constants


def permute(dev, x, axes):
    return permute_into(dev, x, axes, dev.empty(tuple(x.shape[a] for a in axes)))


def permute_into(dev, x, axes, out):
    """x with its axes permuted, written into ``out`` (of the permuted shape)."""
    shape = out.shape
    if x.size:
        lead = 4 - len(shape)
        xs = strides4(pad4(x.shape))[4 - len(x.shape):]
        is_ = [0] * lead + [xs[a] for a in axes]
        dev.launch("permute", (), push_constants((x.address, out.address),
                                                 (x.size, *map(int, pad4(shape)), *is_)),
                   grid(x.size), [x], [out])
    return out
