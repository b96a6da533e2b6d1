"""Resizing images and sequences, as PyTorch's: ``interpolate`` (nearest, linear,
bilinear), ``pixel_shuffle`` and ``pixel_unshuffle``.

All are made of other ops, each resized axis in turn, the last first (PyTorch's order of
operations: a bilinear output is h0 (w0 x00 + w1 x01) + h1 (w0 x10 + w1 x11)). Whole
factors need no gather: nearest repeats each element (a broadcast and a reshape) or takes
every k-th (a slice); linear weighs two slices of the input, its ends repeated, per phase
of the factor, and interleaves the phases (a stack and a reshape). Other sizes take each
axis's source positions with ``index_select``. Positions and weights are PyTorch's
(``area_pixel_compute_source_index``), in float32 as its kernels compute them (a phase's
weights rounded once from the exact ones: the same where the factor is a power of two).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidValueError, bad_shape
from . import checks
from .indexing import expand, index_select, pad, stack
from .ops import _tensor, add, mul, reshape, transpose
from .tensor import Tensor, ag_tensor

_MODES = {"nearest": 0, "linear": 1, "bilinear": 2}      # mode: its spatial axes (0: any)
MODES = tuple(_MODES)


def _sizes(fn: str, x: Tensor, spatial: int, size, scale_factor) -> tuple:
    """(output sizes, scale factors or None) for the ``spatial`` trailing axes."""
    if (size is None) == (scale_factor is None):
        raise InvalidValueError(f"{fn}: give exactly one of 'size' and 'scale_factor'")
    if size is not None:
        sizes = tuple(size) if isinstance(size, (tuple, list)) else (size,) * spatial
        if len(sizes) != spatial:
            raise InvalidValueError(f"{fn}: argument 'size' has {len(sizes)} entries; the "
                                    f"input (shape {x.shape}) has {spatial} spatial axes")
        return tuple(checks.integer(fn, "size", n, 1) for n in sizes), None
    factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
        (scale_factor,) * spatial
    if len(factors) != spatial:
        raise InvalidValueError(f"{fn}: argument 'scale_factor' has {len(factors)} entries; "
                                f"the input (shape {x.shape}) has {spatial} spatial axes")
    factors = tuple(checks.number(fn, "scale_factor", f, 0.0, lo_open=True) for f in factors)
    sizes = tuple(math.floor(n * f) for n, f in zip(x.shape[-spatial:], factors))
    if min(sizes) < 1:
        raise InvalidValueError(f"{fn}: scale_factor {scale_factor} leaves an empty output "
                                f"for the input's spatial shape {x.shape[-spatial:]}")
    return sizes, factors


def _scale(n_in: int, n_out: int, factor, align_corners: bool) -> np.float32:
    """PyTorch's area_pixel_compute_scale."""
    if align_corners:
        return np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.float32(0)
    return np.float32(1.0 / factor) if factor is not None else np.float32(n_in / n_out)


def _nearest(x: Tensor, axis: int, n_out: int, factor) -> Tensor:
    n_in = x.shape[axis]
    if n_out % n_in == 0 and (factor is None or factor == n_out // n_in):
        r = n_out // n_in                  # each element repeated r times: no gather
        wide = reshape(x, x.shape[:axis + 1] + (1,) + x.shape[axis + 1:])
        wide = expand(wide, x.shape[:axis + 1] + (r,) + x.shape[axis + 1:])
        return reshape(wide, x.shape[:axis] + (n_out,) + x.shape[axis + 1:])
    if n_in % n_out == 0 and (factor is None or n_in // n_out * factor == 1):
        return _take(x, axis, 0, n_in, n_in // n_out)     # every (n_in / n_out)-th: a slice
    scale = _scale(n_in, n_out, factor, False)
    src = np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64)
    return index_select(x, axis, np.minimum(src, n_in - 1))


def _take(x: Tensor, axis: int, start: int, stop: int, step: int = 1) -> Tensor:
    return x[(slice(None),) * axis + (slice(start, stop, step),)]


def _linear_phases(x: Tensor, axis: int, r: int) -> Tensor:
    """Linear resizing by a whole factor r (align_corners False) without gathers: output
    r i + s weighs the same two neighbours, shifted by s's offset, with s's weights, so
    each phase s is two slices of the input (its ends repeated, as PyTorch clamps them)
    and the phases interleave by a stack and a reshape."""
    n = x.shape[axis]
    padded = pad(x, (0, 0) * (x.ndim - axis - 1) + (1, 1), mode="replicate")
    phases = []
    for s in range(r):
        src = np.float32((s + 0.5) / r - 0.5)
        shift = int(np.floor(src))
        w1 = np.float32(src - shift)
        w0 = np.float32(1) - w1
        lo = _take(padded, axis, 1 + shift, 1 + shift + n)
        hi = _take(padded, axis, 2 + shift, 2 + shift + n)
        phases.append(add(mul(lo, float(w0)), mul(hi, float(w1))))
    woven = stack(phases, axis + 1)
    return reshape(woven, x.shape[:axis] + (n * r,) + x.shape[axis + 1:])


def _linear(x: Tensor, axis: int, n_out: int, factor, align_corners: bool) -> Tensor:
    n_in = x.shape[axis]
    if not align_corners and n_out % n_in == 0 and n_in > 1 and \
            (factor is None or factor == n_out // n_in):
        return _linear_phases(x, axis, n_out // n_in)
    scale = _scale(n_in, n_out, factor, align_corners)
    dst = np.arange(n_out, dtype=np.float32)
    if align_corners:
        src = dst * scale
    else:
        src = np.maximum((dst + np.float32(0.5)) * scale - np.float32(0.5), np.float32(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    i1 = i0 + (i0 < n_in - 1)
    w1 = (src - i0.astype(np.float32)).astype(np.float32)
    w0 = (np.float32(1) - w1).astype(np.float32)
    shape = (n_out,) + (1,) * (x.ndim - axis - 1)
    lo = mul(index_select(x, axis, i0), ag_tensor(w0.reshape(shape), dtype=x.dtype))
    hi = mul(index_select(x, axis, i1), ag_tensor(w1.reshape(shape), dtype=x.dtype))
    return add(lo, hi)


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias: bool = False):
    """``input`` (N, C, L) or (N, C, H, W) resized to ``size`` or by ``scale_factor``, as
    ``torch.nn.functional.interpolate``: ``mode`` "nearest" (source index floor(i *
    scale)), "linear" (3-D) or "bilinear" (4-D; ``align_corners`` as PyTorch's, False by
    default). Gradients flow back to ``input``."""
    fn = "interpolate"
    x = _tensor(fn, "input", input, low_precision=True)
    if mode not in _MODES:
        raise InvalidValueError(f"{fn}: argument 'mode' is {mode!r}; expected one of "
                                f"{tuple(_MODES)}")
    if x.ndim not in (3, 4):
        raise bad_shape(fn, "input", x.shape, "(N, C, L) or (N, C, H, W)")
    spatial = x.ndim - 2
    if _MODES[mode] and _MODES[mode] != spatial:
        raise bad_shape(fn, "input", x.shape, f"{_MODES[mode] + 2} dimensions for mode "
                        f"{mode!r}")
    if mode == "nearest" and align_corners is not None:
        raise InvalidValueError(f"{fn}: argument 'align_corners' is {align_corners!r}; "
                                "only the linear modes take it (leave it None)")
    corners = False if align_corners is None else checks.flag(fn, "align_corners",
                                                               align_corners)
    if recompute_scale_factor is not None:
        checks.flag(fn, "recompute_scale_factor", recompute_scale_factor)
    if checks.flag(fn, "antialias", antialias):
        raise InvalidValueError(f"{fn}: argument 'antialias' is True; not supported")
    sizes, factors = _sizes(fn, x, spatial, size, scale_factor)
    if recompute_scale_factor:          # (PyTorch: the scale from the sizes, not the factor)
        factors = None
    y = x
    for k in reversed(range(spatial)):  # the last axis first: PyTorch's order of operations
        axis, factor = 2 + k, None if factors is None else factors[k]
        if sizes[k] == y.shape[axis] and (factor is None or factor == 1):
            continue
        y = _nearest(y, axis, sizes[k], factor) if mode == "nearest" else \
            _linear(y, axis, sizes[k], factor, corners)
    return y


def _factor(fn: str, name: str, value) -> int:
    return checks.integer(fn, name, value, 1)


def pixel_shuffle(input, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C r^2, H, W) -> (*, C, H r, W r), as ``torch.nn.functional.pixel_shuffle``."""
    fn = "pixel_shuffle"
    x = _tensor(fn, "input", input, any_dtype=True, low_precision=True)
    r = _factor(fn, "upscale_factor", upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise bad_shape(fn, "input", x.shape, f"(*, C, H, W) with C divisible by {r * r}")
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    b = math.prod(lead)
    y = reshape(x, (b, c // (r * r), r, r, h, w))
    y = transpose(y, (0, 1, 4, 2, 5, 3))
    return reshape(y, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H r, W r) -> (*, C r^2, H, W), as ``torch.nn.functional.pixel_unshuffle``."""
    fn = "pixel_unshuffle"
    x = _tensor(fn, "input", input, any_dtype=True, low_precision=True)
    r = _factor(fn, "downscale_factor", downscale_factor)
    if x.ndim < 3 or x.shape[-2] % r or x.shape[-1] % r:
        raise bad_shape(fn, "input", x.shape, f"(*, C, H, W) with H and W divisible by {r}")
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    b = math.prod(lead)
    y = reshape(x, (b, c, h // r, r, w // r, r))
    y = transpose(y, (0, 1, 3, 5, 2, 4))
    return reshape(y, lead + (c * r * r, h // r, w // r))


__all__ = ["interpolate", "pixel_shuffle", "pixel_unshuffle"]
