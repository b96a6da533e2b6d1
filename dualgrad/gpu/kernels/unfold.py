"""unfold.comp: sliding windows of images copied into columns, the columns added back, and
each window's maximum found; the twin of ``dualgrad/cpu/unfold.py``."""
from __future__ import annotations

import struct

import numpy as np

from ..dispatch import grid, packer

_PUSH = packer(2, 12)


def _push(src, out, n, channels, size, kernel, dilation, padding, stride, out_size,
          value=0.0) -> bytes:
    bits = int(np.float32(value).view(np.int32)) if isinstance(value, float) else int(value)
    return (_PUSH.pack(src.address, out.address, n, channels, *size, *kernel, *dilation,
                       *stride, *out_size) + struct.pack("<3i", *padding, bits))


def unfold(dev, x, kernel, dilation, padding, stride, out_size, value):
    n_b, n_c, h, w = x.shape
    (kh, kw), (oh, ow) = kernel, out_size
    out = dev.empty((n_b, n_c * kh * kw, oh * ow), x.dtype)
    if out.size:
        value = float(value) if x.dtype == np.float32 else int(value)
        dev.launch("unfold", (0,), _push(x, out, out.size, n_c, (h, w), kernel, dilation,
                                         padding, stride, out_size, value),
                   grid(out.size), [x], [out])
    return out


def fold(dev, cols, size, kernel, dilation, padding, stride, out_size):
    n_c = cols.shape[1] // (kernel[0] * kernel[1])
    out = dev.empty((cols.shape[0], n_c) + tuple(size), cols.dtype)
    if out.size:
        dev.launch("unfold", (1,), _push(cols, out, out.size, n_c, size, kernel, dilation,
                                         padding, stride, out_size),
                   grid(out.size), [cols], [out])
    return out


def max_pool(dev, x, kernel, dilation, padding, stride, out_size):
    n_b, n_c, h, w = x.shape
    out = dev.empty((n_b, n_c, out_size[0] * out_size[1]), np.dtype(np.int32))
    if out.size:
        dev.launch("unfold", (2,), _push(x, out, out.size, n_c, (h, w), kernel, dilation,
                                         padding, stride, out_size),
                   grid(out.size), [x], [out])
    return out
