"""Normalisation over batches, groups and features: ``batch_norm`` (running statistics
updated in place), ``group_norm`` and ``rms_norm``, with PyTorch's arguments
(``torch.nn.functional``'s).

Each is a composition of the reductions and elementwise ops, so its gradient is theirs:
the mean, then the (biased) variance of the deviations, two passes as ``var``'s, then
(x - mean) * rsqrt(var + eps). The running statistics are written into their own
storage on the device, so a recorded step updates them at every replay.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidValueError, bad_shape, bad_type, bad_value
from . import checks, device
from .low_precision import computes_in_float32, converted, in_input_type
from .ops import _same_dtype, _tensor, mean, reshape, rsqrt
from .residency import handle
from .tensor import DEFAULT_DTYPE, LOW_PRECISION, Tensor


def _normalised(x: Tensor, axes: tuple, eps: float) -> tuple:
    """((x - mean) / sqrt(var + eps), mean, biased var) over ``axes``, kept as size 1."""
    mu = mean(x, axes, keepdims=True)
    d = x - mu
    var = mean(d * d, axes, keepdims=True)
    return d * rsqrt(var + eps), mu, var


def _channel_params(fn: str, x: Tensor, weight, bias, channels: int) -> tuple:
    """(weight, bias) as tensors of shape (channels,) (or None), checked first: a bad one
    changes nothing (the running statistics included)."""
    out = []
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            t = _tensor(fn, name, t, x)
            _same_dtype(fn, x, t)
            if t.shape != (channels,):
                raise bad_shape(fn, name, t.shape, f"({channels},), one per channel")
        out.append(t)
    return tuple(out)


def _affine(y: Tensor, weight, bias, channels: int) -> Tensor:
    """y * weight + bias, each of shape (channels,) along axis 1 (or None)."""
    shape = (1, channels) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * reshape(weight, shape)
    return y if bias is None else y + reshape(bias, shape)


def count_batch(counter: Tensor) -> None:
    """counter += 1, in place on the device (a batch norm's num_batches_tracked)."""
    backend = device.active()
    h = handle(backend, counter)
    one = backend.empty(h.shape, h.dtype)
    backend.fill(one, 1)
    backend.copy(h, backend.integer("int_add", h, one))
    counter.written()


def _update(backend, running: Tensor, batch: Tensor, momentum: float, scale: float) -> None:
    """running = (1 - momentum) * running + momentum * scale * batch, in place: computed
    in the batch statistics' type, rounded once into a 16-bit buffer's."""
    h = handle(backend, running)
    hb = handle(backend, batch)
    wide = h if h.dtype == hb.dtype else backend.cast(h, hb.dtype)
    new = backend.binary("add", backend.unary("mul_scalar", wide, 1.0 - momentum),
                         backend.unary("mul_scalar", backend.reshape(hb, h.shape),
                                       momentum * scale))
    backend.copy(h, new if new.dtype == h.dtype else backend.cast(new, h.dtype))
    running.written()


class _Running:
    """batch_norm's running statistics, handed through ``computes_in_float32`` as they
    are (it would widen them into copies, and the update would land in those)."""

    def __init__(self, mean, var):
        self.mean, self.var = mean, var


def _running(fn: str, name: str, t, channels: int, x: Tensor):
    if t is None:
        return None
    if not isinstance(t, Tensor):
        raise bad_type(fn, name, t, "a Tensor (updated in place) or None")
    # (a 16-bit input beside float32 statistics: a float32 model's BatchNorm under
    # autocast, as PyTorch takes it)
    if t.shape != (channels,) or not (t.dtype == x.dtype or (
            x.dtype in LOW_PRECISION and t.dtype == DEFAULT_DTYPE)):
        raise bad_shape(fn, name, t.shape, f"({channels},) of the input's dtype {x.dtype}")
    return t


@in_input_type
def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalises each channel (axis 1) of ``input`` (N, C, ...) over the batch and the
    other axes, as ``torch.nn.functional.batch_norm``: with the batch's statistics where
    ``training`` (then ``running_mean`` and ``running_var``, where given, move toward the
    batch's mean and unbiased variance by ``momentum``, in place, 16-bit ones too), else
    with the running ones; then scaled by ``weight`` and shifted by ``bias``."""
    fn = "batch_norm"
    x = _tensor(fn, "input", input, low_precision=True)
    if x.ndim < 2:
        raise bad_shape(fn, "input", x.shape, "(N, C) or (N, C, ...)")
    c = x.shape[1]
    running = _Running(_running(fn, "running_mean", running_mean, c, x),
                       _running(fn, "running_var", running_var, c, x))
    return _batch_norm(x, running, weight, bias, training, momentum, eps)


@computes_in_float32
def _batch_norm(x, running: _Running, weight, bias, training, momentum, eps) -> Tensor:
    fn = "batch_norm"
    x = _tensor(fn, "input", x)
    c = x.shape[1]
    checks.flag(fn, "training", training)
    momentum = checks.number(fn, "momentum", momentum, 0.0, 1.0)
    eps = checks.number(fn, "eps", eps, 0.0, lo_open=True)
    running_mean, running_var = running.mean, running.var
    weight, bias = _channel_params(fn, x, weight, bias, c)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // max(c, 1)
    stats = (1, c) + (1,) * (x.ndim - 2)
    if training:
        if n <= 1:
            raise bad_shape(fn, "input", x.shape, "more than one value per channel when "
                                                   "training")
        y, mu, var = _normalised(x, axes, eps)
        backend = device.active()
        if running_mean is not None:
            _update(backend, running_mean, mu, momentum, 1.0)
        if running_var is not None:
            _update(backend, running_var, var, momentum, n / (n - 1))
    else:
        if running_mean is None or running_var is None:
            raise InvalidValueError(f"{fn}: running_mean and running_var are needed when not "
                                    "training")
        running_mean, running_var = (t if t.dtype == x.dtype else converted(device.active(), t,
                                                                               x.dtype)
                                     for t in (running_mean, running_var))
        y = (x - reshape(running_mean, stats)) * reshape(rsqrt(running_var + eps), stats)
    return _affine(y, weight, bias, c)



@in_input_type
@computes_in_float32
def group_norm(input, num_groups: int, weight=None, bias=None,  # noqa: A002
               eps: float = 1e-5) -> Tensor:
    """Normalises each group of ``num_groups`` consecutive channels of ``input``
    (N, C, ...) over its channels and the other axes, per sample, as
    ``torch.nn.functional.group_norm``; then ``weight`` and ``bias`` per channel."""
    fn = "group_norm"
    x = _tensor(fn, "input", input)
    if x.ndim < 2:
        raise bad_shape(fn, "input", x.shape, "(N, C, ...)")
    g = checks.integer(fn, "num_groups", num_groups, 1)
    if x.shape[1] % g:
        raise bad_shape(fn, "input", x.shape, f"channels (axis 1) a multiple of "
                                               f"num_groups ({g})")
    eps = checks.number(fn, "eps", eps, 0.0, lo_open=True)
    weight, bias = _channel_params(fn, x, weight, bias, x.shape[1])
    grouped = reshape(x, (x.shape[0], g, -1))
    y, _, _ = _normalised(grouped, (2,), eps)
    return _affine(reshape(y, x.shape), weight, bias, x.shape[1])


@in_input_type
@computes_in_float32
def rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:  # noqa: A002
    """x / sqrt(mean(x^2) + eps) over the trailing axes of ``normalized_shape``, times
    ``weight`` (of that shape), as ``torch.nn.functional.rms_norm``; ``eps`` None: the
    dtype's machine epsilon."""
    fn = "rms_norm"
    x = _tensor(fn, "input", input)
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else \
        (normalized_shape,)
    shape = tuple(checks.integer(fn, "normalized_shape", n, 1) for n in shape)
    if not shape or x.shape[x.ndim - len(shape):] != shape or len(shape) > x.ndim:
        raise bad_shape(fn, "input", x.shape, f"trailing axes {shape} (normalized_shape)")
    eps = float(np.finfo(x.dtype).eps) if eps is None else \
        checks.number(fn, "eps", eps, 0.0, lo_open=True)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    y = x * rsqrt(mean(x * x, axes, keepdims=True) + eps)
    if weight is not None:
        weight = _tensor(fn, "weight", weight, x)
        _same_dtype(fn, x, weight)
        if weight.shape != shape:
            raise bad_shape(fn, "weight", weight.shape, f"{shape} (normalized_shape)")
        y = y * weight
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None,  # noqa: A002
                  bias=None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:
    """Normalises each channel of each sample of ``input`` (N, C, ...) over its other axes,
    then ``weight`` and ``bias`` per channel, as ``torch.nn.functional.instance_norm``
    (a group norm with a group a channel). Running statistics are not kept: they must be
    None (``use_input_stats`` True), PyTorch's default."""
    fn = "instance_norm"
    for name, value in (("running_mean", running_mean), ("running_var", running_var)):
        if value is not None:
            raise bad_value(fn, name, "a tensor", "None (running statistics are not kept)")
    if not checks.flag(fn, "use_input_stats", use_input_stats):
        raise bad_value(fn, "use_input_stats", False, "True (the input's own statistics)")
    checks.number(fn, "momentum", momentum, 0.0, 1.0)
    x = _tensor(fn, "input", input)
    if x.ndim < 3:
        raise bad_shape(fn, "input", x.shape, "(N, C, L) or (N, C, H, W)")
    return group_norm(x, x.shape[1], weight, bias, eps)


__all__ = ["batch_norm", "group_norm", "rms_norm", "instance_norm"]
