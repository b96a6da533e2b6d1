"""Convolutions as products of the weight and each image's windows, a band of images at a
time (their windows unfolded into a buffer of 1 MiB, read by BLAS from cache): the twins of
``dualgrad/gpu/kernels/conv.py``, which read the windows where they lie. The geometry is
``unfold``'s; the padding may be negative (the input gradient's windows start inside
the image)."""
from __future__ import annotations

import numpy as np

from . import matmul, unfold

BAND_ELEMENTS = 1 << 18        # the unfolded windows of a band of images, at most (or one)


def _band(cols_per_image: int) -> int:
    return max(1, BAND_ELEMENTS // max(1, cols_per_image))


def conv2d(x: np.ndarray, weight: np.ndarray, dilation, padding, stride, out_size,
           low=None) -> np.ndarray:
    o, kernel = weight.shape[0], weight.shape[2:]
    n_b = x.shape[0]
    length = out_size[0] * out_size[1]
    x, w = matmul.rounded(low, x, weight.reshape(o, -1))
    out = np.empty((n_b, o) + tuple(out_size), x.dtype)
    band = _band(w.shape[1] * length)
    for b in range(0, n_b, band):
        cols = unfold.unfold(x[b:b + band], kernel, dilation, padding, stride, out_size, 0.0)
        matmul.matmul(w, cols, out=out[b:b + band])
    return out


def conv2d_weight(x: np.ndarray, g: np.ndarray, kernel, dilation, padding, stride,
                  low=None) -> np.ndarray:
    n_b, c = x.shape[:2]
    o, out_size = g.shape[1], g.shape[2:]
    rows = c * kernel[0] * kernel[1]
    x, g = matmul.rounded(low, x, g.reshape(n_b, o, -1))
    out = np.zeros((o, rows), x.dtype)
    band = _band(rows * g.shape[2])
    with np.errstate(invalid="ignore", over="ignore"):   # (inf and NaN propagate)
        for b in range(0, n_b, band):
            cols = unfold.unfold(x[b:b + band], kernel, dilation, padding, stride, out_size,
                                 0.0)
            for i in range(cols.shape[0]):   # an image's product at a time: BLAS reads the
                out += g[b + i] @ cols[i].T  # transposed columns in place (tensordot's
                                             # copies took 2-3 times as long)
    return out.reshape((o, c) + tuple(kernel))
