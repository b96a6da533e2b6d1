"""Sliding windows over images: ``unfold`` (im2col) and ``fold`` (col2im), as PyTorch's
``F.unfold`` and ``F.fold``, and the window geometry the convolutions and poolings share.

Both are the ``unfold`` / ``fold`` kernel pair, each the other's gradient. A window's
geometry is four pairs (rows, columns): kernel size, dilation, padding, stride; the
padding of the kernels is the top and left one, the output size implies the rest (so
"same" padding may be larger on the bottom and right, as PyTorch's).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError, bad_shape, bad_type
from . import checks, device
from .low_precision import computes_in_float32
from .ops import _make, _tensor, reshape
from .residency import handle
from .tensor import Tensor


@dataclasses.dataclass(frozen=True)
class Windows:
    """Where the windows of an image of ``size`` lie: ``out`` windows along each axis."""
    size: tuple
    kernel: tuple
    dilation: tuple
    padding: tuple          # (top, left)
    stride: tuple
    out: tuple

    @property
    def args(self) -> tuple:
        """The geometry as the kernels take it."""
        return self.kernel, self.dilation, self.padding, self.stride, self.out


def pair(fn: str, name: str, value, minimum: int, n: int = 2) -> tuple:
    """An int or a sequence of ``n`` ints, each >= ``minimum``, as an n-tuple."""
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise bad_type(fn, name, value, f"an int or {n} ints")
        return tuple(checks.integer(fn, name, v, minimum) for v in value)
    return (checks.integer(fn, name, value, minimum),) * n


def out_length(size: int, kernel: int, dilation: int, low: int, high: int, stride: int,
               ceil_mode: bool = False) -> int:
    """How many windows fit along an axis of ``size`` padded by ``low`` and ``high``
    (``ceil_mode``: PyTorch's pooling rule, a last partial window that starts inside the
    input or its low padding counts too)."""
    span = size + low + high - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    n = -(-span // stride) + 1
    return n - 1 if (n - 1) * stride >= size + low else n


def windows(fn: str, size: tuple, kernel, dilation, padding, stride, high=None,
            ceil_mode: bool = False) -> Windows:
    """The geometry of ``fn``'s windows over an image of ``size`` (high: the bottom and
    right padding where it differs from ``padding``); a ShapeError where none fits."""
    high = padding if high is None else high
    out = tuple(out_length(*a, ceil_mode) for a in
                zip(size, kernel, dilation, padding, high, stride))
    if min(out) < 1:
        span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        raise ShapeError(
            f"{fn}: the input's spatial size {tuple(size)} (padded by {tuple(padding)}) is "
            f"smaller than the dilated kernel {span}; no window fits")
    return Windows(tuple(size), kernel, dilation, tuple(padding), stride, out)


def unfold_windows(x: Tensor, w: Windows, value: float = 0.0) -> Tensor:
    """The windows of x (B, C, H, W) as columns (B, C * kh * kw, oh * ow), ``value`` in the
    padding; the gradient is ``fold``'s."""
    backend = device.active()
    hy = backend.unfold(handle(backend, x), *w.args, value)

    def backward(g, needs):
        return (backend.fold(g, w.size, *w.args),)
    return _make(hy, (x,), backward, backend)


def fold_windows(cols: Tensor, w: Windows) -> Tensor:
    """The images (B, C, *w.size) whose pixels sum the column elements that read them;
    the gradient is ``unfold``'s."""
    backend = device.active()
    hy = backend.fold(handle(backend, cols), w.size, *w.args)

    def backward(g, needs):
        return (backend.unfold(g, *w.args, 0.0),)
    return _make(hy, (cols,), backward, backend)


def batched(fn: str, name: str, x: Tensor, spatial: int) -> tuple:
    """(x with a batch axis, whether one was added): x is (N, C, *spatial) or, without a
    batch, (C, *spatial)."""
    if x.ndim == spatial + 1:
        return reshape(x, (1,) + x.shape), True
    if x.ndim != spatial + 2:
        axes = {1: "L", 2: "H, W"}[spatial]
        raise bad_shape(fn, name, x.shape, f"(N, C, {axes}) or, without a batch, (C, {axes})")
    return x, False


@computes_in_float32
def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:  # noqa: A002
    """The sliding windows of ``input`` (N, C, H, W) or (C, H, W) as columns
    (N, C * kh * kw, L), as ``torch.nn.functional.unfold``: L windows, each a column of
    C * kh * kw values (channel-major), zeros in the padding."""
    x = _tensor("unfold", "input", input)
    x, unbatched = batched("unfold", "input", x, 2)
    k = pair("unfold", "kernel_size", kernel_size, 1)
    d = pair("unfold", "dilation", dilation, 1)
    p = pair("unfold", "padding", padding, 0)
    s = pair("unfold", "stride", stride, 1)
    cols = unfold_windows(x, windows("unfold", x.shape[2:], k, d, p, s))
    return reshape(cols, cols.shape[1:]) if unbatched else cols


@computes_in_float32
def fold(input, output_size, kernel_size, dilation=1, padding=0,  # noqa: A002
         stride=1) -> Tensor:
    """The inverse layout of ``unfold``, as ``torch.nn.functional.fold``: columns
    (N, C * kh * kw, L) or (C * kh * kw, L) summed into images (N, C, *output_size), each
    pixel the sum of the column elements that read it."""
    cols = _tensor("fold", "input", input)
    if cols.ndim == 2:
        cols, unbatched = reshape(cols, (1,) + cols.shape), True
    elif cols.ndim == 3:
        unbatched = False
    else:
        raise bad_shape("fold", "input", cols.shape, "(N, C * kh * kw, L) or (C * kh * kw, L)")
    size = pair("fold", "output_size", output_size, 1)
    k = pair("fold", "kernel_size", kernel_size, 1)
    d = pair("fold", "dilation", dilation, 1)
    p = pair("fold", "padding", padding, 0)
    s = pair("fold", "stride", stride, 1)
    w = windows("fold", size, k, d, p, s)
    kk = k[0] * k[1]
    if cols.shape[1] % kk or cols.shape[2] != int(np.prod(w.out)):
        raise bad_shape("fold", "input", cols.shape,
                        f"(N, C * {kk}, {int(np.prod(w.out))}): a multiple of the kernel's "
                        f"{kk} elements by the {w.out[0]} x {w.out[1]} windows")
    y = fold_windows(cols, w)
    return reshape(y, y.shape[1:]) if unbatched else y


__all__ = ["unfold", "fold"]
