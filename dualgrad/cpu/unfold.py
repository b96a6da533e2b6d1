"""Sliding windows of images: ``unfold`` copies each window of x (B, C, H, W) into a column
(im2col), ``fold`` adds the columns back into an image (col2im), the gradient of each
other; the twin of ``shaders/unfold.comp``.

A window's geometry is (kernel, dilation, padding, stride, out_size), each a pair (rows,
columns): window (oy, ox) element (i, j) is x[oy * stride - padding + i * dilation] along
each axis, ``value`` where that is outside x. ``padding`` is the top and left padding only;
the bottom and right follow from ``out_size``. The columns are laid out as PyTorch's
``F.unfold``: (B, C * kh * kw, oh * ow), channel-major, then i, then j. ``max_pool``
finds each window's maximum as PyTorch's max pooling does. Big batches are cut across the
cores (``split``), an image a part.
"""
from __future__ import annotations

import numpy as np

from . import split
from .jit import kernel


@kernel
def _unfold(x, out, kh, kw, dh, dw, ph, pw, sh, sw, oh, ow, value):
    n_b, n_c, h, w = x.shape
    for b in range(n_b):
        for c in range(n_c):
            for i in range(kh):
                for j in range(kw):
                    row = (c * kh + i) * kw + j
                    for oy in range(oh):
                        y = oy * sh - ph + i * dh
                        at = oy * ow
                        if y < 0 or y >= h:
                            out[b, row, at:at + ow] = value
                            continue
                        for ox in range(ow):
                            xx = ox * sw - pw + j * dw
                            out[b, row, at + ox] = x[b, c, y, xx] if 0 <= xx < w else value


@kernel
def _fold(cols, out, kh, kw, dh, dw, ph, pw, sh, sw, oh, ow):
    # The columns added into the zeroed image in (i, j) order: each pixel sums the elements
    # that read it in that order, in the output's dtype, as the shader's pixel by pixel.
    n_b, n_c, h, w = out.shape
    for b in range(n_b):
        for c in range(n_c):
            for i in range(kh):
                for j in range(kw):
                    row = (c * kh + i) * kw + j
                    for oy in range(oh):
                        y = oy * sh - ph + i * dh
                        if y < 0 or y >= h:
                            continue
                        for ox in range(ow):
                            xx = ox * sw - pw + j * dw
                            if 0 <= xx < w:
                                out[b, c, y, xx] += cols[b, row, oy * ow + ox]


@kernel
def _max_pool(x, out, kh, kw, dh, dw, ph, pw, sh, sw, oh, ow):
    # PyTorch's rule: the first in-bounds element, replaced by each larger one or NaN.
    n_b, n_c, h, w = x.shape
    for b in range(n_b):
        for c in range(n_c):
            for oy in range(oh):
                for ox in range(ow):
                    best = x[b, c, 0, 0]
                    at = -1
                    for i in range(kh):
                        y = oy * sh - ph + i * dh
                        if y < 0 or y >= h:
                            continue
                        for j in range(kw):
                            xx = ox * sw - pw + j * dw
                            if xx < 0 or xx >= w:
                                continue
                            v = x[b, c, y, xx]
                            if at < 0 or v > best or np.isnan(v):
                                best = v
                                at = y * w + xx
                    out[b, c, oy * ow + ox] = at


def unfold(x: np.ndarray, kernel, dilation, padding, stride, out_size,
           value: float) -> np.ndarray:
    (kh, kw), (oh, ow) = kernel, out_size
    out = np.empty((x.shape[0], x.shape[1] * kh * kw, oh * ow), x.dtype)
    if out.size:
        split.run(_unfold, (x, out), kh, kw, *dilation, *padding, *stride, oh, ow,
                  x.dtype.type(value))
    return out


def fold(cols: np.ndarray, size, kernel, dilation, padding, stride,
         out_size) -> np.ndarray:
    (kh, kw), (oh, ow) = kernel, out_size
    out = np.zeros((cols.shape[0], cols.shape[1] // (kh * kw)) + tuple(size), cols.dtype)
    if out.size:
        split.run(_fold, (cols, out), kh, kw, *dilation, *padding, *stride, oh, ow)
    return out


def max_pool(x: np.ndarray, kernel, dilation, padding, stride, out_size) -> np.ndarray:
    out = np.empty(x.shape[:2] + (out_size[0] * out_size[1],), np.int32)
    if out.size:
        split.run(_max_pool, (x, out), *kernel, *dilation, *padding, *stride, *out_size)
    return out
