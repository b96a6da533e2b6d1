"""Elementwise ops made of others, as PyTorch's: ``logaddexp``, ``hypot``, ``nan_to_num``,
``logit``, ``xlogy``, ``prelu`` and the shrinkages ``hardshrink softshrink tanhshrink
threshold``.

Each is a short composition of kernels the differential suite checks (their results agree
between the backends as those do); gradients come from the parts'."""
from __future__ import annotations

import numpy as np

from ..errors import bad_shape
from . import checks
from .logic import (_operands, eq, ge, gt, isinf, isnan, logical_and, logical_not,
                    logical_or, lt, where)
from .low_precision import computes_in_float32
from .ops import (_tensor, abs as abs_, add, clamp, div, exp, log, log1p, maximum, minimum,
                  mul, neg, reshape, sqrt, sub, tanh)
from .tensor import Tensor


def _floats(fn: str, a, b) -> tuple:
    a, b = _operands(fn, a, b)
    return _tensor(fn, "input", a), _tensor(fn, "other", b, a)


@computes_in_float32
def logaddexp(input, other) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """log(exp(input) + exp(other)) without overflow: max + log1p(exp(-|input - other|));
    two equal infinities give themselves, as PyTorch's."""
    a, b = _floats("logaddexp", input, other)
    top = maximum(a, b)
    spread = log1p(exp(neg(abs_(sub(a, b)))))
    return where(logical_and(eq(a, b), isinf(a)), a, add(top, spread))


@computes_in_float32
def hypot(input, other) -> Tensor:  # noqa: A002
    """sqrt(input^2 + other^2) without overflow or underflow on the way: the larger
    magnitude times sqrt(1 + (smaller / larger)^2) (0 where both are 0; inf where either
    is infinite, even beside a NaN, as C's hypot; NaN otherwise propagating)."""
    a, b = _floats("hypot", input, other)
    big, small = maximum(abs_(a), abs_(b)), minimum(abs_(a), abs_(b))
    zero = eq(big, 0.0)
    ratio = div(small, where(zero, 1.0, big))
    value = mul(big, sqrt(add(mul(ratio, ratio), 1.0)))
    return where(logical_or(isinf(a), isinf(b)), float("inf"), where(zero, 0.0, value))


@computes_in_float32
def nan_to_num(input, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:  # noqa: A002
    """NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by default the
    largest and the lowest finite float32), as PyTorch's; the gradient flows where the
    element was kept."""
    x = _tensor("nan_to_num", "input", input)
    big = float(np.finfo(np.float32).max)
    nan = checks.number("nan_to_num", "nan", nan)
    pos = big if posinf is None else checks.number("nan_to_num", "posinf", posinf)
    neg_ = -big if neginf is None else checks.number("nan_to_num", "neginf", neginf)
    x = where(isnan(x), nan, x)
    x = where(eq(x, float("inf")), pos, x)
    return where(eq(x, float("-inf")), neg_, x)


@computes_in_float32
def logit(input, eps=None) -> Tensor:  # noqa: A002
    """log(p / (1 - p)) as log(p) - log1p(-p), as ``torch.logit``; with ``eps``, p clamped
    to [eps, 1 - eps] first (its gradient 0 outside, as PyTorch's)."""
    p = _tensor("logit", "input", input)
    if eps is not None:
        eps = checks.number("logit", "eps", eps, 0.0, 0.5)
        p = clamp(p, eps, 1.0 - eps)
    return sub(log(p), log1p(neg(p)))


@computes_in_float32
def xlogy(input, other) -> Tensor:  # noqa: A002
    """input * log(other), 0 where input is 0 (other 0 or inf too, but not NaN), as
    ``torch.xlogy``: the entropy terms p log p with p = 0 give 0."""
    x, y = _floats("xlogy", input, other)
    return where(logical_and(eq(x, 0.0), logical_not(isnan(y))), 0.0, mul(x, log(y)))


@computes_in_float32
def prelu(input, weight) -> Tensor:  # noqa: A002
    """input where it is >= 0, else weight * input, as ``torch.nn.functional.prelu``:
    ``weight`` one slope, or one a channel (axis 1 of a batched input, 0 of a 1-D one)."""
    x = _tensor("prelu", "input", input)
    w = _tensor("prelu", "weight", weight, x)
    if w.ndim > 1:
        raise bad_shape("prelu", "weight", w.shape, "(1,) or (channels,)")
    if w.size != 1:
        axis = 1 if x.ndim >= 2 else 0
        if x.ndim == 0 or x.shape[axis] != w.size:
            raise bad_shape("prelu", "weight", w.shape,
                            f"(1,) or one slope a channel of input {x.shape}")
        w = reshape(w, (w.size,) + (1,) * (x.ndim - axis - 1))
    elif w.ndim:
        w = reshape(w, ())
    return where(ge(x, 0.0), x, mul(w, x))


@computes_in_float32
def hardshrink(input, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """input where |input| > lambd, else 0."""
    x = _tensor("hardshrink", "input", input)
    lambd = checks.number("hardshrink", "lambd", lambd, 0.0)
    return where(gt(abs_(x), lambd), x, 0.0)


@computes_in_float32
def softshrink(input, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """input - lambd above lambd, input + lambd below -lambd, else 0."""
    x = _tensor("softshrink", "input", input)
    lambd = checks.number("softshrink", "lambd", lambd, 0.0)
    return where(gt(x, lambd), sub(x, lambd), where(lt(x, -lambd), add(x, lambd), 0.0))


@computes_in_float32
def tanhshrink(input) -> Tensor:  # noqa: A002
    """input - tanh(input)."""
    x = _tensor("tanhshrink", "input", input)
    return sub(x, tanh(x))


@computes_in_float32
def threshold(input, threshold: float, value: float) -> Tensor:  # noqa: A002
    """input where input > threshold, else value, as ``torch.nn.functional.threshold``."""
    x = _tensor("threshold", "input", input)
    bound = checks.number("threshold", "threshold", threshold)
    value = checks.number("threshold", "value", value)
    return where(gt(x, bound), x, value)


@computes_in_float32
def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 * tensor2, as ``torch.addcmul`` (in its order: value times
    tensor1 first)."""
    t1 = _tensor("addcmul", "tensor1", tensor1)
    value = checks.number("addcmul", "value", value)
    return add(input, mul(t1 if value == 1 else mul(t1, value), tensor2))


@computes_in_float32
def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 / tensor2, as ``torch.addcdiv``."""
    t1 = _tensor("addcdiv", "tensor1", tensor1)
    value = checks.number("addcdiv", "value", value)
    return add(input, div(t1 if value == 1 else mul(t1, value), tensor2))


def clamp_min(input, min) -> Tensor:  # noqa: A002
    """``clamp(input, min=min)``."""
    from .ops import clamp
    return clamp(input, min=min)


def clamp_max(input, max) -> Tensor:  # noqa: A002
    """``clamp(input, max=max)``."""
    from .ops import clamp
    return clamp(input, max=max)


__all__ = ["logaddexp", "hypot", "nan_to_num", "logit", "xlogy", "prelu", "hardshrink",
           "softshrink", "tanhshrink", "threshold", "addcmul", "addcdiv", "clamp_min", "clamp_max"]
