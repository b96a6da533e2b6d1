"""Tensors arranged from others, with PyTorch's names: ``clone``, ``narrow``, ``select``,
``tile``, ``meshgrid``, ``triu_indices``, ``tril_indices``, ``rot90``,
``cartesian_prod``, ``block_diag`` and ``Tensor.unfold`` (windows along an axis).

Each is a composition of ops the suite checks (views, joins and broadcasts that move
elements as they are), so results agree between the backends bit for bit and gradients
come from the parts'."""
from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRange, bad_shape, bad_type, bad_value
from . import checks, creation
from .indexing import (_axis, concat, expand, flip, getitem, index_select, movedim, pad,
                       repeat, stack, swapaxes)
from .ops import _tensor, reshape
from .tensor import Tensor, is_float


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


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The (row, column) indices of an upper triangle, a (2, N) int32 tensor in row-major
    order, as ``torch.triu_indices`` (``offset``: above the diagonal by that many)."""
    return _triangle("triu_indices", np.triu_indices, row, col, offset, dtype, device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The (row, column) indices of a lower triangle, as ``torch.tril_indices``."""
    return _triangle("tril_indices", np.tril_indices, row, col, offset, dtype, device)


def _triangle(fn: str, indices, row, col, offset, dtype, where) -> Tensor:
    rows = checks.integer(fn, "row", row, 0)
    cols = checks.integer(fn, "col", col, 0)
    offset = checks.integer(fn, "offset", offset)
    return creation.tensor(np.stack(indices(rows, offset, cols)).astype(np.int32),
                           dtype="int32" if dtype is None else dtype, device=where)


def rot90(input, k: int = 1, dims=(0, 1)) -> Tensor:  # noqa: A002
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
    axis toward the second, as ``torch.rot90`` (and NumPy's)."""
    x = _tensor("rot90", "input", input, any_dtype=True, low_precision=True)
    k = checks.integer("rot90", "k", k) % 4
    if not isinstance(dims, (tuple, list)) or len(dims) != 2:
        raise bad_type("rot90", "dims", dims, "two dimensions")
    a, b = (_axis("rot90", "dims", d, max(x.ndim, 1)) for d in dims)
    if a == b or x.ndim < 2:
        raise bad_value("rot90", "dims", dims, "two different dimensions of input")
    if k == 0:
        return x.clone()
    if k == 2:
        return flip(x, (a, b))
    return swapaxes(flip(x, (b if k == 1 else a,)), a, b)


def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element of each 1-D tensor, a row each in order, as
    ``torch.cartesian_prod`` (one tensor: itself)."""
    grids = meshgrid(*tensors, indexing="ij")
    if len(grids) == 1:
        return grids[0]
    return stack([reshape(g, (g.size,)) for g in grids], 1)


def block_diag(*tensors) -> Tensor:
    """The tensors (0-, 1- or 2-D, one dtype) along the diagonal of a matrix of zeros, as
    ``torch.block_diag``."""
    blocks = []
    for k, t in enumerate(tensors):
        b = _tensor("block_diag", f"tensors[{k}]", t, any_dtype=True, low_precision=True)
        if b.ndim > 2:
            raise bad_shape("block_diag", f"tensors[{k}]", b.shape, "0, 1 or 2 dimensions")
        if blocks and b.dtype != blocks[0].dtype:
            raise bad_type("block_diag", f"tensors[{k}]", b, f"a {blocks[0].dtype} tensor, as "
                                                             "tensors[0]")
        blocks.append(reshape(b, (1, 1) if b.ndim == 0 else (1, b.size) if b.ndim == 1
                              else b.shape))
    if not blocks:
        return creation.zeros(1, 0)
    width, left, rows = sum(b.shape[1] for b in blocks), 0, []
    for b in blocks:
        rows.append(pad(b, (left, width - left - b.shape[1])) if is_float(b.dtype) else
                    concat([creation.zeros(b.shape[0], left, dtype=b.dtype), b,
                            creation.zeros(b.shape[0], width - left - b.shape[1],
                                           dtype=b.dtype)], 1))
        left += b.shape[1]
    return concat(rows, 0)


def _windows(self, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold`` (PyTorch's, not F.unfold's image columns): the windows of ``size``
    elements ``step`` apart along ``dimension``, that axis their count and a last axis of
    ``size`` (copies; gradients add back where windows overlap)."""
    fn = "Tensor.unfold"
    dim = _axis(fn, "dimension", dimension, max(self.ndim, 1))
    n = self.shape[dim] if self.ndim else 1
    size = checks.integer(fn, "size", size, 0, n + 1)
    step = checks.integer(fn, "step", step, 1)
    count = (n - size) // step + 1
    starts = np.arange(count, dtype=np.int64)[:, None] * step
    picked = index_select(reshape(self, (1,)) if not self.ndim else self, dim,
                          starts + np.arange(size, dtype=np.int64))
    return movedim(picked, dim + 1, -1) if self.ndim else reshape(picked, (count, size))


def _install_methods() -> None:
    Tensor.select = lambda t, dim, index: select(t, dim, index)
    Tensor.unfold = _windows
    Tensor.tile = lambda t, *dims: tile(t, dims[0] if len(dims) == 1 and
                                        isinstance(dims[0], (tuple, list)) else dims)


_install_methods()

__all__ = ["clone", "narrow", "select", "tile", "meshgrid", "triu_indices", "tril_indices",
           "rot90", "cartesian_prod", "block_diag"]
