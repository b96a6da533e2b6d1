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
def _unfold(x, out, kh, kw, dh, dw, ph, pw, sh, sw, oh, ow, value, by_rows):
    # ``out`` is (B, rows, L), or (rows, B, L) where ``by_rows`` (a band of images' columns
    # side by side, one product's operand). Each plane is first copied into the region its
    # windows read, ``value`` around it (or cut, where a padding is negative): the columns
    # are then copied row by row with no bounds test (about 1.4 times as fast as testing
    # each element).
    n_b, n_c, h, w = x.shape
    hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    pad = np.empty((hp, wp), x.dtype)
    qlo = min(wp, max(0, pw))                 # pad columns q whose x column q - pw is in x
    qhi = max(qlo, min(wp, w + pw))
    for b in range(n_b):
        for c in range(n_c):
            for yy in range(hp):
                y, prow = yy - ph, pad[yy]
                if y < 0 or y >= h:
                    prow[:] = value
                    continue
                line = x[b, c, y]
                for q in range(qlo):
                    prow[q] = value
                for q in range(qlo, qhi):
                    prow[q] = line[q - pw]
                for q in range(qhi, wp):
                    prow[q] = value
            # (slices: indexing by ox + an offset of unknown sign would test for negative
            # indices at each element, and keep the copies from vectorising)
            for i in range(kh):
                for j in range(kw):
                    k = (c * kh + i) * kw + j
                    row = out[k, b] if by_rows else out[b, k]
                    if sw == 1:
                        for oy in range(oh):
                            dst = row[oy * ow:(oy + 1) * ow]
                            src = pad[oy * sh + i * dh, j * dw:j * dw + ow]
                            for ox in range(ow):
                                dst[ox] = src[ox]
                    else:
                        for oy in range(oh):
                            dst = row[oy * ow:(oy + 1) * ow]
                            src = pad[oy * sh + i * dh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
                            for ox in range(ow):
                                dst[ox] = src[ox]


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
def _fold_band(cols, out, kh, kw, dh, dw, ph, pw, sh, sw, oh, ow):
    # ``fold`` of a band's columns (C * kh * kw, B, oh * ow) into ``out`` (B, C, H, W):
    # each plane's elements summed, row by row, into a zeroed plane of every position its
    # windows cover (no bounds test: a test per element made ``_fold`` several times
    # slower), then the image cut out of it. Each pixel sums in (i, j) order, as _fold.
    n_b, n_c, h, w = out.shape
    hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    pad = np.empty((hp, wp), out.dtype)
    ylo, yhi = max(0, -ph), max(0, min(h, hp - ph))  # image rows inside the plane
    qlo, qhi = max(0, -pw), max(0, min(w, wp - pw))  # and columns
    qhi = max(qlo, qhi)
    for b in range(n_b):
        for c in range(n_c):
            pad[:] = 0
            for i in range(kh):
                for j in range(kw):
                    row = cols[(c * kh + i) * kw + j, b]
                    for oy in range(oh):
                        dst = pad[oy * sh + i * dh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
                        src = row[oy * ow:(oy + 1) * ow]
                        for ox in range(ow):
                            dst[ox] += src[ox]
            image = out[b, c]
            for y in range(h):
                line = image[y]
                if y < ylo or y >= yhi:
                    line[:] = 0
                    continue
                src = pad[y + ph, qlo + pw:qhi + pw]
                for q in range(qlo):
                    line[q] = 0
                dst = line[qlo:qhi]
                for q in range(qhi - qlo):
                    dst[q] = src[q]
                for q in range(qhi, w):
                    line[q] = 0


POOL_RUN = 1024                 # windows ``_max_pool_inside`` compares at once (or a plane's)


@kernel
def _max_pool_inside(x, out, kh, kw, dh, dw, sh, sw, oh, ow):
    # Windows wholly inside the planes (no padding): each element of POOL_RUN windows, from
    # consecutive planes, is copied into a row of its own; then a row at a time is compared
    # with the best so far, over all POOL_RUN windows at once. A window at a time (a loop of
    # elements, or one element of a row's 14 windows) left the compiler short loops whose
    # selects became branches, mispredicted on real data: 9 ns a 2 x 2 window, here 4.
    n_b, n_c, h, w = x.shape
    planes, windows, n_e = n_b * n_c, oh * ow, kh * kw
    group = max(1, POOL_RUN // windows)                          # planes at a time
    run = -(-group * windows // 64) * 64     # (whole vectors: no tail of single selects)
    rows = np.zeros((n_e, run), x.dtype)
    best = np.empty(run, x.dtype)
    which = np.empty(run, np.int32)                      # the element taken, 0 .. n_e - 1
    first = np.empty(windows, np.int32)                  # each window's first element
    for oy in range(oh):
        for ox in range(ow):
            first[oy * ow + ox] = oy * sh * w + ox * sw
    step = np.empty(n_e, np.int32)                       # and each element from it
    for i in range(kh):
        for j in range(kw):
            step[i * kw + j] = i * dh * w + j * dw
    xs, outs = x.reshape(planes, h, w), out.reshape(planes, windows)
    for g0 in range(0, planes, group):
        g1 = min(planes, g0 + group)
        for g in range(g0, g1):
            plane = xs[g]
            for oy in range(oh):
                at = (g - g0) * windows + oy * ow
                for i in range(kh):
                    line = plane[oy * sh + i * dh]
                    for j in range(kw):
                        dst = rows[i * kw + j, at:at + ow]
                        src = line[j * dw:j * dw + (ow - 1) * sw + 1:sw]
                        for ox in range(ow):
                            dst[ox] = src[ox]
        for k in range(run):
            best[k] = rows[0, k]
            which[k] = 0
        for e in range(1, n_e):          # PyTorch's rule, as in _max_pool below
            row = rows[e]
            for k in range(run):
                v = row[k]
                take = (v > best[k]) | (v != v)
                best[k] = v if take else best[k]
                which[k] = e if take else which[k]
        for g in range(g0, g1):
            o, taken = outs[g], which[(g - g0) * windows:(g - g0 + 1) * windows]
            for p in range(windows):
                o[p] = first[p] + step[taken[p]]


@kernel
def _max_pool_2x2(x, out, oh, ow):
    # 2 x 2 windows of stride 2 inside the planes (the common pooling): a window's two
    # pairs compared, then their winners. The same index as PyTorch's rule in order a, b,
    # c, d (the first of ties; the last NaN: a later pair's NaN, or its winner's); the
    # loop over a row's windows has no inner loops, so its selects stay selects (1.8 ->
    # 0.8 ms for 64 x 32 planes of 28 x 28 on a core, against _max_pool_inside's rows).
    n_b, n_c, h, w = x.shape
    for b in range(n_b):
        for c in range(n_c):
            plane, o = x[b, c], out[b, c]
            for oy in range(oh):
                top, bottom = plane[2 * oy], plane[2 * oy + 1]
                row = o[oy * ow:(oy + 1) * ow]
                base = 2 * oy * w
                for ox in range(ow):
                    p0, p1 = top[2 * ox], top[2 * ox + 1]
                    q0, q1 = bottom[2 * ox], bottom[2 * ox + 1]
                    right_p = (p1 > p0) | (p1 != p1)
                    right_q = (q1 > q0) | (q1 != q1)
                    best_p = p1 if right_p else p0
                    best_q = q1 if right_q else q0
                    lower = (best_q > best_p) | (best_q != best_q)
                    right = right_q if lower else right_p
                    row[ox] = base + (w if lower else 0) + 2 * ox + (1 if right else 0)


@kernel
def _max_pool(x, out, kh, kw, dh, dw, ph, pw, sh, sw, oh, ow):
    # PyTorch's rule: the first in-bounds element, replaced by each larger one or NaN. The
    # choice is a select, not a branch: on real data which element wins is unpredictable.
    n_b, n_c, h, w = x.shape
    for b in range(n_b):
        for c in range(n_c):
            plane = x[b, c]
            for oy in range(oh):
                for ox in range(ow):
                    best = plane[0, 0]
                    at = -1
                    for i in range(kh):
                        y = oy * sh - ph + i * dh
                        if y < 0 or y >= h:
                            continue
                        for j in range(kw):
                            xx = ox * sw - pw + j * dw
                            if xx < 0 or xx >= w:
                                continue
                            v = plane[y, xx]
                            take = (at < 0) | (v > best) | (v != v)
                            best = v if take else best
                            at = y * w + xx if take else at
                    out[b, c, oy * ow + ox] = at


def unfold(x: np.ndarray, kernel, dilation, padding, stride, out_size,
           value: float) -> np.ndarray:
    (kh, kw), (oh, ow) = kernel, out_size
    out = np.empty((x.shape[0], x.shape[1] * kh * kw, oh * ow), x.dtype)
    if out.size:
        split.run(_unfold, (x, out), kh, kw, *dilation, *padding, *stride, oh, ow,
                  x.dtype.type(value), False)
    return out


def unfold_band(x: np.ndarray, kernel, dilation, padding, stride, out_size,
                out: np.ndarray) -> np.ndarray:
    """``unfold`` of x with zeros outside, laid out as (C * kh * kw, B, oh * ow) in ``out``
    (its first elements, C-contiguous): the images' columns side by side, so that one
    product takes the whole band. Returned as (C * kh * kw, B * oh * ow)."""
    (kh, kw), (oh, ow) = kernel, out_size
    cols = out[:x.shape[1] * kh * kw * x.shape[0] * oh * ow].reshape(
        x.shape[1] * kh * kw, x.shape[0], oh * ow)
    if cols.size:
        _unfold(x, cols, kh, kw, *dilation, *padding, *stride, oh, ow, x.dtype.type(0),
                True)
    return cols.reshape(cols.shape[0], -1)


def fold_band(cols: np.ndarray, out: np.ndarray, kernel, dilation, padding, stride,
              out_size) -> np.ndarray:
    """``fold`` of columns laid out as ``unfold_band``'s, (C * kh * kw, B, oh * ow), into
    the images ``out`` (B, C, H, W), which it overwrites; the same sums."""
    if out.size:
        _fold_band(cols, out, *kernel, *dilation, *padding, *stride, *out_size)
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
    if not out.size:
        return out
    inside = all(p == 0 and (o - 1) * s + (k - 1) * d < n for p, o, s, k, d, n in
                 zip(padding, out_size, stride, kernel, dilation, x.shape[2:]))
    if inside and tuple(kernel) == tuple(stride) == (2, 2) and tuple(dilation) == (1, 1):
        split.run(_max_pool_2x2, (x, out), *out_size, work=2 * x.size)
    elif inside:
        # (each input element is copied and compared once or more: worth the cores from
        # half SPLIT_MIN's elements)
        split.run(_max_pool_inside, (x, out), *kernel, *dilation, *stride, *out_size,
                  work=2 * x.size)
    else:
        split.run(_max_pool, (x, out), *kernel, *dilation, *padding, *stride, *out_size)
    return out
