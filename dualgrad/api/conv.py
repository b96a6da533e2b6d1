"""Convolutions: ``conv1d``, ``conv2d`` and ``conv_transpose2d``, with PyTorch's arguments
and layouts (NCHW images, weights (out, in / groups, kh, kw)).

A convolution of one group is the backend's ``conv2d``: the weight as a matrix times each
image's windows, read where they lie (on the gpu no unfolded copy of the images is made);
its weight gradient is ``conv2d_weight`` and its input gradient ``conv2d_input``. Grouped
convolutions are their windows as columns (``unfold``) times the weight, one batched
product per image and group. A transposed convolution is the adjoint: the weight's transpose times the input,
the columns summed back into the image (``fold``).
"""
from __future__ import annotations

from ..errors import InvalidValueError, bad_shape, bad_value
from . import checks, device
from .indexing import expand
from .low_precision import computes_in_float32
from .ops import (_grad_for, _kept, _low_result, _make, _product_operands, _wide, product,
                  reshape, transpose)
from .residency import handle
from .tensor import Tensor
from .windows import Windows, batched, fold_windows, pair, unfold_windows, windows


def _grouped_weight(w: Tensor, groups: int, batch: int) -> Tensor:
    """Weights (groups, rows, cols) repeated for each of ``batch`` images:
    (batch * groups, rows, cols), the batched product's a operand."""
    _, rows, cols = w.shape
    return reshape(expand(reshape(w, (1,) + w.shape), (batch, groups, rows, cols)),
                   (batch * groups, rows, cols))


def _grouped_product(w: Tensor, x: Tensor, groups: int, low) -> Tensor:
    """w (groups, r, k) @ x (N, groups * k, L) per image and group: (N, groups * r, L),
    made in ``low`` where given (see ops.product)."""
    n, _, length = x.shape
    g, rows, inner = w.shape
    if g == 1:
        return product(reshape(w, (rows, inner)), x, low)
    y = product(_grouped_weight(w, g, n), reshape(x, (n * g, inner, length)), low)
    return reshape(y, (n, g * rows, length))


def check_padding_name(fn: str, padding: str, stride: tuple) -> None:
    """Refuse a padding name other than "valid" and "same", and "same" with a stride."""
    if padding not in ("valid", "same"):
        raise bad_value(fn, "padding", padding, '"valid", "same", an int or ints')
    if padding == "same" and any(s != 1 for s in stride):
        raise InvalidValueError(f"{fn}: padding='same' needs stride 1 (got stride "
                                f"{tuple(stride)}), as in PyTorch")


def _conv_padding(fn: str, padding, kernel, dilation, stride, spatial: int) -> tuple:
    """(low, high) padding pairs: from ints, or "valid" (none) or "same" (the output as
    large as the input; the odd one on the high side, as PyTorch's)."""
    if isinstance(padding, str):
        check_padding_name(fn, padding, stride[2 - spatial:])
        if padding == "valid":
            return (0,) * 2, (0,) * 2
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        low = tuple(t // 2 for t in total)
        return low, tuple(t - lo for t, lo in zip(total, low))
    p = (0,) + pair(fn, "padding", padding, 0, spatial) if spatial == 1 else \
        pair(fn, "padding", padding, 0)
    return p, p


def _checked_conv(fn: str, input, weight, bias, groups: int, spatial: int,
                  transposed: bool) -> tuple:
    """(x batched, weight, bias, unbatched, groups, low) after the checks every convolution
    makes; ``low``, the 16-bit type its products are made in, or None (ops.product)."""
    (x, weight, bias), low = _product_operands(fn, (("input", input), ("weight", weight),
                                                    ("bias", bias)))
    x, unbatched = batched(fn, "input", x, spatial)
    groups = checks.integer(fn, "groups", groups, 1)
    c = x.shape[1]
    if weight.ndim != spatial + 2:
        raise bad_shape(fn, "weight", weight.shape, f"{spatial + 2} dimensions")
    if transposed:
        ok = weight.shape[0] == c
        out = weight.shape[1] * groups
        what = f"({c}, out_channels / {groups}, kernel...) for {c} input channels"
    else:
        ok = weight.shape[1] * groups == c and weight.shape[0] % groups == 0
        out = weight.shape[0]
        what = (f"(out_channels (a multiple of {groups}), {c} / {groups}, kernel...) for "
                f"{c} input channels")
    if not ok or c % groups:
        raise bad_shape(fn, "weight", weight.shape, what)
    if bias is not None and bias.shape != (out,):
        raise bad_shape(fn, "bias", bias.shape, f"({out},), one per output channel")
    return x, weight, bias, unbatched, groups, low


def _finish(y: Tensor, bias, unbatched: bool, shape: tuple) -> Tensor:
    y = reshape(y, shape)
    if bias is not None:
        y = y + reshape(bias, (1, bias.shape[0]) + (1,) * (len(shape) - 2))
    return reshape(y, shape[1:]) if unbatched else y


def _conv(fn, input, weight, bias, stride, padding, dilation, groups, spatial) -> Tensor:
    x, weight, bias, unbatched, groups, low = _checked_conv(fn, input, weight, bias, groups,
                                                            spatial, False)
    # 1-D: an image of one row
    lift = (lambda name, v, lo: (1,) + pair(fn, name, v, lo, 1)) if spatial == 1 else \
        (lambda name, v, lo: pair(fn, name, v, lo))
    s, d = lift("stride", stride, 1), lift("dilation", dilation, 1)
    kernel = tuple(weight.shape[2:]) if spatial == 2 else (1, weight.shape[2])
    before, after = _conv_padding(fn, padding, kernel, d, s, spatial)
    n, c = x.shape[:2]
    image = reshape(x, (n, c, 1, x.shape[2])) if spatial == 1 else x
    w = windows(fn, image.shape[2:], kernel, d, before, s, after)
    o = weight.shape[0]
    out = (n, o) + (w.out if spatial == 2 else w.out[1:])
    if groups == 1:
        y = _windows_product(image, reshape(weight, (o, c) + kernel), w, low)
    else:
        cols = unfold_windows(image, w)
        y = _grouped_product(reshape(weight, (groups, o // groups, -1)), cols, groups, low)
    return _low_result(_finish(y, bias, unbatched, out), low)


def _windows_product(x: Tensor, weight: Tensor, w: Windows, low) -> Tensor:
    """The convolution of images x (N, C, H, W) with weight (O, C, kh, kw) over windows
    ``w`` (one group): the backend's ``conv2d``, and its gradients; made in ``low`` where
    given, not rounded (see ops.product)."""
    backend = device.active()
    hx, hw = handle(backend, x), handle(backend, weight)
    hy = backend.conv2d(_wide(backend, hx), _wide(backend, hw), w.dilation, w.padding,
                        w.stride, w.out, low)
    hx, hw = _kept(backend, x, hx, low), _kept(backend, weight, hw, low)
    x_type, w_type = x.dtype, weight.dtype     # (not the tensors: see ops._grad_for)

    def backward(g, needs):
        gx = gw = None
        if needs[0]:
            gx = _grad_for(backend, backend.conv2d_input(g, _wide(backend, hw), w.size,
                                                         w.dilation, w.padding, w.stride,
                                                         low), x_type)
        if needs[1]:
            gw = _grad_for(backend, backend.conv2d_weight(_wide(backend, hx), g, w.kernel,
                                                          w.dilation, w.padding, w.stride,
                                                          low), w_type)
        return gx, gw
    return _make(hy, (x, weight), backward, backend)


@computes_in_float32
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1,  # noqa: A002
           groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation) of ``input`` (N, C, L) or (C, L) with ``weight``
    (out, C / groups, k), as ``torch.nn.functional.conv1d``; ``padding`` an int, "valid" or
    "same"."""
    return _conv("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)


@computes_in_float32
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1,  # noqa: A002
           groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) or (C, H, W) with
    ``weight`` (out, C / groups, kh, kw), as ``torch.nn.functional.conv2d``: stride,
    padding (ints, "valid" or "same"), dilation, groups (depthwise: groups = C)."""
    return _conv("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


@computes_in_float32
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transposed 2-D convolution (the gradient of ``conv2d`` with respect to its
    input) of ``input`` (N, C, H, W) or (C, H, W) with ``weight`` (C, out / groups, kh, kw),
    as ``torch.nn.functional.conv_transpose2d``; the output is
    (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1 high."""
    fn = "conv_transpose2d"
    x, weight, bias, unbatched, groups, low = _checked_conv(fn, input, weight, bias, groups,
                                                            2, True)
    s, p = pair(fn, "stride", stride, 1), pair(fn, "padding", padding, 0)
    d, extra = pair(fn, "dilation", dilation, 1), pair(fn, "output_padding", output_padding, 0)
    for e, si, di in zip(extra, s, d):
        if e >= si and e >= di:
            raise bad_value(fn, "output_padding", output_padding,
                            f"values smaller than the stride {s} or the dilation {d}")
    n, c, h, wd = x.shape
    kernel = tuple(weight.shape[2:])
    size = tuple((i - 1) * si - 2 * pi + di * (k - 1) + e + 1
                 for i, si, pi, di, k, e in zip((h, wd), s, p, d, kernel, extra))
    if min(size) < 1:
        raise bad_shape(fn, "input", x.shape, f"an output size of at least 1 (got {size})")
    # the windows of a convolution of the output that gives x: one per input pixel
    w = Windows(size, kernel, d, p, s, (h, wd))
    o_g = weight.shape[1]
    # w as (groups, (out/g) * kh * kw, C/g): each group's transpose
    wt = transpose(reshape(weight, (groups, c // groups, o_g * kernel[0] * kernel[1])),
                   (0, 2, 1))
    cols = _grouped_product(wt, reshape(x, (n, c, h * wd)), groups, low)
    y = fold_windows(cols, w)
    return _low_result(_finish(y, bias, unbatched, (n, o_g * groups) + size), low)


__all__ = ["conv1d", "conv2d", "conv_transpose2d"]
