"""Sorting along a dimension: ``sort``, ``argsort`` and ``topk``, with PyTorch's names,
arguments and results (``values, indices`` named tuples; the indices int32 tensors); and
searching sorted rows: ``searchsorted`` and ``bucketize`` (the ``searchsorted`` kernel pair).

The sort is the ``sort`` kernel pair's, along rows: the dimension is moved last first. It
is always stable (ties keep their order, ``stable`` is accepted for PyTorch's sake), -0
ties with +0, and NaNs sort past every number (last ascending, first descending), as
PyTorch's. The values' gradient goes back to where each value came from.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..errors import ArgumentTypeError, bad_axis, bad_shape, bad_value
from . import checks, device
from .logic import _operand, _to
from .low_precision import computes_in_float32
from .ops import NO_SKIP, _make, _moved_back, reshape, transpose
from .residency import adopt, handle
from .tensor import BOOL, DEFAULT_DTYPE, INT32, Tensor, is_float

SortResult = namedtuple("sort", ("values", "indices"))
TopkResult = namedtuple("topk", ("values", "indices"))


def _rows(fn: str, x: Tensor, dim) -> tuple:
    """x with ``dim`` moved last, as rows: (the rows tensor (rows, n), the axis order, the
    moved shape)."""
    dim = checks.integer(fn, "dim", dim)
    rank = x.ndim or 1
    if not -rank <= dim < rank:
        raise bad_axis(fn, "dim", dim, f"a dimension in [-{rank}, {rank}) of shape {x.shape}")
    if x.ndim == 0:
        return reshape(x, (1, 1)), [], ()
    dim %= x.ndim
    order = [d for d in range(x.ndim) if d != dim] + [dim]
    moved = tuple(x.shape[d] for d in order)
    last = x if dim == x.ndim - 1 else transpose(x, order)
    return reshape(last, (int(np.prod(moved[:-1])), moved[-1])), order, moved


def _sorted(fn: str, input, dim, descending: bool, k=None) -> tuple:
    """(values, indices) of ``input`` sorted along ``dim``, the first ``k`` of each line
    (None: all)."""
    x = _operand(fn, "input", input)
    checks.flag(fn, "descending", descending)
    rows_x, order, moved = _rows(fn, x, dim)
    rows, n = rows_x.shape
    if k is not None:
        k = checks.integer(fn, "k", k)
        if not 0 <= k <= n:
            raise bad_value(fn, "k", k, f"a count in [0, {n}] (the size of dim {dim})")
        if x.ndim:
            moved = moved[:-1] + (k,)
        else:                              # (a 0-d tensor gives itself, as PyTorch's)
            k = None
    backend = device.active()
    hx = handle(backend, rows_x)
    if x.dtype == BOOL:                    # (bools sort as int32 0 and 1)
        hx = backend.cast(hx, INT32)
    hv, hi = backend.sort(hx, bool(descending))
    if k is not None and k < n:
        hv = backend.strided(hv, (rows, k), (n, 1), 0)
        hi = backend.strided(hi, (rows, k), (n, 1), 0)
    if x.dtype == BOOL:
        hv = backend.cast(hv, BOOL)
    if is_float(x.dtype):
        def backward(g, needs):
            return (backend.gather_backward(hi, g, n, NO_SKIP),)
        values = _make(hv, (rows_x,), backward, backend)
    else:
        values = adopt(backend, Tensor(tuple(hv.shape), x.dtype), hv)
    indices = adopt(backend, Tensor(tuple(hi.shape), INT32), hi)
    return (_moved_back(reshape(values, moved), order),
            _moved_back(reshape(indices, moved), order))


@computes_in_float32
def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):  # noqa: A002
    """``(values, indices)`` of ``input`` sorted along ``dim``, as ``torch.sort``: the
    indices an int32 tensor. Always stable (``stable`` is accepted for PyTorch's sake);
    -0 ties with +0; NaNs sort past every number."""
    checks.flag("sort", "stable", stable)
    return SortResult(*_sorted("sort", input, dim, descending))


@computes_in_float32
def argsort(input, dim: int = -1, descending: bool = False,  # noqa: A002
            stable: bool = False) -> Tensor:
    """The int32 indices that sort ``input`` along ``dim``, as ``torch.argsort`` (stable,
    as ``sort``)."""
    checks.flag("argsort", "stable", stable)
    return _sorted("argsort", input, dim, descending)[1]


@computes_in_float32
def topk(input, k: int, dim: int = -1, largest: bool = True,  # noqa: A002
         sorted: bool = True):  # noqa: A002
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) elements
    along ``dim``, as ``torch.topk``, in sorted order whatever ``sorted`` says (PyTorch
    leaves the order open when it is False); among equal values the lower index first."""
    checks.flag("topk", "largest", largest)
    checks.flag("topk", "sorted", sorted)
    return TopkResult(*_sorted("topk", input, dim, bool(largest), k))


def _search_type(fn: str, name: str, x: Tensor):
    if x.dtype not in (DEFAULT_DTYPE, INT32, BOOL):
        raise ArgumentTypeError(f"{fn}: argument '{name}' has dtype {x.dtype}; expected "
                                "float32, int32 or bool (convert it with .float())")
    return x.dtype


@computes_in_float32
def searchsorted(sorted_sequence, values, *, out_int32: bool = False, right: bool = False,
                 side=None, sorter=None) -> Tensor:
    """Where each of ``values`` goes in the sorted innermost rows of ``sorted_sequence``,
    as ``torch.searchsorted``: the first index whose element is >= the value (> with
    ``right=True`` or ``side="right"``), as an int32 tensor of ``values``' shape (PyTorch's
    is int64 unless ``out_int32``). A 1-D ``sorted_sequence`` serves every value; else its
    leading dimensions are ``values``' and each row serves its line of values. ``sorter``
    (int indices that sort each row) reads the rows through it, the result indexing the
    sorted order. -0 equals +0; a NaN value's index is the row's length. No gradient."""
    fn = "searchsorted"
    checks.flag(fn, "out_int32", out_int32)
    checks.flag(fn, "right", right)
    if side is not None:
        if side not in ("left", "right"):
            raise bad_value(fn, "side", side, "'left', 'right' or None")
        if right and side == "left":
            raise bad_value(fn, "side", side, "'right' or None where right=True")
        right = side == "right"
    rows = _operand(fn, "sorted_sequence", sorted_sequence)
    if rows.ndim == 0:
        raise bad_shape(fn, "sorted_sequence", rows.shape, "at least one dimension")
    x = _operand(fn, "values", values, rows)
    kinds = {_search_type(fn, "sorted_sequence", rows), _search_type(fn, "values", x)}
    shared = rows.ndim == 1
    if not shared and (x.ndim != rows.ndim or x.shape[:-1] != rows.shape[:-1]):
        raise bad_shape(fn, "values", x.shape, f"the leading dimensions {rows.shape[:-1]} of "
                                               f"sorted_sequence {rows.shape}, then any "
                                               "length (or a 1-D sorted_sequence)")
    if sorter is not None:
        order = _operand(fn, "sorter", sorter)
        if is_float(order.dtype) or order.shape != rows.shape:
            raise bad_shape(fn, "sorter", order.shape, f"int indices of sorted_sequence's "
                                                       f"shape {rows.shape}")
        from .statistics import take_along_dim          # (statistics builds on this module)
        rows = take_along_dim(rows, order, dim=-1)
    dtype = DEFAULT_DTYPE if DEFAULT_DTYPE in kinds else INT32
    backend = device.active()
    rows, x = _to(backend, rows, dtype), _to(backend, x, dtype)
    m = rows.shape[-1]
    n = x.shape[-1] if x.ndim else 1
    found = backend.searchsorted(handle(backend, rows), handle(backend, x), max(n, 1), m,
                                 shared, bool(right))
    return adopt(backend, Tensor(x.shape, INT32), backend.reshape(found, x.shape))


@computes_in_float32
def bucketize(input, boundaries, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Tensor:
    """The bucket of each element of ``input`` among the 1-D sorted ``boundaries``, as
    ``torch.bucketize``: i with boundaries[i - 1] < x <= boundaries[i] (``right=True``:
    boundaries[i - 1] <= x < boundaries[i]), an int32 tensor of ``input``'s shape."""
    b = _operand("bucketize", "boundaries", boundaries)
    if b.ndim != 1:
        raise bad_shape("bucketize", "boundaries", b.shape, "one dimension")
    checks.flag("bucketize", "right", right)
    checks.flag("bucketize", "out_int32", out_int32)
    if isinstance(input, Tensor) or not checks.is_number(input):
        input = _operand("bucketize", "input", input)   # noqa: A001 - (named in errors)
    return searchsorted(b, input, right=right)


def _install_methods() -> None:
    Tensor.sort = lambda a, dim=-1, descending=False, stable=False: \
        sort(a, dim, descending, stable)
    Tensor.argsort = lambda a, dim=-1, descending=False, stable=False: \
        argsort(a, dim, descending, stable)
    Tensor.topk = lambda a, k, dim=-1, largest=True, sorted=True: \
        topk(a, k, dim, largest, sorted)


_install_methods()

__all__ = ["sort", "argsort", "topk", "searchsorted", "bucketize"]
