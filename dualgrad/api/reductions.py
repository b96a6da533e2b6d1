"""Reductions beyond sum, mean and amax, with PyTorch's names, arguments and gradients.

max and min are torch.max and torch.min: along one dim, (values, indices) by argmax (or
argmin) and a gather, so the values' gradient goes to the element indexed; else amax and
amin, the extremum kernel's values. norm (but its 2-norm) is a composition of the sum and
max kernels and elementwise ops, so its gradient follows from its parts. amin, prod,
cumsum, the sum of squares (the 2-norm's), the variance (var's and std's: one pass, each
share's squares about its own mean) and the sum of exponentials (logsumexp's, about the
maximum) are kernels of their own (prod's gradient is a composition); logsumexp reads its
input twice, where an online maximum would read it once.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from ..errors import (ArgumentTypeError, InvalidValueError, bad_axis, bad_shape, bad_type,
                      bad_value)
from . import checks, device, ops
from .low_precision import computes_in_float32
from .ops import (_axes, _dim_or_axis, _filled, _integer_reduce, _make, _non_float, _reduce,
                  _tensor, gather)
from ..shapes import reduced_shape
from .indexing import squeeze
from .logic import argmax, argmin, to
from .residency import adopt, handle
from .tensor import INT32, Tensor

_FLT_MAX = float(np.finfo(np.float32).max)


# torch.return_types.max and .min
MaxResult, MinResult = (namedtuple(op, ("values", "indices")) for op in ("max", "min"))


@computes_in_float32
def max(input, dim=None, keepdim=None, *, axis=None, keepdims=None):  # noqa: A001,A002
    """As ``torch.max``: with no ``dim``, the maximum of all elements; along one ``dim``
    (an int, however passed), ``(values, indices)``: the index of the first maximum (a NaN
    counts as one), int32, and the values' gradient going to that element, as PyTorch's;
    with a tensor as ``dim`` (``torch.max(a, b)``), ``maximum(a, b)``. Along ``axis=``
    (NumPy's spelling, ``np.max(t, axis=1)`` too) or a tuple of dims, the values alone, as
    ``amax``, whose tied maxima share the gradient."""
    return _extreme("max", input, dim, keepdim, axis, keepdims)


@computes_in_float32
def min(input, dim=None, keepdim=None, *, axis=None, keepdims=None):  # noqa: A001,A002
    """As ``torch.min``, as ``max`` is ``torch.max``: along one ``dim``, ``(values,
    indices)`` of the first minimum; with a tensor, ``minimum``; else as ``amin``."""
    return _extreme("min", input, dim, keepdim, axis, keepdims)


def _extreme(op: str, x, dim, keepdim, axis, keepdims):
    if isinstance(dim, Tensor):
        return (ops.maximum if op == "max" else ops.minimum)(x, dim)
    values_only = ops.amax if op == "max" else amin
    if axis is not None or dim is None or isinstance(dim, (tuple, list)):
        if axis is not None and dim is not None:
            raise ArgumentTypeError(f"{op}: got both 'axis' and 'dim'; pass one of them")
        if keepdim is not None and keepdims is not None:
            raise ArgumentTypeError(f"{op}: got both 'keepdims' and 'keepdim'; pass one of "
                                    "them")
        return values_only(x, dim if axis is None else axis,
                           keepdim if keepdims is None else keepdims)
    keepdim = checks.flag(op, "keepdim", False if keepdim is None else keepdim)
    x = _tensor(op, "input", x, any_dtype=True)
    rank = builtins.max(x.ndim, 1)
    dim = checks.integer(op, "dim", dim)
    if not -rank <= dim < rank:
        raise bad_axis(op, "dim", dim, f"a dimension in [-{rank}, {rank})")
    if x.ndim and not x.shape[dim]:
        raise bad_shape(op, "input", x.shape, f"elements along dim {dim} (no index points "
                                              "at nothing)")
    indices = (argmax if op == "max" else argmin)(x, dim, keepdim=True)
    if not x.ndim:                        # (dim 0 or -1 of a 0-d tensor: itself)
        return (MaxResult if op == "max" else MinResult)(ops.reshape(x, ()), indices)
    values = gather(x, dim, indices)
    if not keepdim:
        values, indices = (squeeze(t, dim) for t in (values, indices))
    return (MaxResult if op == "max" else MinResult)(values, indices)


@computes_in_float32
def amin(x, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:
    """Minimum over ``axis`` (None: all axes), as ``torch.amin``: -max(-x) in one pass, so
    NaN propagates, tied minima share the gradient evenly and -0 against +0 gives -0. Of
    an int32 (bool) tensor, an int32 (bool) one."""
    axis, keepdims = _dim_or_axis("min", axis, dim, keepdims, keepdim)
    if _non_float(x):
        return _integer_reduce("min", x, axis, keepdims)
    return _reduce("min", x, axis, keepdims)


def _without_axes(backend, hk, axes: tuple, keepdims: bool):
    """A reduction's keepdims result hk, its reduced axes dropped unless ``keepdims``."""
    return hk if keepdims else backend.reshape(hk, reduced_shape(tuple(hk.shape), axes, False))


def _count(x: Tensor, axes: tuple) -> int:
    return math.prod(x.shape[a] for a in axes)


def _correction(fn: str, correction, unbiased) -> float:
    """``correction`` checked, or PyTorch's older ``unbiased`` (True: 1, False: 0) in its
    place; 1 where neither is given."""
    if unbiased is not None:
        if correction is not None:
            raise InvalidValueError(f"{fn}: give 'correction' or 'unbiased', not both")
        return 1.0 if checks.flag(fn, "unbiased", unbiased) else 0.0
    return 1.0 if correction is None else checks.number(fn, "correction", correction, 0.0)


@computes_in_float32
def var(x, axis=None, keepdims=None, *, correction: float | None = None, dim=None,
        keepdim=None, unbiased: bool | None = None) -> Tensor:
    """Variance over ``axis``: sum((x - mean)**2) / (n - correction), as ``torch.var``
    (``correction=1``, the default: Bessel's; 0: the population's; PyTorch's older
    ``unbiased=True/False`` is taken for 1/0). One kernel reads the input once:
    each share of it takes its squares about its own mean, and the shares are merged
    (Chan's rule), so a large mean cancels nothing; NaN where
    n - correction <= 0 (inf for a positive sum, as PyTorch). Its gradient is PyTorch's,
    2 (x - mean) g / (n - correction)."""
    axis, keepdims = _dim_or_axis("var", axis, dim, keepdims, keepdim)
    x = _tensor("var", "x", x)
    checks.flag("var", "keepdims", keepdims)
    correction = _correction("var", correction, unbiased)
    axes = _axes("var", x, axis)
    divisor = builtins.max(_count(x, axes) - correction, 0.0)
    backend = device.active()
    hx = handle(backend, x)
    hk = backend.reduce("var", hx, axes, keepdims=True, divisor=divisor)
    kshape = tuple(hk.shape)
    hy = _without_axes(backend, hk, axes, keepdims)

    def backward(g, needs):
        hm = backend.reduce("mean", hx, axes, keepdims=True)
        # g / (divisor / 2): one rounding (halving is exact), inf or NaN where divisor is 0
        scaled = backend.unary("div_scalar", backend.reshape(g, kshape), divisor / 2)
        return (backend.binary("mul", backend.binary("sub", hx, hm), scaled),)
    return _make(hy, (x,), backward, backend)


@computes_in_float32
def std(x, axis=None, keepdims=None, *, correction: float | None = None, dim=None,
        keepdim=None, unbiased: bool | None = None) -> Tensor:
    """Standard deviation: sqrt(var(x, ..., correction)), as ``torch.std``; its gradient
    is 0 where the deviation is 0 (as PyTorch's: not 0 times sqrt's infinite slope)."""
    axis, keepdims = _dim_or_axis("std", axis, dim, keepdims, keepdim)
    x = _tensor("std", "x", x)         # (before var: a 16-bit x rounds once, at the end)
    v = var(x, axis, keepdims, correction=_correction("std", correction, unbiased))
    backend = device.active()
    hy = backend.unary("sqrt", handle(backend, v))

    def backward(g, needs):
        zero = _filled(backend, (), 0.0, hy.dtype)
        slope = backend.binary("div", g, backend.unary("mul_scalar", hy, 2.0))
        return (backend.where(backend.logic("eq", hy, zero), zero, slope),)
    return _make(hy, (v,), backward, backend)


def var_mean(x, axis=None, keepdims=None, *, correction: float | None = None, dim=None,
             keepdim=None, unbiased: bool | None = None) -> tuple:
    """(variance, mean) over ``axis``, as ``torch.var_mean``: ``var``'s and ``mean``'s
    results (two kernels, each reading the input once)."""
    axis, keepdims = _dim_or_axis("var_mean", axis, dim, keepdims, keepdim)
    correction = _correction("var_mean", correction, unbiased)
    return var(x, axis, keepdims, correction=correction), ops.mean(x, axis, keepdims)


def std_mean(x, axis=None, keepdims=None, *, correction: float | None = None, dim=None,
             keepdim=None, unbiased: bool | None = None) -> tuple:
    """(standard deviation, mean) over ``axis``, as ``torch.std_mean``."""
    axis, keepdims = _dim_or_axis("std_mean", axis, dim, keepdims, keepdim)
    correction = _correction("std_mean", correction, unbiased)
    return std(x, axis, keepdims, correction=correction), ops.mean(x, axis, keepdims)


def _finite_max(backend, hx, axes: tuple):
    """max over axes (kept), limited to the finite range: the shift of logsumexp."""
    return backend.unary("clamp", backend.reduce("max", hx, axes, keepdims=True), -_FLT_MAX,
                         _FLT_MAX)


@computes_in_float32
def logsumexp(x, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:
    """log(sum(exp(x))) over ``axis``, computed as m + log(sum(exp(x - m))) with m the
    maximum (so nothing overflows): two passes, the maximum and then the exponentials about
    it (formed as they are read). Its gradient is softmax(x) along the axes, g exp(x - y).
    -inf where every element is -inf, inf where one is inf, as PyTorch's."""
    axis, keepdims = _dim_or_axis("logsumexp", axis, dim, keepdims, keepdim)
    x = _tensor("logsumexp", "x", x)
    checks.flag("logsumexp", "keepdims", keepdims)
    axes = _axes("logsumexp", x, axis)
    if x.size == 0:
        return ops.log(ops.sum(ops.exp(x), axes, keepdims))
    backend = device.active()
    hx = handle(backend, x)
    hm = _finite_max(backend, hx, axes)
    hk = backend.binary("add", backend.unary("log", backend.reduce("sum_exp", hx, axes,
                                                                   keepdims=True, center=hm)),
                        hm)
    kshape = tuple(hk.shape)
    hy = _without_axes(backend, hk, axes, keepdims)

    def backward(g, needs):
        weights = backend.unary("exp", backend.binary("sub", hx, hk))
        return (backend.binary("mul", weights, backend.reshape(g, kshape)),)
    return _make(hy, (x,), backward, backend)


@computes_in_float32
def norm(x, p=2, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:
    """The vector p-norm over ``axis`` (None: all elements), as
    ``torch.linalg.vector_norm``: p = 2 (default), 1, inf, -inf, 0 (the count of nonzero
    elements, no gradient) or any other positive number, (sum |x|**p)**(1/p)."""
    axis, keepdims = _dim_or_axis("norm", axis, dim, keepdims, keepdim)
    x = _tensor("norm", "x", x)
    checks.flag("norm", "keepdims", keepdims)
    if not checks.is_number(p) or math.isnan(p):
        raise bad_type("norm", "p", p, "a number (2, 1, inf, -inf, 0, ...)")
    if math.isinf(p):
        return (ops.amax if p > 0 else amin)(ops.abs(x), axis, keepdims)
    if p == 2:
        return _two_norm(x, _axes("norm", x, axis), keepdims)
    if p < 0:
        raise bad_value("norm", "p", p, "p > 0, or 0, inf or -inf")
    a = ops.abs(x)
    if p == 0:
        return ops.sum(ops.sign(a), axis, keepdims)
    if p == 1:
        return ops.sum(a, axis, keepdims)
    return _p_norm(x, float(p), _axes("norm", x, axis), keepdims)


def _two_norm(x: Tensor, axes: tuple, keepdims: bool) -> Tensor:
    """sqrt(sum(x**2)), the squares summed as they are read; its gradient g x / norm, 0
    where the norm is 0 (as PyTorch's, where the chain rule through sqrt would give
    0 * inf)."""
    backend = device.active()
    hx = handle(backend, x)
    hn = backend.unary("sqrt", backend.reduce("sum_squares", hx, axes, keepdims=True))
    kshape = tuple(hn.shape)
    hy = _without_axes(backend, hn, axes, keepdims)

    def backward(g, needs):
        # x / norm, 0 where the norm is 0 (where x is 0, or its squares underflow)
        zero = _filled(backend, (), 0.0, hn.dtype)
        unit = backend.where(backend.logic("eq", hn, zero), zero, backend.binary("div", hx, hn))
        return (backend.binary("mul", unit, backend.reshape(g, kshape)),)
    return _make(hy, (x,), backward, backend)


def _p_norm(x: Tensor, p: float, axes: tuple, keepdims: bool) -> Tensor:
    """(sum |x|**p)**(1/p) for a p other than 0, 1, 2 and inf; its gradient PyTorch's,
    g sign(x) (|x| / norm)**(p - 1), 0 where x is 0 or the norm is (where the chain rule
    through the powers would give 0 * inf)."""
    backend = device.active()
    hx = handle(backend, x)
    ha = backend.unary("abs", hx)
    hn = backend.unary("pow_scalar", backend.reduce("sum", backend.unary("pow_scalar", ha, p),
                                                    axes, keepdims=True), 1.0 / p)
    kshape = tuple(hn.shape)
    hy = _without_axes(backend, hn, axes, keepdims)

    def backward(g, needs):
        zero = _filled(backend, (), 0.0, hn.dtype)
        slope = backend.binary("mul", backend.unary("sign", hx), backend.unary(
            "pow_scalar", backend.binary("div", ha, hn), p - 1.0))
        none = backend.logic("logical_or", backend.logic("eq", ha, zero),
                             backend.logic("eq", hn, zero))
        return (backend.binary("mul", backend.where(none, zero, slope),
                               backend.reshape(g, kshape)),)
    return _make(hy, (x,), backward, backend)


@computes_in_float32
def prod(x, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:
    """Product over ``axis`` (None: all axes; an int or a tuple of ints), as ``torch.prod``;
    the product of nothing is 1. The gradient is PyTorch's: g * prod / x where no element
    of the product is 0; where one is, that element gets g times the product of the others
    and the rest 0; where several are, 0."""
    axis, keepdims = _dim_or_axis("prod", axis, dim, keepdims, keepdim)
    x = _tensor("prod", "x", x)
    checks.flag("prod", "keepdims", keepdims)
    axes = _axes("prod", x, axis)
    backend = device.active()
    hx = handle(backend, x)
    hk = backend.reduce("prod", hx, axes, keepdims=True)
    kshape = tuple(hk.shape)
    hy = _without_axes(backend, hk, axes, keepdims)

    def backward(g, needs):
        zero, one = (_filled(backend, (), v, x.dtype) for v in (0.0, 1.0))
        at_zero = backend.logic("eq", hx, zero)
        # the product of the nonzero elements, and how many are zero
        nonzero = backend.reduce("prod", backend.where(at_zero, one, hx), axes, keepdims=True)
        zeros = backend.reduce("sum", backend.cast(at_zero, x.dtype), axes, keepdims=True)
        the_zero = backend.logic("logical_and", backend.logic("eq", zeros, one), at_zero)
        others = backend.where(backend.logic("eq", zeros, zero),
                               backend.binary("div", nonzero, hx),
                               backend.where(the_zero, nonzero, zero))
        return (backend.binary("mul", backend.reshape(g, kshape), others),)
    return _make(hy, (x,), backward, backend)


@computes_in_float32
def cumsum(x, dim: int, *, dtype=None) -> Tensor:
    """The cumulative sums of x along ``dim``, as ``torch.cumsum`` (a 0-d tensor: itself):
    of a float tensor, of its dtype, the gradient the sums of g from the end; of an int32
    or bool tensor, int32 sums wrapping as int32 does (PyTorch's are int64), exact, with no
    gradient (``mask.cumsum(-1)`` counts). ``dtype``: x converted to it first, as PyTorch's."""
    x, lines, exact = _scanned("cumsum", x, dim, dtype)
    backend = device.active()
    if exact is not None:
        return adopt(backend, Tensor(x.shape, INT32), backend.cumsum(exact, *lines, False))
    hy = backend.cumsum(handle(backend, x), *lines, False)

    def backward(g, needs):
        return (backend.cumsum(g, *lines, True),)
    return _make(hy, (x,), backward, backend)


@computes_in_float32
def cumprod(x, dim: int, *, dtype=None) -> Tensor:
    """The cumulative products of x along ``dim``, as ``torch.cumprod``: of a float tensor,
    of its dtype (the device multiplies in chunks: within gamma(n) of the exact products,
    relatively); of an int32 or bool tensor, int32 products wrapping as int32 does, with no
    gradient. The gradient is PyTorch's, zeros included: the sums from the end of g y,
    divided by x, before a line's first zero; at that zero, the sums of g times the
    products without it; 0 past it."""
    x, lines, exact = _scanned("cumprod", x, dim, dtype)
    backend = device.active()
    if exact is not None:
        return adopt(backend, Tensor(x.shape, INT32), backend.cumprod(exact, *lines, False))
    hx = handle(backend, x)
    hy = backend.cumprod(hx, *lines, False)

    def backward(g, needs):
        zero, one = (_filled(backend, (), v, x.dtype) for v in (0.0, 1.0))
        at_zero = backend.logic("eq", hx, zero)
        zeros_so_far = backend.cumsum(backend.cast(at_zero, INT32), *lines, False)
        count_one = _filled(backend, (), 1, INT32)
        before = backend.logic("eq", zeros_so_far, _filled(backend, (), 0, INT32))
        first = backend.logic("logical_and", at_zero,
                              backend.logic("eq", zeros_so_far, count_one))
        tail = backend.cumsum(backend.binary("mul", g, hy), *lines, True)
        kept = backend.binary("div", tail, backend.where(at_zero, one, hx))
        # at the first zero: the products without it, weighted by g and summed from the end
        without = backend.cumprod(backend.where(first, one, hx), *lines, False)
        at_first = backend.cumsum(backend.binary("mul", g, without), *lines, True)
        return (backend.where(before, kept, backend.where(first, at_first, zero)),)
    return _make(hy, (x,), backward, backend)


def _scanned(fn: str, x, dim, dtype) -> tuple:
    """(x, (outer, n, inner) about ``dim``, x's storage as int32 where x is an int32 or
    bool tensor, else None), x converted to ``dtype`` first where one is given."""
    if not isinstance(x, Tensor) or not _non_float(x):
        x = _tensor(fn, "x", x)
    rank = builtins.max(x.ndim, 1)
    dim = checks.integer(fn, "dim", dim)
    if not -rank <= dim < rank:
        raise bad_axis(fn, "dim", dim, f"a dimension in [-{rank}, {rank})")
    if dtype is not None:
        x = to(x, dtype)
    shape = x.shape or (1,)
    dim %= rank
    lines = (math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:]))
    if not _non_float(x):
        return x, lines, None
    backend = device.active()
    h = handle(backend, x)
    return x, lines, h if x.dtype == INT32 else backend.cast(h, INT32)


def _install_methods() -> None:
    Tensor.amin = ops._reduction_method(amin)
    Tensor.max = ops._reduction_method(max, dim_first=True)    # (np.max(t) too)
    Tensor.min = ops._reduction_method(min, dim_first=True)
    Tensor.var = lambda t, axis=None, keepdims=None, **kw: var(t, axis, keepdims, **kw)
    Tensor.std = lambda t, axis=None, keepdims=None, **kw: std(t, axis, keepdims, **kw)
    Tensor.logsumexp = lambda t, axis=None, keepdims=None, **kw: logsumexp(t, axis, keepdims,
                                                                            **kw)
    Tensor.cumsum = lambda t, dim, *, dtype=None: cumsum(t, dim, dtype=dtype)
    Tensor.cumprod = lambda t, dim, *, dtype=None: cumprod(t, dim, dtype=dtype)
    Tensor.prod = lambda t, axis=None, keepdims=None, **kw: prod(t, axis, keepdims, **kw)
    Tensor.norm = lambda t, p=2, axis=None, keepdims=None, **kw: norm(t, p, axis, keepdims,
                                                                       **kw)


_install_methods()

__all__ = ["max", "min", "amin", "var", "std", "var_mean", "std_mean", "logsumexp", "norm",
           "cumsum", "cumprod", "prod"]
