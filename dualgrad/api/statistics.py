"""Order statistics and NaN-aware reductions, as PyTorch's: ``median nanmedian kthvalue
quantile nansum nanmean count_nonzero aminmax diff``, and the selections
``take_along_dim masked_select nonzero``.

All are made of other ops: the order statistics of ``sort`` (stable, NaNs last), whose
values carry the gradient back to where each came from, so a median's gradient reaches the
element chosen, as PyTorch's. ``nonzero`` (a result whose shape depends on the values)
reads the input to the host, as PyTorch's synchronises.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..errors import InvalidValueError, ShapeError, bad_value
from . import checks
from .indexing import _axis, broadcast_to, concat, flat_or_axis, stack
from .logic import _operand, any as any_, argmax, isnan, logical_not, ne, to, where
from .low_precision import computes_in_float32
from .ops import _tensor, amax, div, gather, lerp, reshape, sub, sum as sum_
from .reductions import amin
from .sorting import sort
from .tensor import INT32, Tensor, ag_tensor

MedianResult = namedtuple("median", ("values", "indices"))
KthvalueResult = namedtuple("kthvalue", ("values", "indices"))
AminmaxResult = namedtuple("aminmax", ("min", "max"))
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _float(fn: str, input) -> Tensor:  # noqa: A002
    return _tensor(fn, "input", input)


def _line(fn: str, x: Tensor, dim) -> tuple:
    """(x, dim): x flattened (dim 0) where ``dim`` is None, else the checked dim; an empty
    line is refused (no element to choose)."""
    x, dim = flat_or_axis(fn, x, dim)
    if x.shape[dim] == 0:
        raise InvalidValueError(f"{fn}: argument 'input' has no elements along dim {dim}; "
                                "expected at least one")
    return x, dim


def _at(t: Tensor, dim: int, k: int, keepdim: bool) -> Tensor:
    """Position k of t along dim (kept as an axis of 1 with ``keepdim``)."""
    picked = t[(slice(None),) * dim + (slice(k, k + 1),)]
    return picked if keepdim else reshape(picked, picked.shape[:dim] + picked.shape[dim + 1:])


def _nan_rows(x: Tensor, dim: int, keepdim: bool) -> Tensor:
    return any_(isnan(x), dim, keepdim)


@computes_in_float32
def median(input, dim=None, keepdim: bool = False):  # noqa: A002
    """The lower median (of an even count, the smaller middle value): of every element (a
    0-d tensor) where ``dim`` is None, else ``(values, indices)`` along ``dim``, as
    ``torch.median``; a line holding a NaN gives NaN (at its first NaN's index)."""
    x, line = _line("median", _float("median", input), dim)
    keepdim = checks.flag("median", "keepdim", keepdim)
    v, i = sort(x, line)
    k = (x.shape[line] - 1) // 2
    nan = _nan_rows(x, line, keepdim)
    value = where(nan, float("nan"), _at(v, line, k, keepdim))
    if dim is None:
        return value
    first_nan = argmax(isnan(x).float(), line, keepdim)
    return MedianResult(value, where(nan, first_nan, _at(i, line, k, keepdim)))


@computes_in_float32
def nanmedian(input, dim=None, keepdim: bool = False):  # noqa: A002
    """``median`` of the elements that are not NaN (NaN where a line has none), as
    ``torch.nanmedian``."""
    x, line = _line("nanmedian", _float("nanmedian", input), dim)
    keepdim = checks.flag("nanmedian", "keepdim", keepdim)
    v, i = sort(x, line)                      # (NaNs last)
    counted = sum_(logical_not(isnan(x)).float(), dim=line, keepdim=True)
    k = to(div(sub(counted, 1.0), 2.0), INT32)      # (truncates: -0.5 -> 0 for no number)
    value, index = gather(v, line, k), gather(i, line, k)
    if not keepdim:
        value = reshape(value, value.shape[:line] + value.shape[line + 1:])
        index = reshape(index, index.shape[:line] + index.shape[line + 1:])
    return value if dim is None else MedianResult(value, index)


@computes_in_float32
def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):  # noqa: A002
    """``(values, indices)`` of the k-th smallest element (k from 1) along ``dim``, as
    ``torch.kthvalue`` (NaNs count as the largest)."""
    x, line = _line("kthvalue", _float("kthvalue", input), dim)
    n = x.shape[line]
    k = checks.integer("kthvalue", "k", k)
    if not 1 <= k <= n:
        raise bad_value("kthvalue", "k", k, f"an integer in [1, {n}] (the size of dim {dim})")
    keepdim = checks.flag("kthvalue", "keepdim", keepdim)
    v, i = sort(x, line)
    return KthvalueResult(_at(v, line, k - 1, keepdim), _at(i, line, k - 1, keepdim))


def _quantiles(fn: str, q) -> tuple:
    """(the quantiles as float32 values, whether q was a scalar)."""
    if isinstance(q, Tensor):
        q = q.numpy()
    scalar = checks.is_number(q)
    values = np.atleast_1d(np.asarray(q, dtype=np.float64))
    if values.ndim != 1 or (not scalar and np.asarray(q).ndim != 1):
        raise bad_value(fn, "q", q, "a number or a 1-D array of numbers")
    if values.size and not ((values >= 0) & (values <= 1)).all():
        raise bad_value(fn, "q", q, "values in [0, 1]")
    return values.astype(np.float32), scalar


@computes_in_float32
def quantile(input, q, dim=None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles (a number, or a 1-D array whose axis leads the result) of
    every element or along ``dim``, as ``torch.quantile``: the sorted line at position
    q (n - 1) (in float32), between its neighbours by ``interpolation`` ("linear",
    "lower", "higher", "midpoint", "nearest": halves to even); a line holding a NaN gives
    NaN."""
    fn = "quantile"
    if interpolation not in _INTERPOLATIONS:
        raise bad_value(fn, "interpolation", interpolation, f"one of {_INTERPOLATIONS}")
    qs, scalar = _quantiles(fn, q)
    keepdim = checks.flag(fn, "keepdim", keepdim)
    x, line = _line(fn, _float(fn, input), dim)
    v = sort(x, line).values
    n = x.shape[line]
    nan = _nan_rows(x, line, keepdim)
    results = []
    for p in qs:
        rank = np.float32(p) * np.float32(n - 1)
        lo, hi = int(np.floor(rank)), int(np.ceil(rank))
        if interpolation == "lower":
            value = _at(v, line, lo, keepdim)
        elif interpolation == "higher":
            value = _at(v, line, hi, keepdim)
        elif interpolation == "nearest":
            value = _at(v, line, int(np.rint(rank)), keepdim)
        else:
            weight = 0.5 if interpolation == "midpoint" else float(rank - np.float32(lo))
            value = lerp(_at(v, line, lo, keepdim), _at(v, line, hi, keepdim), weight)
        results.append(where(nan, float("nan"), value))
    if dim is None and keepdim:         # (every axis kept, as 1s)
        results = [reshape(r, (1,) * _float(fn, input).ndim) for r in results]
    return results[0] if scalar else stack(results, 0)


def _nan_as_zero(x: Tensor) -> Tensor:
    return where(isnan(x), 0.0, x)


@computes_in_float32
def nansum(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The sum with NaNs counted as zero, as ``torch.nansum``."""
    x = _float("nansum", input)
    return sum_(_nan_as_zero(x), dim=dim, keepdim=keepdim)


@computes_in_float32
def nanmean(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The mean of the elements that are not NaN (NaN where there are none), as
    ``torch.nanmean``."""
    x = _float("nanmean", input)
    counted = sum_(logical_not(isnan(x)).float(), dim=dim, keepdim=keepdim)
    return div(sum_(_nan_as_zero(x), dim=dim, keepdim=keepdim), counted)


def count_nonzero(input, dim=None) -> Tensor:  # noqa: A002
    """The number of nonzero elements (along ``dim``: an int or a tuple), an int32 tensor,
    as ``torch.count_nonzero`` (its int64)."""
    x = _operand("count_nonzero", "input", input)
    return sum_(ne(x, 0), dim=dim)


@computes_in_float32
def aminmax(input, *, dim=None, keepdim: bool = False):  # noqa: A002
    """``(min, max)`` of every element or along ``dim``, as ``torch.aminmax``."""
    x = _float("aminmax", input)
    return AminmaxResult(amin(x, dim=dim, keepdim=keepdim), amax(x, dim=dim, keepdim=keepdim))


@computes_in_float32
def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:  # noqa: A002
    """The ``n``-th forward difference along ``dim`` (out[i] = x[i + 1] - x[i], n times),
    ``prepend`` and ``append`` joined to ``input`` first, as ``torch.diff``."""
    x = _float("diff", input)
    if x.ndim == 0:
        raise ShapeError("diff: argument 'input' is 0-d; expected at least one dimension")
    n = checks.integer("diff", "n", n, 0)
    dim = _axis("diff", "dim", dim, x.ndim)
    parts = [_tensor("diff", name, t, x) for name, t in (("prepend", prepend), ("input", x),
                                                         ("append", append)) if t is not None]
    x = concat(parts, dim) if len(parts) > 1 else x
    for _ in range(n):
        m = x.shape[dim]
        if m == 0:
            break
        take = (slice(None),) * dim
        x = sub(x[take + (slice(1, m),)], x[take + (slice(0, m - 1),)])
    return x


def take_along_dim(input, indices, dim=None) -> Tensor:  # noqa: A002
    """Values of ``input`` at ``indices`` along ``dim`` (of the flattened input where None),
    the other axes broadcast between them, as ``torch.take_along_dim`` (of any dtype)."""
    x = _tensor("take_along_dim", "input", input, any_dtype=True)
    idx = indices.numpy() if isinstance(indices, Tensor) else \
        checks.array("take_along_dim", "indices", indices, "iu", "integer indices")
    if dim is None:
        return gather(reshape(x, (x.size,)), 0, idx.reshape(-1))
    dim = _axis("take_along_dim", "dim", dim, x.ndim)
    if idx.ndim != x.ndim:
        raise ShapeError(f"take_along_dim: argument 'indices' has {idx.ndim} dimensions; "
                         f"expected input's {x.ndim}")
    try:
        shape = np.broadcast_shapes(x.shape[:dim] + (1,) + x.shape[dim + 1:],
                                    idx.shape[:dim] + (1,) + idx.shape[dim + 1:])
    except ValueError:
        raise ShapeError(f"take_along_dim: input of shape {x.shape} and indices of shape "
                         f"{idx.shape} do not broadcast but along dim {dim}") from None
    x = broadcast_to(x, shape[:dim] + (x.shape[dim],) + shape[dim + 1:])
    idx = np.broadcast_to(idx, shape[:dim] + (idx.shape[dim],) + shape[dim + 1:])
    return gather(x, dim, np.ascontiguousarray(idx))


def masked_select(input, mask) -> Tensor:  # noqa: A002
    """The elements of ``input`` where ``mask`` (broadcast together) is True, as a 1-D
    tensor, as ``torch.masked_select``; the gradient goes back to them."""
    x = _tensor("masked_select", "input", input, any_dtype=True)
    m = _operand("masked_select", "mask", mask)
    if m.dtype != np.bool_:
        raise bad_value("masked_select", "mask", m.dtype, "a boolean mask")
    try:
        shape = np.broadcast_shapes(x.shape, m.shape)
    except ValueError:
        raise ShapeError(f"masked_select: input of shape {x.shape} and mask of shape "
                         f"{m.shape} do not broadcast together") from None
    x = broadcast_to(x, shape) if x.shape != shape else x
    m = broadcast_to(m, shape) if m.shape != shape else m
    return x[m]


def nonzero(input, *, as_tuple: bool = False):  # noqa: A002
    """The indices of the nonzero elements, as ``torch.nonzero``: an int32 tensor (count,
    ndim) in row-major order, or with ``as_tuple`` one 1-D tensor an axis. (The input is
    read to the host: the result's shape depends on its values.)"""
    x = _operand("nonzero", "input", input)
    as_tuple = checks.flag("nonzero", "as_tuple", as_tuple)
    where_ = np.nonzero(np.atleast_1d(x.numpy()))
    if as_tuple:
        return tuple(ag_tensor(w.astype(np.int32), dtype="int32") for w in where_)
    return ag_tensor(np.stack(where_, 1).astype(np.int32).reshape(-1, max(x.ndim, 1)),
                     dtype="int32")


def argwhere(input) -> Tensor:  # noqa: A002
    """``nonzero(input)``, as ``torch.argwhere``."""
    return nonzero(input)


def unique(input, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim=None):
    """The distinct values of ``input`` (of the flattened input, or the distinct slices
    along ``dim``), sorted, as ``torch.unique``; with ``return_inverse`` also where each
    element (slice) went, with ``return_counts`` how often each occurs (int32 tensors).
    The values are read to the host (the result's length depends on them); no gradient."""
    x = _operand("unique", "input", input)
    checks.flag("unique", "sorted", sorted)
    inverse = checks.flag("unique", "return_inverse", return_inverse)
    counts = checks.flag("unique", "return_counts", return_counts)
    value = x.numpy()
    if dim is None:
        found = np.unique(value.reshape(-1), return_inverse=True, return_counts=True)
        inv = found[1].reshape(value.shape)
    else:
        d = _axis("unique", "dim", dim, max(x.ndim, 1))
        found = np.unique(value, return_inverse=True, return_counts=True, axis=d)
        inv = found[1].reshape(-1)
    dtype = "int32" if x.dtype.kind in "iu" else (bool if x.dtype == np.bool_ else x.dtype)
    out = [ag_tensor(found[0], dtype=dtype)]
    if inverse:
        out.append(ag_tensor(inv.astype(np.int32), dtype="int32"))
    if counts:
        out.append(ag_tensor(found[2].astype(np.int32), dtype="int32"))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(input, weights=None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value 0, 1, ... occurs in the non-negative integers ``input`` (1-D),
    at least ``minlength`` bins, as ``torch.bincount``: int32 counts, or with ``weights``
    the sum of each value's weights (float, gradients flowing to the weights). The values
    are read to the host (the bin count depends on them)."""
    fn = "bincount"
    idx = input.numpy() if isinstance(input, Tensor) else \
        checks.array(fn, "input", input, "iu", "non-negative integers")
    if idx.dtype.kind not in "iu" or idx.ndim != 1:
        raise bad_value(fn, "input", f"{idx.dtype} of shape {idx.shape}",
                        "a 1-D array of non-negative integers")
    if idx.size and idx.min() < 0:
        raise bad_value(fn, "input", int(idx.min()), "non-negative integers")
    bins = max(checks.integer(fn, "minlength", minlength, 0), int(idx.max()) + 1 if idx.size
               else 0)
    if weights is None:
        return ag_tensor(np.bincount(idx, minlength=bins).astype(np.int32), dtype="int32")
    w = _tensor(fn, "weights", weights)
    if w.shape != idx.shape:
        raise ShapeError(f"bincount: argument 'weights' has shape {w.shape}; expected "
                         f"input's {idx.shape}")
    from .creation import zeros
    from .ops import scatter_add
    return scatter_add(zeros(bins, dtype=w.dtype), 0, idx, w)


__all__ = ["median", "nanmedian", "kthvalue", "quantile", "nansum", "nanmean",
           "count_nonzero", "aminmax", "diff", "take_along_dim", "masked_select", "nonzero",
           "argwhere", "unique", "bincount"]

