"""Tensors arranged from others, with PyTorch's names: ``clone``, ``narrow``, ``select``,
``tile``, ``meshgrid``, ``index_add``. Each is a composition of ops the suite checks (views, joins and
broadcasts that move elements as they are), so results agree between the backends bit for
bit and gradients come from the parts'."""
from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRange, bad_shape, bad_type, bad_value
from . import checks
from .indexing import _axis, expand, getitem, repeat
from .ops import _tensor, mul, reshape, scatter_add
from .tensor import Tensor


def clone(input) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """A copy of ``input`` whose gradient flows back to it, as ``torch.clone``."""
    return _tensor("clone", "input", input, any_dtype=True, low_precision=True).clone()


def narrow(input, dim: int, start: int, length: int) -> Tensor:  # noqa: A002
    """``length`` elements of ``input`` along ``dim`` from ``start``, as ``torch.narrow``
    (a copy)."""
    return _tensor("narrow", "input", input, any_dtype=True,
                   low_precision=True).narrow(dim, start, length)


def select(input, dim: int, index: int) -> Tensor:  # noqa: A002
    """The slice of ``input`` at ``index`` along ``dim``, that axis removed, as
    ``torch.select`` (``x.select(1, 0)`` is ``x[:, 0]``; a copy)."""
    x = _tensor("select", "input", input, any_dtype=True, low_precision=True)
    if x.ndim == 0:
        raise bad_shape("select", "input", x.shape, "at least one dimension")
    dim = _axis("select", "dim", dim, x.ndim)
    n = x.shape[dim]
    index = checks.integer("select", "index", index)
    if not -n <= index < n:
        raise IndexOutOfRange(f"select: index {index} is out of range for dim {dim} of size "
                              f"{n}")
    return getitem(x, (slice(None),) * dim + (index,))


def tile(input, dims) -> Tensor:  # noqa: A002
    """``input`` repeated ``dims[d]`` times along each axis, as ``torch.tile``: fewer
    ``dims`` than axes are ones in front (``tile(x, (2,))`` repeats the last axis), more
    add leading axes (``Tensor.repeat``'s rule)."""
    x = _tensor("tile", "input", input, any_dtype=True, low_precision=True)
    if not isinstance(dims, (tuple, list)):
        raise bad_type("tile", "dims", dims, "a tuple of ints")
    dims = tuple(checks.integer("tile", f"dims[{k}]", r, 0) for k, r in enumerate(dims))
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def meshgrid(*tensors, indexing: str = "ij") -> tuple:
    """Coordinate grids of 1-D tensors, as ``torch.meshgrid``: each output has every
    input's length as an axis and varies along its own; ``indexing="xy"`` swaps the first
    two axes (NumPy's default; PyTorch's and this one is "ij")."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise bad_value("meshgrid", "tensors", (), "at least one 1-D tensor")
    if indexing not in ("ij", "xy"):
        raise bad_value("meshgrid", "indexing", indexing, "'ij' or 'xy'")
    items = [_tensor("meshgrid", f"tensors[{k}]", t, any_dtype=True, low_precision=True)
             for k, t in enumerate(tensors)]
    for k, t in enumerate(items):
        if t.ndim > 1:
            raise bad_shape("meshgrid", f"tensors[{k}]", t.shape, "0 or 1 dimensions")
        if t.dtype != items[0].dtype:
            raise bad_type("meshgrid", f"tensors[{k}]", t, f"a {items[0].dtype} tensor, as "
                                                           "tensors[0]")
    lengths = [t.size for t in items]
    axes = list(range(len(items)))
    if indexing == "xy" and len(items) > 1:
        axes[0], axes[1] = 1, 0
    shape = tuple(lengths[axes.index(a)] for a in range(len(items)))
    grids = []
    for t, axis in zip(items, axes):
        lined = reshape(t, tuple(-1 if a == axis else 1 for a in range(len(items))))
        grids.append(expand(lined, shape))
    return tuple(grids)



def index_add(input, dim: int, index, source, *, alpha=1) -> Tensor:  # noqa: A002
    """``input`` with ``alpha * source`` added at positions ``index`` along ``dim``, as
    ``torch.index_add``: out[..., index[i], ...] += alpha * source[..., i, ...], ``index``
    1-D (an integer array or int32 tensor) in [0, input.shape[dim]), ``source`` of input's
    shape but ``len(index)`` along dim; repeated positions accumulate. ``scatter_add`` with
    the index spread over source's shape (the same sums, the same bits on both backends)."""
    fn = "index_add"
    x = _tensor(fn, "input", input)
    src = _tensor(fn, "source", source, x)
    if x.ndim == 0:
        raise bad_shape(fn, "input", x.shape, "at least one dimension")
    dim = _axis(fn, "dim", dim, x.ndim)
    idx = checks.array(fn, "index", index.numpy() if isinstance(index, Tensor) else index,
                       "iu", "integer indices (e.g. int64)")
    if idx.ndim > 1:
        raise bad_shape(fn, "index", idx.shape, "0 or 1 dimensions")
    idx = idx.reshape(-1)
    n = x.shape[dim]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise IndexOutOfRange(f"{fn}: index {int(bad)} is out of range for dim {dim} of "
                              f"size {n}")
    wanted = x.shape[:dim] + (idx.size,) + x.shape[dim + 1:]
    if src.shape != wanted:
        raise bad_shape(fn, "source", src.shape, f"{wanted}: input's shape with "
                                                 f"len(index) = {idx.size} along dim {dim}")
    alpha = checks.number(fn, "alpha", alpha)
    lined = idx.reshape(tuple(-1 if d == dim else 1 for d in range(x.ndim)))
    return scatter_add(x, dim, np.broadcast_to(lined, wanted),
                       src if alpha == 1 else mul(src, alpha))

def _install_methods() -> None:
    Tensor.select = lambda t, dim, index: select(t, dim, index)
    Tensor.index_add = lambda t, dim, index, source, *, alpha=1: index_add(
        t, dim, index, source, alpha=alpha)
    Tensor.tile = lambda t, *dims: tile(t, dims[0] if len(dims) == 1 and
                                        isinstance(dims[0], (tuple, list)) else dims)


_install_methods()

__all__ = ["clone", "narrow", "select", "tile", "meshgrid", "index_add"]
