"""gather.comp: elements gathered along rows, and their gradients added back in k order;
the twin of ``dualgrad/cpu/gather.py``."""
from __future__ import annotations

import struct

from ..dispatch import grid, packer


def _push(src, idx, out, rows, k, cols, src_rows, skip) -> bytes:
    return packer(3, 4).pack(src.address, idx.address, out.address, rows, k, cols,
                             src_rows) + struct.pack("<i", skip)


def gather(dev, x, idx, skip):
    rows, k = idx.shape
    out = dev.empty((rows, k), x.dtype)
    if out.size:
        dev.launch("gather", (0,), _push(x, idx, out, rows, k, x.shape[1], x.shape[0], skip),
                   grid(out.size), [x, idx], [out])
    return out


def gather_backward(dev, idx, g, cols, skip):
    rows, k = idx.shape
    out = dev.empty((rows, cols))
    dev.fill(out, 0.0)
    if g.size:
        dev.launch("gather", (1,), _push(g, idx, out, rows, k, cols, rows, skip),
                   grid(rows), [g, idx, out], [out])
    return out
