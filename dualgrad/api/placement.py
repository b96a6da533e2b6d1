"""Copies of a tensor with some of its elements replaced or added to, with PyTorch's names:
``index_fill``, ``index_copy``, ``index_add`` and ``scatter`` (and ``t[key] = value``'s
general case).

The positions written are known on the host (index arrays; an int32 tensor's are read
back), so a copy is one ``index_select`` over the tensor's elements followed by the new
values (``replaced``): where a position is written more than once, the last value wins
(PyTorch leaves that case unspecified), the same on both backends, and gradients flow to
the tensor's kept elements and to the values that landed.
"""
from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRange, InvalidValueError, bad_shape
from . import checks
from .indexing import _axis, concat, index_select
from .logic import _operand, to, where
from .ops import _tensor, mul, reshape, scatter_add
from .tensor import Tensor


def replaced(x: Tensor, positions: np.ndarray, values: Tensor) -> Tensor:
    """x with its flat ``positions`` (int64, any order, repeats allowed) given ``values``
    (as many, one per position, x's dtype), the last value of a repeated position winning."""
    if not positions.size:
        return x
    unique, first = np.unique(positions[::-1], return_index=True)
    source = np.arange(x.size, dtype=np.int64)
    source[unique] = x.size + (positions.size - 1 - first)
    everything = concat([reshape(x, (x.size,)), reshape(values, (positions.size,))])
    return reshape(index_select(everything, 0, source), x.shape)


def _index(fn: str, index) -> np.ndarray:
    """An integer array (an int32 tensor's values read back)."""
    value = index.numpy() if isinstance(index, Tensor) else index
    return checks.array(fn, "index", value, "iu", "integer indices (e.g. int64)")


def _in_range(fn: str, idx: np.ndarray, n: int, dim: int) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].reshape(-1)[0]
        raise IndexOutOfRange(f"{fn}: index {int(bad)} is out of range for dim {dim} of "
                              f"size {n}")


def _along(fn: str, x: Tensor, dim: int, index) -> tuple:
    """(dim, a 1-D index within x's dim) for the index_ ops."""
    if x.ndim == 0:
        raise bad_shape(fn, "input", x.shape, "at least one dimension")
    dim = _axis(fn, "dim", dim, x.ndim)
    idx = _index(fn, index)
    if idx.ndim > 1:
        raise bad_shape(fn, "index", idx.shape, "0 or 1 dimensions")
    idx = idx.reshape(-1).astype(np.int64)
    _in_range(fn, idx, x.shape[dim], dim)
    return dim, idx


def index_fill(input, dim: int, index, value) -> Tensor:  # noqa: A002 - PyTorch's names
    """``input`` with every element at positions ``index`` (1-D) along ``dim`` set to
    ``value`` (a number or a 0-d tensor), as ``torch.index_fill``; the gradient of input is
    0 there."""
    x = _tensor("index_fill", "input", input, any_dtype=True)
    dim, idx = _along("index_fill", x, dim, index)
    hit = np.zeros(x.shape[dim], bool)
    hit[idx] = True
    mask = hit.reshape(tuple(-1 if d == dim else 1 for d in range(x.ndim)))
    fill = value if isinstance(value, Tensor) else _operand("index_fill", "value", value, x)
    if fill.ndim:
        raise bad_shape("index_fill", "value", fill.shape, "a number or a 0-d tensor")
    return where(mask, to(fill, x.dtype), x)


def _slices(fn: str, x: Tensor, dim: int, idx: np.ndarray, source: Tensor) -> None:
    """source must be x's shape but len(idx) along dim: a slice for each index."""
    wanted = x.shape[:dim] + (idx.size,) + x.shape[dim + 1:]
    if source.shape != wanted:
        raise bad_shape(fn, "source", source.shape, f"{wanted}: input's shape with "
                                                    f"len(index) = {idx.size} along dim {dim}")


def index_copy(input, dim: int, index, source) -> Tensor:  # noqa: A002
    """``input`` with ``source``'s slices written at positions ``index`` (1-D) along
    ``dim``, as ``torch.index_copy``: out[..., index[i], ...] = source[..., i, ...], source
    of input's shape but ``len(index)`` along dim; a repeated position takes its last
    slice."""
    fn = "index_copy"
    x = _tensor(fn, "input", input, any_dtype=True)
    dim, idx = _along(fn, x, dim, index)
    src = _operand(fn, "source", source, x)
    _slices(fn, x, dim, idx, src)
    grid = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    return replaced(x, np.take(grid, idx, axis=dim).reshape(-1), to(src, x.dtype))


def index_add(input, dim: int, index, source, *, alpha=1) -> Tensor:  # noqa: A002
    """``input`` with ``alpha * source`` added at positions ``index`` (1-D) along ``dim``,
    as ``torch.index_add``: out[..., index[i], ...] += alpha * source[..., i, ...], source
    as index_copy's; repeated positions accumulate. ``scatter_add`` with the index spread
    over source's shape (the same sums, the same bits on both backends)."""
    fn = "index_add"
    x = _tensor(fn, "input", input)
    src = _tensor(fn, "source", source, x)
    dim, idx = _along(fn, x, dim, index)
    _slices(fn, x, dim, idx, src)
    alpha = checks.number(fn, "alpha", alpha)
    lined = idx.reshape(tuple(-1 if d == dim else 1 for d in range(x.ndim)))
    return scatter_add(x, dim, np.broadcast_to(lined, src.shape),
                       src if alpha == 1 else mul(src, alpha))


def scatter(input, dim: int, index, src=None, *, value=None) -> Tensor:  # noqa: A002
    """``input`` with ``src``'s elements (or ``value``, a number) written at ``index``
    along ``dim``, as ``torch.scatter``: for dim 1 of a matrix out[i, index[i, j]] =
    src[i, j]. ``index`` has input's rank and sizes at most input's (but along dim) and
    src's; a position written more than once takes the last element in index's order (the
    case PyTorch leaves unspecified)."""
    fn = "scatter"
    x = _tensor(fn, "input", input, any_dtype=True)
    if value is None and (checks.is_number(src) or isinstance(src, (bool, np.bool_))):
        src, value = None, src                  # (scatter(x, dim, index, 2.0))
    if (src is None) == (value is None):
        raise InvalidValueError(f"{fn}: expected src (a tensor) or value (a number), one "
                                "of them")
    if x.ndim == 0:
        raise bad_shape(fn, "input", x.shape, "at least one dimension")
    dim = _axis(fn, "dim", dim, x.ndim)
    idx = _index(fn, index).astype(np.int64)
    if idx.ndim != x.ndim or any(i > n for d, (i, n) in enumerate(zip(idx.shape, x.shape))
                                 if d != dim):
        raise bad_shape(fn, "index", idx.shape, f"input's rank and sizes at most its "
                                                f"{x.shape} (but along dim {dim})")
    _in_range(fn, idx, x.shape[dim], dim)
    region = tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(idx.shape))
    grid = np.arange(x.size, dtype=np.int64).reshape(x.shape)[region]
    positions = np.take_along_axis(grid, idx, axis=dim).reshape(-1)
    if src is None:
        values = _operand(fn, "value", value, x)
        if values.ndim:
            raise bad_shape(fn, "value", values.shape, "a number")
        return replaced(x, positions, reshape(to(values, x.dtype), (1,)).expand(idx.size)
                        if idx.size else values)
    src = _operand(fn, "src", src, x)
    if src.ndim != x.ndim or any(i > s for i, s in zip(idx.shape, src.shape)):
        raise bad_shape(fn, "src", src.shape, f"input's rank and at least the index's sizes "
                                              f"{idx.shape}")
    kept = src[tuple(slice(0, s) for s in idx.shape)] if src.shape != idx.shape else src
    return replaced(x, positions, to(kept, x.dtype))


def _install_methods() -> None:
    Tensor.index_fill = lambda t, dim, index, value: index_fill(t, dim, index, value)
    Tensor.index_copy = lambda t, dim, index, source: index_copy(t, dim, index, source)
    Tensor.index_add = lambda t, dim, index, source, *, alpha=1: index_add(
        t, dim, index, source, alpha=alpha)
    Tensor.scatter = lambda t, dim, index, src=None, *, value=None: scatter(
        t, dim, index, src, value=value)


_install_methods()

__all__ = ["index_fill", "index_copy", "index_add", "scatter"]
