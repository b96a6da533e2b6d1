"""Convolutions as products of the weight and the windows of a band of images (their
windows unfolded side by side into a buffer of 1 MiB, read by BLAS from cache, one product
a band): the twins of ``dualgrad/gpu/kernels/conv.py``, which read the windows where they
lie. The geometry is ``unfold``'s; the padding may be negative (windows then start inside
the image). The input gradient is the weight's transpose times a band's gradients, the
columns summed back into the images (``fold_band``), or, with stride 1 and fewer output
channels than input ones, the convolution of the gradient with the weight flipped: each
way unfolds or folds the windows of the narrower side (a batch of 64 of 14 x 14, 32 -> 64
channels: 4.0 ms folded, 6.2-6.6 convolved; 64 -> 32: 6.2 folded, 3.9 convolved).

One product a band, not one an image: a 64 x 288 by 288 x 196 product (a 3x3 convolution
of 32 channels into 64 over 14 x 14) ran at 150 GFLOP/s on two cores, four images' columns
side by side at 205; the price is a copy of the output (or of the gradient) between the
band's (channels, images, pixels) order and the images' own. The bands run on every core
at once, each unfolded and multiplied by one thread (BLAS held to one, ``blas.py``).
"""
from __future__ import annotations

import threading

import numpy as np

from . import blas, matmul, split, unfold

BAND_ELEMENTS = 1 << 18        # the unfolded windows of a band of images, at most (or one)

_scratch = threading.local()


def _buffer(name: str, size: int, dtype) -> np.ndarray:
    """This thread's scratch array ``name`` of ``size`` elements or more (kept: a band's
    buffers are the same size every call)."""
    have = getattr(_scratch, name, None)
    if have is None or have.size < size or have.dtype != dtype:
        have = np.empty(size, dtype)
        setattr(_scratch, name, have)
    return have[:size]


def _band(rows: int, o: int, length: int) -> int:
    """Images a band: its windows (rows x length an image) and its product (o x length)
    each BAND_ELEMENTS at most (or one image)."""
    return max(1, BAND_ELEMENTS // max(1, rows * length, o * length))


def _bands(count: int, band: int) -> list:
    return [(b, min(count, b + band)) for b in range(0, count, band)]


def _run(fn, ranges, on_every_core: bool) -> None:
    """fn over the ranges: on every core, or (where a band's work is too short to pay for
    the threads' turns at the interpreter's lock: 1 -> 32 channels took twice as long so)
    in order on this one."""
    if on_every_core:
        split.run_ranges(fn, ranges)
    else:
        for lo, hi in ranges:
            fn(lo, hi)


def conv2d(x: np.ndarray, weight: np.ndarray, dilation, padding, stride, out_size,
           low=None) -> np.ndarray:
    o, kernel = weight.shape[0], weight.shape[2:]
    n_b = x.shape[0]
    length = out_size[0] * out_size[1]
    x, w = matmul.rounded(low, x, weight.reshape(o, -1))
    rows = w.shape[1]
    out = np.empty((n_b, o, length), x.dtype)

    def band(lo, hi):
        if rows < o:
            # Few rows: the product writes more than it reads, and a copy of its output
            # would cost as much as it (1 -> 32 channels: 0.6 ms a batch of 64 so, 1.2
            # side by side): a product an image, into the output.
            cols = unfold.unfold(x[lo:hi], kernel, dilation, padding, stride, out_size, 0.0)
            matmul.matmul(w, cols, out=out[lo:hi])
            return
        cols = unfold.unfold_band(x[lo:hi], kernel, dilation, padding, stride, out_size,
                                  _buffer("cols", (hi - lo) * rows * length, x.dtype))
        p = matmul.matmul(w, cols, out=_buffer("product", o * cols.shape[1], x.dtype))
        out[lo:hi] = p.reshape(o, hi - lo, length).transpose(1, 0, 2)
    with blas.one_thread():
        _run(band, _bands(n_b, _band(rows, o, length)), rows >= o)
    return out.reshape((n_b, o) + tuple(out_size))


def conv2d_weight(x: np.ndarray, g: np.ndarray, kernel, dilation, padding, stride,
                  low=None) -> np.ndarray:
    """The weight's gradient: the bands' products summed. The bands are dealt into at most
    MAX_PARTS groups of consecutive bands, each summed on one thread in order, and the
    groups' sums added in order: the bits do not depend on which thread took which."""
    n_b, c = x.shape[:2]
    o, out_size = g.shape[1], g.shape[2:]
    rows = c * kernel[0] * kernel[1]
    length = g.shape[2] * g.shape[3]
    x, g = matmul.rounded(low, x, g.reshape(n_b, o, length))
    bands = _bands(n_b, _band(rows, o, length))
    groups = split.even(len(bands), min(len(bands), split.MAX_PARTS) or 1)
    # The transposed sums, (rows, o): a band's windows times its gradients' transpose (a
    # product of row-major operands, 64 x 784 by 784 x 288: 0.30 ms where the product
    # reading the windows transposed took 0.43)
    sums = np.zeros((len(groups), rows, o), x.dtype)

    def group(k, _):
        with np.errstate(invalid="ignore", over="ignore"):   # (inf and NaN propagate)
            for lo, hi in bands[slice(*groups[k])]:
                add_band(sums[k], lo, hi)

    def add_band(total, lo, hi):
        if rows < o:                # (as in conv2d: an image's product at a time, no copy)
            windows = unfold.unfold(x[lo:hi], kernel, dilation, padding, stride, out_size,
                                    0.0)
            for i in range(hi - lo):              # (BLAS reads the transpose in place)
                total += windows[i] @ g[lo + i].T
            return
        windows = unfold.unfold_band(x[lo:hi], kernel, dilation, padding, stride, out_size,
                                     _buffer("cols", (hi - lo) * rows * length, x.dtype))
        gt = _buffer("grads", o * (hi - lo) * length, x.dtype).reshape(hi - lo, length, o)
        gt[...] = g[lo:hi].transpose(0, 2, 1)
        total += matmul.matmul(windows, gt.reshape(-1, o))

    with blas.one_thread():
        _run(group, [(k, k + 1) for k in range(len(groups))], rows >= o)
    out = sums[0]
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(1, len(groups)):
            out += sums[k]
    return np.ascontiguousarray(out.T).reshape((o, c) + tuple(kernel))


def conv2d_input(g: np.ndarray, weight: np.ndarray, size, dilation, padding, stride,
                 low=None) -> np.ndarray:
    """The images' gradient: for each band, the weight's transpose (C kh kw, O) times the
    band's gradients side by side (O, images x windows), folded into their images; or
    ``conv2d`` of g with the weight flipped (module docstring)."""
    n_b, o, oh, ow = g.shape
    c, kernel = weight.shape[1], weight.shape[2:]
    if tuple(stride) == (1, 1) and c > o:
        # input pixel y reads g at y - (d (k - 1) - p) + i d
        flipped = np.ascontiguousarray(weight.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
        return conv2d(g, flipped, dilation, tuple(d * (k - 1) - p for d, k, p in
                                                  zip(dilation, kernel, padding)),
                      (1, 1), size, low)
    rows, length = c * kernel[0] * kernel[1], oh * ow
    g, w = matmul.rounded(low, g.reshape(n_b, o, length), weight.reshape(o, rows))
    out = np.empty((n_b, c) + tuple(size), g.dtype)
    if o == 0 or length == 0:
        out[...] = 0
        return out

    def band(lo, hi):
        gb = _buffer("grads", o * (hi - lo) * length, g.dtype).reshape(o, hi - lo, length)
        gb[...] = g[lo:hi].transpose(1, 0, 2)
        cols = matmul.matmul(w, gb.reshape(o, -1), trans_a=True,
                             out=_buffer("cols", rows * (hi - lo) * length, g.dtype))
        unfold.fold_band(cols.reshape(rows, hi - lo, length), out[lo:hi], kernel, dilation,
                         padding, stride, (oh, ow))
    if out.size:
        with blas.one_thread():
            _run(band, _bands(n_b, _band(rows, o, length)), True)
    return out
