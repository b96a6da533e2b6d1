"""Pooling over images: ``max_pool2d``, ``avg_pool2d`` and ``adaptive_avg_pool2d``, with
PyTorch's arguments and results.

The maximum of each window is found by the ``max_pool`` kernel pair and gathered (its
gradient goes there alone, as PyTorch's); the mean sums the columns of the windows
(``unfold``). The adaptive average, whose windows vary in size, is two products with 0/1
window matrices. Everything they need beside the input is made on the device (no host
array uploaded), so a recorded step keeps it.
"""
from __future__ import annotations

from ..errors import bad_value
from . import checks, device
from .logic import _constant_range
from .low_precision import computes_in_float32
from .ops import _filled, _tensor, gather_rows, matmul, reshape, sum as sum_
from .residency import adopt, handle
from .tensor import INT32, Tensor
from .windows import Windows, batched, pair, unfold_windows, windows

def _int(backend, value: int):
    return _filled(backend, (1, 1), value, INT32)


def _pool_geometry(fn: str, x: Tensor, kernel_size, stride, padding, dilation,
                   ceil_mode) -> Windows:
    k = pair(fn, "kernel_size", kernel_size, 1)
    # (no stride, or an empty one as PyTorch's functional default: the kernel's size)
    s = k if stride is None or stride == () or stride == [] else pair(fn, "stride", stride, 1)
    p = pair(fn, "padding", padding, 0)
    d = pair(fn, "dilation", dilation, 1)
    checks.flag(fn, "ceil_mode", ceil_mode)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise bad_value(fn, "padding", padding,
                        f"at most half the kernel size {k} along each axis, as in PyTorch")
    return windows(fn, x.shape[2:], k, d, p, s, ceil_mode=ceil_mode)


@computes_in_float32
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False):
    """The largest element of each window of ``input`` (N, C, H, W) or (C, H, W), as
    ``torch.nn.functional.max_pool2d`` (``stride`` defaults to the kernel size; padding
    is -inf). A NaN counts as the largest (the last NaN of a window, as PyTorch's).
    ``return_indices``: also the int32 flat index (y * W + x) of each maximum within its
    image. The gradient goes to the first maximum of each window."""
    fn = "max_pool2d"
    x = _tensor(fn, "input", input)
    checks.flag(fn, "return_indices", return_indices)
    x, unbatched = batched(fn, "input", x, 2)
    w = _pool_geometry(fn, x, kernel_size, stride, padding, dilation, ceil_mode)
    n, c, h, wd = x.shape
    backend = device.active()
    where = backend.max_pool(handle(backend, x), *w.args)
    rows = backend.reshape(where, (n * c, w.out[0] * w.out[1]))
    shape = (n, c) + w.out
    # the maxima gathered from the image's rows (a window without an in-bounds element,
    # only possible with dilation, gives 0); the gradient goes back to where each came from
    y = reshape(gather_rows(reshape(x, (n * c, h * wd)), rows, skip=-1), shape)
    y = reshape(y, shape[1:]) if unbatched else y
    if not return_indices:
        return y
    indices = adopt(backend, Tensor(shape, INT32), backend.reshape(where, shape))
    return y, reshape(indices, shape[1:]) if unbatched else indices


def _window_counts(backend, x: Tensor, w: Windows, count_include_pad: bool):
    """How many elements each window averages over (1, 1, oh * ow): those inside the
    input, or (``count_include_pad``) inside the input and its padding."""
    if count_include_pad:
        size = tuple(n + 2 * p for n, p in zip(w.size, w.padding))
        ones = Windows(size, w.kernel, w.dilation, (0, 0), w.stride, w.out)
    else:
        size, ones = w.size, w
    image = _filled(backend, (1, 1) + size, 1.0, x.dtype)
    cols = backend.unfold(image, *ones.args, 0.0)
    return backend.reduce("sum", cols, (1,), keepdims=True)


@computes_in_float32
def avg_pool2d(input, kernel_size, stride=None, padding=0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override=None) -> Tensor:
    """The mean of each window of ``input`` (N, C, H, W) or (C, H, W), as
    ``torch.nn.functional.avg_pool2d``: padding counts in the divisor unless
    ``count_include_pad=False``; ``divisor_override`` divides every sum instead."""
    fn = "avg_pool2d"
    x = _tensor(fn, "input", input)
    checks.flag(fn, "count_include_pad", count_include_pad)
    if divisor_override is not None:
        divisor_override = checks.integer(fn, "divisor_override", divisor_override, 1)
    x, unbatched = batched(fn, "input", x, 2)
    w = _pool_geometry(fn, x, kernel_size, stride, padding, 1, ceil_mode)
    n, c = x.shape[:2]
    kk, length = w.kernel[0] * w.kernel[1], w.out[0] * w.out[1]
    sums = sum_(reshape(unfold_windows(x, w), (n * c, kk, length)), 1, keepdims=True)
    fits = all((o - 1) * s + k <= size + 2 * p for o, s, k, size, p in
               zip(w.out, w.stride, w.kernel, w.size, w.padding))
    if divisor_override is not None or (count_include_pad and fits):
        y = sums / float(divisor_override or kk)
    else:
        backend = device.active()
        counts = _window_counts(backend, x, w, count_include_pad)
        y = sums / adopt(backend, Tensor(tuple(counts.shape), x.dtype), counts)
    y = reshape(y, (n, c) + w.out)
    return reshape(y, y.shape[1:]) if unbatched else y


def _window_matrix(backend, size: int, out: int, dtype):
    """(out, size) 0/1 storage, row o marking PyTorch's adaptive window o (from
    floor(o * size / out) to ceil((o + 1) * size / out)), and its row counts (out, 1)."""
    o = backend.integer("int_mul", backend.reshape(_constant_range(backend, out), (out, 1)),
                        _int(backend, size))
    start = backend.integer("int_floor_divide", o, _int(backend, out))
    end = backend.integer("int_floor_divide",
                          backend.integer("int_add", o, _int(backend, size + out - 1)),
                          _int(backend, out))
    at = backend.reshape(_constant_range(backend, size), (1, size))
    inside = backend.logic("logical_and", backend.logic("ge", at, start),
                           backend.logic("lt", at, end))
    counts = backend.cast(backend.integer("int_sub", end, start), dtype)
    return backend.cast(inside, dtype), counts


@computes_in_float32
def adaptive_avg_pool2d(input, output_size) -> Tensor:  # noqa: A002
    """Averages over ``output_size`` (an int, or a pair whose None keeps that axis)
    windows along each axis of ``input`` (N, C, H, W) or (C, H, W), as
    ``torch.nn.functional.adaptive_avg_pool2d``: window o of an axis of n spans
    floor(o * n / out) to ceil((o + 1) * n / out)."""
    fn = "adaptive_avg_pool2d"
    x = _tensor(fn, "input", input)
    x, unbatched = batched(fn, "input", x, 2)
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(sizes) != 2:
        raise bad_value(fn, "output_size", output_size, "an int or 2 ints (or None)")
    out = tuple(n if o is None else checks.integer(fn, "output_size", o, 1)
                for o, n in zip(sizes, x.shape[2:]))
    n, c, h, wd = x.shape
    if h % out[0] == 0 and wd % out[1] == 0:      # equal windows: a plain average pool
        k = (h // out[0], wd // out[1])
        y = avg_pool2d(x, k, k)
    else:
        backend = device.active()
        rows, row_counts = _window_matrix(backend, h, out[0], x.dtype)
        cols, col_counts = _window_matrix(backend, wd, out[1], x.dtype)
        as_tensor = (lambda s: adopt(backend, Tensor(tuple(s.shape), x.dtype), s))
        summed = matmul(matmul(as_tensor(rows), reshape(x, (n * c, h, wd))),
                        as_tensor(backend.permute(cols, (1, 0))))
        area = backend.binary("mul", row_counts, backend.reshape(col_counts, (1, out[1])))
        y = reshape(summed / as_tensor(area), (n, c) + out)
    return reshape(y, y.shape[1:]) if unbatched else y


__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"]
