"""Layers over images and sequences: ``Conv1d``, ``Conv2d``, ``ConvTranspose2d``,
``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``, ``Upsample``, ``PixelShuffle``,
``PixelUnshuffle``, with PyTorch's arguments, parameter
shapes and initialisation (weights and biases from U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
drawn from dualgrad's generator)."""
from __future__ import annotations

import math

from ..errors import bad_value
from . import checks, conv, one_d, pooling, resampling
from .indexing import pad
from .nn import Module, _uniform
from .tensor import ag_param
from .windows import pair

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")   # (pad()'s modes)


class _ConvNd(Module):
    """What the convolution layers share: channels, geometry, parameters."""

    spatial = 2
    transposed = False

    def __init__(self, fn, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode="zeros", output_padding=0):
        super().__init__()
        n = self.spatial
        self.in_channels = checks.integer(fn, "in_channels", in_channels, 1)
        self.out_channels = checks.integer(fn, "out_channels", out_channels, 1)
        self.groups = checks.integer(fn, "groups", groups, 1)
        for name, c in (("in_channels", self.in_channels), ("out_channels", self.out_channels)):
            if c % self.groups:
                raise bad_value(fn, name, c, f"a multiple of groups ({self.groups})")
        self.kernel_size = pair(fn, "kernel_size", kernel_size, 1, n)
        self.stride = pair(fn, "stride", stride, 1, n)
        self.dilation = pair(fn, "dilation", dilation, 1, n)
        self.padding = padding if isinstance(padding, str) else pair(fn, "padding", padding,
                                                                      0, n)
        if isinstance(padding, str):
            conv.check_padding_name(fn, padding, self.stride)
        if padding_mode not in _PADDING_MODES:
            raise bad_value(fn, "padding_mode", padding_mode,
                            " or ".join(repr(m) for m in _PADDING_MODES))
        self.padding_mode = padding_mode
        self.output_padding = pair(fn, "output_padding", output_padding, 0, n)
        checks.flag(fn, "bias", bias)
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups)
            fan_in = self.out_channels // self.groups
        else:
            shape = (self.out_channels, self.in_channels // self.groups)
            fan_in = self.in_channels // self.groups
        fan_in *= math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = ag_param(_uniform(bound, shape + self.kernel_size))
        self.bias = ag_param(_uniform(bound, (self.out_channels,))) if bias else None

    def forward(self, x):
        x, padding = self._padded(x)
        convolve = conv.conv1d if self.spatial == 1 else conv.conv2d
        return convolve(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)

    def _padded(self, x):
        """(x, the padding left to the convolution): x itself and the layer's padding, or
        x padded by ``padding_mode`` and none."""
        if self.padding_mode == "zeros" or self.padding == "valid":
            return x, self.padding
        if self.padding == "same":            # (the convolution's split: odd one high)
            total = [d * (k - 1) for k, d in zip(self.kernel_size, self.dilation)]
            low = [t // 2 for t in total]
            high = [t - lo for t, lo in zip(total, low)]
        else:
            low = high = self.padding
        widths = tuple(w for lo, hi in zip(low[::-1], high[::-1]) for w in (lo, hi))
        return (pad(x, widths, mode=self.padding_mode) if any(widths) else x), 0

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * self.spatial:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self.spatial:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode!r}"
        return text


class Conv1d(_ConvNd):
    """``conv1d`` of (N, in_channels, L) inputs; weight (out, in / groups, k)."""

    spatial = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
        super().__init__("Conv1d", in_channels, out_channels, kernel_size, stride, padding,
                         dilation, groups, bias, padding_mode)


class Conv2d(_ConvNd):
    """``conv2d`` of (N, in_channels, H, W) inputs; weight (out, in / groups, kh, kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
        super().__init__("Conv2d", in_channels, out_channels, kernel_size, stride, padding,
                         dilation, groups, bias, padding_mode)


class _ConvTransposeNd(_ConvNd):
    """What the transposed convolution layers share: weight (in, out / groups, *kernel)."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1):
        fn = type(self).__name__
        if isinstance(padding, str):
            raise bad_value(fn, "padding", padding, f"an int or {self.spatial} ints")
        super().__init__(fn, in_channels, out_channels, kernel_size, stride, padding,
                         dilation, groups, bias, output_padding=output_padding)

    def forward(self, x):
        convolve = one_d.conv_transpose1d if self.spatial == 1 else conv.conv_transpose2d
        return convolve(x, self.weight, self.bias, self.stride, self.padding,
                        self.output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """``conv_transpose1d`` of (N, in_channels, L) inputs; weight (in, out / groups, k)."""

    spatial = 1


class ConvTranspose2d(_ConvTransposeNd):
    """``conv_transpose2d`` of (N, in_channels, H, W) inputs; weight
    (in, out / groups, kh, kw)."""


class MaxPool1d(Module):
    """``max_pool1d`` with these settings (``stride`` defaults to the kernel size)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        fn = "MaxPool1d"
        self.kernel_size = pair(fn, "kernel_size", kernel_size, 1, 1)[0]
        self.stride = self.kernel_size if stride is None else pair(fn, "stride", stride, 1, 1)[0]
        self.padding = pair(fn, "padding", padding, 0, 1)[0]
        self.dilation = pair(fn, "dilation", dilation, 1, 1)[0]
        self.return_indices = checks.flag(fn, "return_indices", return_indices)
        self.ceil_mode = checks.flag(fn, "ceil_mode", ceil_mode)

    def forward(self, x):
        return one_d.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                                self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    """``avg_pool1d`` with these settings (``stride`` defaults to the kernel size)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        fn = "AvgPool1d"
        self.kernel_size = pair(fn, "kernel_size", kernel_size, 1, 1)[0]
        self.stride = self.kernel_size if stride is None else pair(fn, "stride", stride, 1, 1)[0]
        self.padding = pair(fn, "padding", padding, 0, 1)[0]
        self.ceil_mode = checks.flag(fn, "ceil_mode", ceil_mode)
        self.count_include_pad = checks.flag(fn, "count_include_pad", count_include_pad)

    def forward(self, x):
        return one_d.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """``adaptive_avg_pool1d`` to ``output_size``."""

    def __init__(self, output_size: int):
        super().__init__()
        self.output_size = pair("AdaptiveAvgPool1d", "output_size", output_size, 1, 1)[0]

    def forward(self, x):
        return one_d.adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _PadNd(Module):
    """``pad(x, padding, mode, value)`` over the last ``spatial`` axes: ``padding`` an int
    (every side) or (left, right[, top, bottom]), as PyTorch's padding layers."""

    spatial, mode = 2, "constant"

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        fn = type(self).__name__
        self.padding = pair(fn, "padding", padding, 0, 2 * self.spatial)
        self.value = checks.number(fn, "value", value) if self.mode == "constant" else 0.0

    def forward(self, x):
        return pad(x, self.padding, mode=self.mode, value=self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}" + (f", value={self.value}" if self.value else "")


def _pad_layer(name: str, spatial: int, mode: str, doc: str) -> type:
    return type(name, (_PadNd,), {"spatial": spatial, "mode": mode, "__doc__": doc,
                                  "__module__": __name__})


ZeroPad1d = _pad_layer("ZeroPad1d", 1, "constant", "Zeros padded at both ends of L.")
ZeroPad2d = _pad_layer("ZeroPad2d", 2, "constant", "Zeros padded around H and W.")


class ConstantPad1d(_PadNd):
    """``value`` padded at both ends of L."""
    spatial = 1

    def __init__(self, padding, value: float):
        super().__init__(padding, value)


class ConstantPad2d(_PadNd):
    """``value`` padded around H and W."""

    def __init__(self, padding, value: float):
        super().__init__(padding, value)


ReflectionPad1d = _pad_layer("ReflectionPad1d", 1, "reflect",
                             "L padded by its mirror image about the edge elements.")
ReflectionPad2d = _pad_layer("ReflectionPad2d", 2, "reflect",
                             "H and W padded by their mirror images about the edges.")
ReplicationPad1d = _pad_layer("ReplicationPad1d", 1, "replicate",
                              "L padded by copies of its edge elements.")
ReplicationPad2d = _pad_layer("ReplicationPad2d", 2, "replicate",
                              "H and W padded by copies of their edge elements.")
CircularPad1d = _pad_layer("CircularPad1d", 1, "circular", "L padded by wrapping around.")
CircularPad2d = _pad_layer("CircularPad2d", 2, "circular",
                           "H and W padded by wrapping around.")


class MaxPool2d(Module):
    """``max_pool2d`` with these settings (``stride`` defaults to the kernel size)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = pair("MaxPool2d", "kernel_size", kernel_size, 1)
        self.stride = self.kernel_size if stride is None else \
            pair("MaxPool2d", "stride", stride, 1)
        self.padding = pair("MaxPool2d", "padding", padding, 0)
        self.dilation = pair("MaxPool2d", "dilation", dilation, 1)
        self.return_indices = checks.flag("MaxPool2d", "return_indices", return_indices)
        self.ceil_mode = checks.flag("MaxPool2d", "ceil_mode", ceil_mode)

    def forward(self, x):
        return pooling.max_pool2d(x, self.kernel_size, self.stride, self.padding,
                                  self.dilation, self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """``avg_pool2d`` with these settings (``stride`` defaults to the kernel size)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = pair("AvgPool2d", "kernel_size", kernel_size, 1)
        self.stride = self.kernel_size if stride is None else \
            pair("AvgPool2d", "stride", stride, 1)
        self.padding = pair("AvgPool2d", "padding", padding, 0)
        self.ceil_mode = checks.flag("AvgPool2d", "ceil_mode", ceil_mode)
        self.count_include_pad = checks.flag("AvgPool2d", "count_include_pad",
                                             count_include_pad)
        self.divisor_override = None if divisor_override is None else \
            checks.integer("AvgPool2d", "divisor_override", divisor_override, 1)

    def forward(self, x):
        return pooling.avg_pool2d(x, self.kernel_size, self.stride, self.padding,
                                  self.ceil_mode, self.count_include_pad,
                                  self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """``adaptive_avg_pool2d`` to ``output_size`` (an int, or a pair whose None keeps that
    axis)."""

    def __init__(self, output_size):
        super().__init__()
        sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 2
        if len(sizes) != 2:
            raise bad_value("AdaptiveAvgPool2d", "output_size", output_size,
                            "an int or 2 ints (or None)")
        self.output_size = tuple(None if o is None else checks.integer(
            "AdaptiveAvgPool2d", "output_size", o, 1) for o in sizes)

    def forward(self, x):
        return pooling.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Upsample(Module):
    """``interpolate(x, size, scale_factor, mode, align_corners)``, as PyTorch's."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners=None, recompute_scale_factor=None):
        super().__init__()
        if mode not in resampling.MODES:
            raise bad_value("Upsample", "mode", mode, f"one of {resampling.MODES}")
        if (size is None) == (scale_factor is None):
            raise bad_value("Upsample", "size", size, "exactly one of 'size' and "
                            "'scale_factor' given")
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return resampling.interpolate(x, self.size, self.scale_factor, self.mode,
                                      self.align_corners, self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else \
            f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class PixelShuffle(Module):
    """``pixel_shuffle(x, upscale_factor)``: (*, C r^2, H, W) -> (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = checks.integer("PixelShuffle", "upscale_factor",
                                             upscale_factor, 1)

    def forward(self, x):
        return resampling.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``pixel_unshuffle(x, downscale_factor)``: (*, C, H r, W r) -> (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = checks.integer("PixelUnshuffle", "downscale_factor",
                                               downscale_factor, 1)

    def forward(self, x):
        return resampling.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d",
           "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "Upsample",
           "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d",
           "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
           "ReplicationPad2d", "CircularPad1d", "CircularPad2d"]
