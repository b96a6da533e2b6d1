"""Sorting along a dimension: ``sort``, ``argsort`` and ``topk``, with PyTorch's names,
arguments and results (``values, indices`` named tuples; the indices int32 tensors).

The sort is the ``sort`` kernel pair's, along rows: the dimension is moved last first. It
is always stable (ties keep their order, ``stable`` is accepted for PyTorch's sake), -0
ties with +0, and NaNs sort past every number (last ascending, first descending), as
PyTorch's. The values' gradient goes back to where each value came from.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..errors import bad_axis, bad_value
from . import checks, device
from .logic import _operand
from .low_precision import computes_in_float32
from .ops import NO_SKIP, _make, _moved_back, reshape, transpose
from .residency import adopt, handle
from .tensor import BOOL, INT32, Tensor, is_float

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


def _install_methods() -> None:
    Tensor.sort = lambda a, dim=-1, descending=False, stable=False: \
        sort(a, dim, descending, stable)
    Tensor.argsort = lambda a, dim=-1, descending=False, stable=False: \
        argsort(a, dim, descending, stable)
    Tensor.topk = lambda a, k, dim=-1, largest=True, sorted=True: \
        topk(a, k, dim, largest, sorted)


_install_methods()

__all__ = ["sort", "argsort", "topk"]
