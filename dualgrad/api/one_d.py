"""The 1-D forms of the image ops, as PyTorch's: ``max_pool1d``, ``avg_pool1d``,
``adaptive_avg_pool1d`` and ``conv_transpose1d``. Each reads its input (N, C, L) or (C, L)
as an image one row high and runs the 2-D op with a window of one row (its arguments
checked here first, so errors name the function called)."""
from __future__ import annotations

from ..errors import bad_shape, bad_value
from . import checks, conv, pooling
from .ops import _tensor, reshape
from .tensor import Tensor
from .windows import pair


def _rows(fn: str, input, low_precision: bool = True) -> Tensor:  # noqa: A002
    x = _tensor(fn, "input", input, low_precision=low_precision)
    if x.ndim not in (2, 3):
        raise bad_shape(fn, "input", x.shape, "(N, C, L) or (C, L)")
    return reshape(x, x.shape[:-1] + (1, x.shape[-1]))


def _back(y: Tensor) -> Tensor:
    return reshape(y, y.shape[:-2] + (y.shape[-1],))


def _one(fn: str, name: str, value, minimum: int) -> int:
    return pair(fn, name, value, minimum, 1)[0]


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False):
    """The largest element of each window of ``input`` along L, as
    ``torch.nn.functional.max_pool1d`` (``stride`` defaults to the kernel size); with
    ``return_indices`` also each maximum's position along L."""
    fn = "max_pool1d"
    k = _one(fn, "kernel_size", kernel_size, 1)
    s = k if stride is None or stride == () or stride == [] else _one(fn, "stride", stride, 1)
    p, d = _one(fn, "padding", padding, 0), _one(fn, "dilation", dilation, 1)
    if p > k // 2:
        raise bad_value(fn, "padding", padding, f"at most half the kernel size ({k // 2})")
    out = pooling.max_pool2d(_rows(fn, input), (1, k), (1, s), (0, p), (1, d),
                             checks.flag(fn, "ceil_mode", ceil_mode),
                             checks.flag(fn, "return_indices", return_indices))
    if return_indices:
        return _back(out[0]), _back(out[1])      # (one row: its flat index is along L)
    return _back(out)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True) -> Tensor:
    """The mean of each window of ``input`` along L, as ``torch.nn.functional.avg_pool1d``."""
    fn = "avg_pool1d"
    k = _one(fn, "kernel_size", kernel_size, 1)
    s = k if stride is None or stride == () or stride == [] else _one(fn, "stride", stride, 1)
    p = _one(fn, "padding", padding, 0)
    if p > k // 2:
        raise bad_value(fn, "padding", padding, f"at most half the kernel size ({k // 2})")
    return _back(pooling.avg_pool2d(_rows(fn, input), (1, k), (1, s), (0, p),
                                    checks.flag(fn, "ceil_mode", ceil_mode),
                                    checks.flag(fn, "count_include_pad", count_include_pad)))


def adaptive_avg_pool1d(input, output_size) -> Tensor:  # noqa: A002
    """``input`` averaged into ``output_size`` windows along L, as
    ``torch.nn.functional.adaptive_avg_pool1d``."""
    fn = "adaptive_avg_pool1d"
    size = _one(fn, "output_size", output_size, 1)
    return _back(pooling.adaptive_avg_pool2d(_rows(fn, input), (1, size)))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transposed 1-D convolution of ``input`` (N, C, L) or (C, L) with ``weight``
    (C, out / groups, k), as ``torch.nn.functional.conv_transpose1d``."""
    fn = "conv_transpose1d"
    w = _tensor(fn, "weight", weight, low_precision=True)
    if w.ndim != 3:
        raise bad_shape(fn, "weight", w.shape, "(C, out / groups, k)")
    s, p = _one(fn, "stride", stride, 1), _one(fn, "padding", padding, 0)
    e, d = _one(fn, "output_padding", output_padding, 0), _one(fn, "dilation", dilation, 1)
    y = conv.conv_transpose2d(_rows(fn, input), reshape(w, w.shape[:2] + (1, w.shape[2])),
                              bias, (1, s), (0, p), (0, e), groups, (1, d))
    return _back(y)


__all__ = ["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "conv_transpose1d"]
