"""Normalisation layers: ``BatchNorm1d``, ``BatchNorm2d`` (running statistics as buffers,
train and eval modes, checkpointed), ``GroupNorm``, ``RMSNorm``; PyTorch's arguments,
parameter and buffer names."""
from __future__ import annotations

import numpy as np

from ..errors import bad_shape, bad_value
from . import checks, normalization
from .nn import Module
from .ops import _tensor, reshape
from .tensor import ag_param


class _BatchNorm(Module):
    dims = ()                 # the input ranks the layer takes
    shape_text = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        fn = type(self).__name__
        self.num_features = checks.integer(fn, "num_features", num_features, 1)
        self.eps = checks.number(fn, "eps", eps, 0.0, lo_open=True)
        if momentum is None:
            raise bad_value(fn, "momentum", None, "a number in [0, 1] (the cumulative "
                                                  "average of momentum=None is not offered)")
        self.momentum = checks.number(fn, "momentum", momentum, 0.0, 1.0)
        self.affine = checks.flag(fn, "affine", affine)
        self.track_running_stats = checks.flag(fn, "track_running_stats",
                                               track_running_stats)
        c = self.num_features
        self.weight = ag_param(np.ones(c, np.float32)) if affine else None
        self.bias = ag_param(np.zeros(c, np.float32)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(c, np.float32))
            self.register_buffer("running_var", np.ones(c, np.float32))
            self.register_buffer("num_batches_tracked", np.zeros((), np.int32))

    def forward(self, x):
        if getattr(x, "ndim", None) not in self.dims:
            raise bad_shape(type(self).__name__, "input", getattr(x, "shape", ()),
                            self.shape_text)
        # the batch's statistics in training (moving the running ones, where tracked) or
        # where none are tracked; else the running ones
        track = self.track_running_stats
        y = normalization.batch_norm(
            x, self.running_mean if track else None, self.running_var if track else None,
            self.weight, self.bias, self.training or not track, self.momentum, self.eps)
        if self.training and track:
            normalization.count_batch(self.num_batches_tracked)
        return y

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """``batch_norm`` of (N, C) or (N, C, L) inputs over the batch (and L)."""

    dims = (2, 3)
    shape_text = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """``batch_norm`` of (N, C, H, W) inputs over the batch and the image."""

    dims = (4,)
    shape_text = "(N, C, H, W)"


class GroupNorm(Module):
    """``group_norm`` into ``num_groups`` groups of ``num_channels`` channels; weight ones,
    bias zeros (``affine``)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True):
        super().__init__()
        self.num_groups = checks.integer("GroupNorm", "num_groups", num_groups, 1)
        self.num_channels = checks.integer("GroupNorm", "num_channels", num_channels, 1)
        if self.num_channels % self.num_groups:
            raise bad_value("GroupNorm", "num_channels", num_channels,
                            f"a multiple of num_groups ({num_groups})")
        self.eps = checks.number("GroupNorm", "eps", eps, 0.0, lo_open=True)
        self.affine = checks.flag("GroupNorm", "affine", affine)
        self.weight = ag_param(np.ones(num_channels, np.float32)) if affine else None
        self.bias = ag_param(np.zeros(num_channels, np.float32)) if affine else None

    def forward(self, x):
        return normalization.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    """``instance_norm``: each channel of each sample normalised over its other axes;
    weight ones and bias zeros with ``affine`` (off by default, as PyTorch's). Running
    statistics are not kept (``track_running_stats`` False, PyTorch's default)."""

    spatial = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False):
        super().__init__()
        fn = type(self).__name__
        self.num_features = checks.integer(fn, "num_features", num_features, 1)
        self.eps = checks.number(fn, "eps", eps, 0.0, lo_open=True)
        self.momentum = checks.number(fn, "momentum", momentum, 0.0, 1.0)
        self.affine = checks.flag(fn, "affine", affine)
        if checks.flag(fn, "track_running_stats", track_running_stats):
            raise bad_value(fn, "track_running_stats", True, "False (running statistics "
                            "are not kept)")
        self.weight = ag_param(np.ones(num_features, np.float32)) if affine else None
        self.bias = ag_param(np.zeros(num_features, np.float32)) if affine else None

    def forward(self, x):
        fn = type(self).__name__
        x = _tensor(fn, "x", x)
        if x.ndim not in (self.spatial + 1, self.spatial + 2) or \
                x.shape[x.ndim - self.spatial - 1] != self.num_features:
            raise bad_shape(fn, "x", x.shape, f"(N, {self.num_features}, ...) or "
                            f"({self.num_features}, ...) with {self.spatial} spatial axes")
        batched = x if x.ndim == self.spatial + 2 else reshape(x, (1,) + x.shape)
        y = normalization.instance_norm(batched, weight=self.weight, bias=self.bias,
                                        eps=self.eps)
        return y if x.ndim == self.spatial + 2 else reshape(y, x.shape)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.affine}"


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) or (C, L) inputs."""
    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) or (C, H, W) inputs."""
    spatial = 2


class RMSNorm(Module):
    """``rms_norm`` over the trailing ``normalized_shape``; weight ones
    (``elementwise_affine``)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine: bool = True):
        super().__init__()
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else \
            (normalized_shape,)
        self.normalized_shape = tuple(checks.integer("RMSNorm", "normalized_shape", n, 1)
                                      for n in shape)
        self.eps = None if eps is None else checks.number("RMSNorm", "eps", eps, 0.0,
                                                          lo_open=True)
        self.elementwise_affine = checks.flag("RMSNorm", "elementwise_affine",
                                              elementwise_affine)
        self.weight = ag_param(np.ones(self.normalized_shape, np.float32)) \
            if elementwise_affine else None

    def forward(self, x):
        return normalization.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "RMSNorm", "InstanceNorm1d", "InstanceNorm2d"]
