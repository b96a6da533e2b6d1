"""Indexing, views and joining: ``t[...]``, squeeze, unsqueeze, flatten, expand /
broadcast_to, flip, index_select, concat / stack and split / chunk, with PyTorch's rules.

Ints, slices (any step, negative too), ``None`` and ``...`` select a strided part of the
tensor: one ``strided`` kernel copies it, and ``strided_backward`` writes its gradient back
where each element came from (the positions are distinct). One integer array, or a boolean mask, as
an index selects whole rows along an axis through ``index_select`` (the embedding kernel),
whose gradient adds repeated rows up. Results are copies, not views sharing storage: no op
writes into a tensor, so the difference cannot be seen.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..errors import (IndexOutOfRange, IndexShapeError, bad_axis, bad_shape, bad_type,
                      bad_value)
from ..shapes import MAX_RANK
from . import checks, device
from .low_precision import computes_in_float32, refuse_low_precision
from .ops import _make, _sum_to, _tensor, class_indices, embedding, reshape, transpose
from .residency import adopt, handle
from .tensor import Tensor, is_float


def _contiguous_strides(shape) -> list:
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= shape[d]
    return strides


def _strided(fn: str, x: Tensor, shape: tuple, strides: list, offset: int,
             injective: bool = True) -> Tensor:
    """The autograd op of a strided read of x: the scatter back where it is injective, a
    sum over the repeated (stride 0) axes where it is not."""
    if len(shape) > MAX_RANK:
        raise bad_shape(fn, "result", shape, f"at most {MAX_RANK} dimensions")
    backend = device.active()
    hy = backend.strided(handle(backend, x), tuple(shape), tuple(strides), offset)
    size, x_shape = x.size, x.shape           # (rules keep no input they do not read)

    def backward(g, needs):
        if injective:
            return (backend.reshape(backend.strided_backward(g, size, tuple(strides), offset),
                                    x_shape),)
        return (_sum_to(backend, g, x_shape),)
    return _make(hy, (x,), backward, backend, dtype=x.dtype)


# ---------------------------------------------------------------------------------------------
# t[key]

def _bad_index_shape(arg: str, shape, expected: str) -> IndexShapeError:
    return IndexShapeError(f"getitem: argument '{arg}' has shape {tuple(shape)}; expected "
                           f"{expected}")


def _is_array_index(k) -> bool:
    return isinstance(k, (np.ndarray, list)) and not isinstance(k, Tensor)


def _expand_ellipsis(key: tuple, ndim: int) -> list:
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise bad_value("getitem", "key", key, "at most one '...'")
    if used > ndim:
        raise IndexOutOfRange(f"getitem: too many indices ({used}) for a tensor with {ndim} "
                              f"dimensions")
    key = list(key)
    if ellipses:
        i = ellipses[0]
        key[i:i + 1] = [slice(None)] * (ndim - used)
    else:
        key += [slice(None)] * (ndim - used)
    return key


def _basic(x: Tensor, key: list):
    """(shape, strides, offset, where each consumed axis of x lands in the result: its
    position, or None where an int dropped it)."""
    shape, strides, offset, lands = [], [], 0, []
    src = _contiguous_strides(x.shape)
    axis = 0
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        n, stride = x.shape[axis], src[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            lands.append(len(shape))
            shape.append(count)
            strides.append(stride * step)
            if count:
                offset += start * stride
        else:
            i = checks.integer("getitem", "key", k)
            if not -n <= i < n:
                raise IndexOutOfRange(f"getitem: index {i} is out of range for axis {axis} "
                                      f"of size {n}")
            offset += (i % n) * stride
            lands.append(None)
        axis += 1
    return shape, strides, offset, lands


@computes_in_float32
def getitem(x: Tensor, key) -> Tensor:
    """``x[key]`` with NumPy's and PyTorch's rules for ints, slices, ``None``, ``...``,
    integer arrays (several broadcast together) and a boolean mask."""
    refuse_low_precision("getitem", "x", x)
    key = key if isinstance(key, tuple) else (key,)
    # An int32 or bool tensor indexes as its values, read to the host (the result's shape
    # depends on them, as in PyTorch, which waits for them too).
    key = tuple(_as_index(k.numpy() if isinstance(k, Tensor) and k.dtype.kind in "biu"
                          else k) for k in key)
    for k in key:
        if isinstance(k, Tensor):
            raise bad_type("getitem", "key", k,
                           "ints, slices, None, ..., index arrays, or an int32 or bool "
                           "tensor (a float tensor cannot index)")
        if not (k is None or k is Ellipsis or isinstance(k, (slice, bool)) or
                _is_array_index(k) or checks.is_number(k)):
            raise bad_type("getitem", "key", k, "ints, slices, None, ... or index arrays")
    arrays = [i for i, k in enumerate(key) if _is_array_index(k)]
    if builtins.any(isinstance(k, bool) for k in key):
        if arrays:
            raise bad_value("getitem", "key", key, "a bool (a 0-d mask) beside ints, slices, "
                            "None and ... only (not beside index arrays)")
        return _with_bools(x, key)
    if len(key) == 1 and arrays and np.asarray(key[0]).dtype.kind == "b":
        return _masked(x, key, np.asarray(key[0]))
    if arrays:
        return _advanced(x, _masks_as_arrays(x, key))
    return _strided_key(x, key)


def _as_index(k):
    """An index as getitem reads it: a bool or a 0-d boolean array as a Python bool (a 0-d
    mask), a list as an array (an empty one of integers, as PyTorch reads ``[]``)."""
    if isinstance(k, (bool, np.bool_)) or (isinstance(k, np.ndarray) and k.ndim == 0 and
                                            k.dtype.kind == "b"):
        return bool(k)
    if isinstance(k, list):
        array = np.asarray(k)
        return array.astype(np.int64) if array.size == 0 else array
    return k


def _with_bools(x: Tensor, key: tuple) -> Tensor:
    """x[key] where key holds bools, 0-d masks, as PyTorch reads them: together they add
    one axis, of size 1 if all are True else 0, where they stand if they are neighbours in
    the key, else first."""
    at = [i for i, k in enumerate(key) if isinstance(k, bool)]
    rest = [k for k in key if not isinstance(k, bool)]
    place = at[0] if at == list(range(at[0], at[0] + len(at))) else 0
    plain = tuple(rest[:place]) + (None,) + tuple(rest[place:])
    used = builtins.sum(1 for k in plain if k is not None and k is not Ellipsis)
    axis = builtins.sum(x.ndim - used if k is Ellipsis else int(k is None or
                                                                isinstance(k, slice))
                        for k in plain[:place])
    y = _strided_key(x, plain)
    if builtins.all(key[i] for i in at):
        return y
    return _strided_key(y, tuple(slice(0, 0) if d == axis else slice(None)
                                 for d in range(y.ndim)))


def _masks_as_arrays(x: Tensor, key: tuple) -> tuple:
    """``key`` with each boolean mask replaced by the integer arrays of its nonzero
    positions (one a dimension it covers), as PyTorch reads a mask beside other indices."""
    out, axis = [], 0
    named = builtins.sum(1 for k in key if k is not None and k is not Ellipsis and
                         not (_is_array_index(k) and np.asarray(k).dtype.kind == "b")) + \
        builtins.sum(np.asarray(k).ndim for k in key
                     if _is_array_index(k) and np.asarray(k).dtype.kind == "b")
    for k in key:
        if k is Ellipsis:
            axis += x.ndim - named
        elif _is_array_index(k) and np.asarray(k).dtype.kind == "b":
            mask = np.asarray(k)
            if mask.ndim == 0 or mask.shape != x.shape[axis:axis + mask.ndim]:
                raise _bad_index_shape("mask", mask.shape,
                                       f"the sizes {x.shape[axis:axis + mask.ndim]} of the "
                                       f"dimensions it covers, from {axis}")
            out.extend(np.nonzero(mask))
            axis += mask.ndim
            continue
        elif k is not None:
            axis += 1
        out.append(k)
    return tuple(out)


def _strided_key(x: Tensor, key: tuple) -> Tensor:
    shape, strides, offset, _ = _basic(x, _expand_ellipsis(key, x.ndim))
    return _strided("getitem", x, tuple(shape), strides, offset)


def _advanced(x: Tensor, key: tuple) -> Tensor:
    """Integer arrays, broadcast together, pick elements along the axes they index, as in
    PyTorch: the broadcast shape takes the place of those axes where they are neighbours in
    the key (ints select first, as PyTorch's, where NumPy counts them as arrays), else comes
    first. The other indices are applied first (a strided view); the indexed axes are then
    moved first and merged, and one index_select takes the flat positions."""
    marks = {}                        # id of the slice standing in for an index -> array
    stand_ins = []
    for k in key:
        if _is_array_index(k):
            value = np.asarray(k)
            if value.dtype.kind not in "iu":
                raise bad_value("getitem", "key", key,
                                "integer index arrays (a boolean mask only alone: t[mask])")
            mark = slice(None)
            marks[id(mark)] = value
            stand_ins.append(mark)
        else:
            stand_ins.append(k)
    expanded = _expand_ellipsis(tuple(stand_ins), x.ndim)
    # positions among the indices that leave an axis (ints select first, as in PyTorch,
    # so arrays with only ints between them are neighbours)
    picked, positions, axis, position = [], [], 0, 0
    for k in expanded:
        if id(k) in marks:
            picked.append((axis, marks[id(k)]))
            positions.append(position)
        position += k is None or isinstance(k, slice)
        axis += k is not None
    shape, strides, offset, lands = _basic(x, expanded)
    part = _strided("getitem", x, tuple(shape), strides, offset)
    dims = [lands[a] for a, _ in picked]
    sizes = [part.shape[d] for d in dims]
    for (a, index), n in zip(picked, sizes):
        if index.size and (index.min() < -n or index.max() >= n):
            bad = index[(index < -n) | (index >= n)].reshape(-1)[0]
            raise IndexOutOfRange(f"getitem: index {int(bad)} is out of range for axis {a} "
                                  f"of size {n}")
    try:
        together = np.broadcast_shapes(*(index.shape for _, index in picked))
    except ValueError:
        raise _bad_index_shape("key", tuple(index.shape for _, index in picked),
                               "index arrays that broadcast together") from None
    flat = np.ravel_multi_index(tuple(np.broadcast_to(np.where(index < 0, index + n, index),
                                                      together)
                                      for (_, index), n in zip(picked, sizes)), tuple(sizes))
    rest = [d for d in range(part.ndim) if d not in dims]
    order = dims + rest
    moved = part if order == sorted(order) else transpose(part, order)
    merged = reshape(moved, (int(np.prod(sizes)),) + tuple(part.shape[d] for d in rest))
    out = index_select(merged, 0, flat, fn="getitem")
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    lead, first = len(together), dims[0]
    if not adjacent or first == 0 or not lead:
        return out
    # the broadcast axes moved to where the indexed axes were
    back = list(range(lead, lead + first)) + list(range(lead)) + \
        list(range(lead + first, out.ndim))
    return transpose(out, back)


def _masked(x: Tensor, key: tuple, mask: np.ndarray) -> Tensor:
    if len(key) != 1:
        raise bad_value("getitem", "key", key,
                        "a boolean mask alone (t[mask]; with other indices it is not "
                        "supported yet)")
    if mask.ndim == 0 or mask.shape != x.shape[:mask.ndim]:
        raise _bad_index_shape("mask", mask.shape,
                               f"the leading dimensions of the tensor's shape {x.shape}")
    rows = int(np.prod(mask.shape))
    flat = reshape(x, (rows,) + x.shape[mask.ndim:])
    return index_select(flat, 0, np.flatnonzero(mask), fn="getitem")


# ---------------------------------------------------------------------------------------------
# Selections and views

@computes_in_float32
def index_select(x, dim: int, index, fn: str = "index_select") -> Tensor:
    """The slices of ``x`` at positions ``index`` (integer array, any shape, negative
    counting from the end) along ``dim``: the result has index's shape in place of that
    axis (a 0-d index keeps the axis, of size 1, as PyTorch's). Gradients of repeated
    positions add up. Of any dtype."""
    x = _tensor(fn, "x", x, any_dtype=True)
    if x.ndim == 0:
        raise bad_shape(fn, "x", x.shape, "at least one dimension")
    dim = _axis(fn, "dim", dim, x.ndim)
    n = x.shape[dim]
    idx = checks.array(fn, "index", index, "iu", "integer indices (e.g. int64)")
    idx = idx.reshape(-1) if idx.ndim == 0 else idx
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)].reshape(-1)[0]
        raise IndexOutOfRange(f"{fn}: index {int(bad)} is out of range for axis {dim} of "
                              f"size {n}")
    idx = np.where(idx < 0, idx + n, idx)
    out_shape = x.shape[:dim] + idx.shape + x.shape[dim + 1:]
    if len(out_shape) > MAX_RANK:
        raise bad_shape(fn, "index", idx.shape,
                        f"a shape leaving at most {MAX_RANK} dimensions in the result")
    moved = x if dim == 0 else transpose(x, (dim,) + tuple(d for d in range(x.ndim)
                                                             if d != dim))
    table = reshape(moved, (n, int(np.prod(moved.shape[1:]))))
    positions = class_indices(fn, "index", idx.reshape(-1), None, n)
    if is_float(x.dtype):
        rows = embedding(table, positions)
    else:                              # (no gradient: rows moved as bits)
        backend = device.active()
        h = backend.embedding(handle(backend, table), backend.indices(positions))
        rows = adopt(backend, Tensor(tuple(h.shape), x.dtype), h)
    picked = reshape(rows, (idx.size,) + moved.shape[1:])
    if dim:
        order = tuple(range(1, dim + 1)) + (0,) + tuple(range(dim + 1, x.ndim))
        picked = transpose(picked, order)
    return reshape(picked, out_shape)


def _axis(fn: str, name: str, dim, rank: int) -> int:
    dim = checks.integer(fn, name, dim)
    if not -rank <= dim < rank:
        raise bad_axis(fn, name, dim, f"a dimension in [-{rank}, {rank})")
    return dim % rank


@computes_in_float32
def squeeze(x, dim=None) -> Tensor:
    """x without axes of size 1 (``dim``: only those named, an int or a tuple; a named axis
    whose size is not 1 stays, as in PyTorch)."""
    x = _tensor("squeeze", "x", x, any_dtype=True)
    if dim is None:
        dims = {d for d, n in enumerate(x.shape) if n == 1}
    else:
        items = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {_axis("squeeze", "dim", d, max(x.ndim, 1)) for d in items}
    return reshape(x, tuple(n for d, n in enumerate(x.shape) if not (d in dims and n == 1)))


@computes_in_float32
def unsqueeze(x, dim: int) -> Tensor:
    """x with a new axis of size 1 at ``dim`` (in [-ndim - 1, ndim])."""
    x = _tensor("unsqueeze", "x", x, any_dtype=True)
    dim = _axis("unsqueeze", "dim", dim, x.ndim + 1)
    return reshape(x, x.shape[:dim] + (1,) + x.shape[dim:])


@computes_in_float32
def flatten(x, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """x with the axes from ``start_dim`` to ``end_dim`` (inclusive) merged into one."""
    x = _tensor("flatten", "x", x, any_dtype=True)
    if x.ndim == 0:
        return reshape(x, (1,))
    start = _axis("flatten", "start_dim", start_dim, x.ndim)
    end = _axis("flatten", "end_dim", end_dim, x.ndim)
    if start > end:
        raise bad_value("flatten", "end_dim", end_dim, f"an axis at or after start_dim "
                                                       f"({start_dim})")
    merged = int(np.prod(x.shape[start:end + 1]))
    return reshape(x, x.shape[:start] + (merged,) + x.shape[end + 1:])


@computes_in_float32
def broadcast_to(x, shape) -> Tensor:
    """x repeated along its axes of size 1 (and new leading axes) to ``shape``, as NumPy's
    broadcasting; the gradient sums over the repeats."""
    x = _tensor("broadcast_to", "x", x, any_dtype=True)
    try:
        shape = tuple(int(n) for n in shape)
    except TypeError:
        raise bad_type("broadcast_to", "shape", shape, "a tuple of ints") from None
    try:
        if np.broadcast_shapes(x.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise bad_shape("broadcast_to", "x", x.shape,
                        f"a shape that broadcasts to {shape}") from None
    src = _contiguous_strides(x.shape)
    lead = len(shape) - x.ndim
    strides = [0] * lead + [0 if n == 1 and m != 1 else s
                            for n, m, s in zip(x.shape, shape[lead:], src)]
    return _strided("broadcast_to", x, shape, strides, 0, injective=False)


@computes_in_float32
def expand(x, *sizes) -> Tensor:
    """PyTorch's ``expand``: broadcast_to, where -1 keeps an axis's size."""
    x = _tensor("expand", "x", x, any_dtype=True)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise bad_value("expand", "sizes", sizes, f"at least {x.ndim} sizes")
    shape = tuple(x.shape[d - lead] if n == -1 and d >= lead else n
                  for d, n in enumerate(sizes))
    return broadcast_to(x, shape)


@computes_in_float32
def flip(x, dims) -> Tensor:
    """x with the order of its elements reversed along ``dims`` (an int or a tuple)."""
    x = _tensor("flip", "x", x, any_dtype=True)
    items = dims if isinstance(dims, (tuple, list)) else (dims,)
    axes = {_axis("flip", "dims", d, max(x.ndim, 1)) for d in items}
    if len(axes) != len(items):
        raise bad_value("flip", "dims", dims, "each axis at most once")
    key = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))
    return _strided_key(x, key)


# ---------------------------------------------------------------------------------------------
# Joining and splitting

@computes_in_float32
def concat(tensors, dim: int = 0) -> Tensor:
    """The tensors joined along ``dim`` (their other sizes equal), as ``torch.cat``: each
    is written into its part of the result, and its gradient read back from there."""
    fn = "concat"
    try:
        items = list(tensors)
    except TypeError:
        raise bad_type(fn, "tensors", tensors, "a list of tensors") from None
    if not items:
        raise bad_value(fn, "tensors", tensors, "at least one tensor")
    items = [_tensor(fn, f"tensors[{k}]", t, items[0], any_dtype=True)
             for k, t in enumerate(items)]
    first = items[0]
    if first.ndim == 0:
        raise bad_shape(fn, "tensors[0]", first.shape, "at least one dimension")
    dim = _axis(fn, "dim", dim, first.ndim)
    for k, t in enumerate(items[1:], 1):
        if t.dtype != first.dtype:
            raise bad_type(fn, f"tensors[{k}]", t, f"dtype {first.dtype}, as tensors[0]")
        if t.ndim != first.ndim or builtins.any(t.shape[d] != first.shape[d]
                                                for d in range(first.ndim) if d != dim):
            raise bad_shape(fn, f"tensors[{k}]", t.shape,
                            f"tensors[0]'s sizes {first.shape} except along dim {dim}")
    shape = list(first.shape)
    shape[dim] = builtins.sum(t.shape[dim] for t in items)
    shape = tuple(shape)
    strides = _contiguous_strides(shape)
    starts = np.cumsum([0] + [t.shape[dim] for t in items])[:-1]
    backend = device.active()
    out = backend.empty(shape, first.dtype)
    size = int(np.prod(shape))
    for t, start in zip(items, starts):
        backend.strided_backward(handle(backend, t), size, tuple(strides),
                                 int(start) * strides[dim], out=out)

    shapes = [t.shape for t in items]

    def backward(g, needs):
        return tuple(backend.strided(g, s, tuple(strides), int(start) * strides[dim])
                     if need else None for s, start, need in zip(shapes, starts, needs))
    return _make(out, tuple(items), backward, backend, dtype=first.dtype)


@computes_in_float32
def stack(tensors, dim: int = 0) -> Tensor:
    """The tensors (all of one shape) stacked along a new axis ``dim``, as ``torch.stack``."""
    try:
        items = list(tensors)
    except TypeError:
        raise bad_type("stack", "tensors", tensors, "a list of tensors") from None
    if not items:
        raise bad_value("stack", "tensors", tensors, "at least one tensor")
    items = [_tensor("stack", f"tensors[{k}]", t, items[0], any_dtype=True)
             for k, t in enumerate(items)]
    for k, t in enumerate(items[1:], 1):
        if t.shape != items[0].shape:
            raise bad_shape("stack", f"tensors[{k}]", t.shape, f"tensors[0]'s {items[0].shape}")
    dim = _axis("stack", "dim", dim, items[0].ndim + 1)
    return concat([unsqueeze(t, dim) for t in items], dim)


@computes_in_float32
def split(x, split_size_or_sections, dim: int = 0) -> tuple:
    """x cut along ``dim`` into parts of ``split_size_or_sections`` elements (an int: the
    last part may be shorter) or of the listed sizes (summing to the axis), as
    ``torch.split``."""
    x = _tensor("split", "x", x, any_dtype=True)
    if x.ndim == 0:
        raise bad_shape("split", "x", x.shape, "at least one dimension")
    dim = _axis("split", "dim", dim, x.ndim)
    n = x.shape[dim]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [checks.integer("split", "split_size_or_sections", k, 0)
                 for k in split_size_or_sections]
        if builtins.sum(sizes) != n:
            raise bad_value("split", "split_size_or_sections", split_size_or_sections,
                            f"sizes summing to {n}, the size of dim {dim}")
    else:           # (a size of 0 only for an empty axis, as PyTorch's)
        step = checks.integer("split", "split_size_or_sections", split_size_or_sections,
                              0 if n == 0 else 1)
        sizes = [builtins.min(step, n - k) for k in range(0, n, step)] if step else [0]
        sizes = sizes or [0]
    parts, start = [], 0
    for size in sizes:
        key = (slice(None),) * dim + (slice(start, start + size),)
        parts.append(getitem(x, key))
        start += size
    return tuple(parts)


@computes_in_float32
def chunk(x, chunks: int, dim: int = 0) -> tuple:
    """x cut into ``chunks`` parts along ``dim`` of ceil(n / chunks) elements each (the last
    shorter; fewer parts where they run out), as ``torch.chunk``."""
    x = _tensor("chunk", "x", x, any_dtype=True)
    chunks = checks.integer("chunk", "chunks", chunks, 1)
    if x.ndim == 0:
        raise bad_shape("chunk", "x", x.shape, "at least one dimension")
    n = x.shape[_axis("chunk", "dim", dim, x.ndim)]
    if n == 0:                          # (as many empty parts as asked, as PyTorch's)
        return split(x, [0] * chunks, dim)
    return split(x, -(-n // chunks), dim)


@computes_in_float32
def roll(x, shifts, dims=None) -> Tensor:
    """x with its elements moved ``shifts`` places along ``dims`` (ints or tuples of equal
    length), those pushed past the end coming back at the start, as ``torch.roll``;
    without ``dims`` the flattened tensor is rolled and its shape restored."""
    x = _tensor("roll", "x", x, any_dtype=True)
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            raise bad_value("roll", "shifts", shifts, "one int when dims is None")
        return reshape(roll(reshape(x, (x.size,)), shifts, 0), x.shape)
    shift_list = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    dim_list = list(dims) if isinstance(dims, (tuple, list)) else [dims]
    if len(shift_list) != len(dim_list):
        raise bad_value("roll", "shifts", shifts, f"{len(dim_list)} shifts, one per dim")
    out = x
    for k, d in zip(shift_list, dim_list):
        d = _axis("roll", "dims", d, max(x.ndim, 1))
        n = x.shape[d]
        k = checks.integer("roll", "shifts", k) % n if n else 0
        if k:
            head = (slice(None),) * d
            out = concat([getitem(out, head + (slice(n - k, None),)),
                          getitem(out, head + (slice(0, n - k),))], d)
    return out


@computes_in_float32
def repeat(x, *sizes) -> Tensor:
    """x tiled ``sizes[d]`` times along each axis d, as ``torch.Tensor.repeat`` (more sizes
    than axes add leading axes of size 1 first): copies joined along each repeated axis."""
    x = _tensor("repeat", "x", x, any_dtype=True)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = [checks.integer("repeat", f"sizes[{k}]", r, 0) for k, r in enumerate(sizes)]
    if len(sizes) < x.ndim:
        raise bad_value("repeat", "sizes", tuple(sizes),
                        f"at least {x.ndim} sizes, one per axis of x")
    if len(sizes) > MAX_RANK:
        raise bad_shape("repeat", "result", tuple(sizes), f"at most {MAX_RANK} dimensions")
    out = reshape(x, (1,) * (len(sizes) - x.ndim) + x.shape)
    for d, r in enumerate(sizes):
        if r == 0:
            out = getitem(out, (slice(None),) * d + (slice(0, 0),))
        elif r > 1:
            out = concat([out] * r, d)
    return out


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


@computes_in_float32
def pad(x, pad, mode: str = "constant", value: float = 0.0) -> Tensor:  # noqa: A002
    """x padded as ``torch.nn.functional.pad``: ``pad`` lists (before, after) pairs from
    the last axis backwards; ``mode`` "constant" (``value``; negative pads crop),
    "reflect" (mirrored about the edge element, pads shorter than the axis), "replicate"
    (the edge element repeated) or "circular" (wrapped around, pads at most the axis)."""
    fn = "pad"
    x = _tensor(fn, "x", x)
    if not isinstance(pad, (tuple, list)) or len(pad) % 2:
        raise bad_value(fn, "pad", pad, "a tuple of (before, after) pairs")
    pads = [checks.integer(fn, f"pad[{k}]", v) for k, v in enumerate(pad)]
    if len(pads) // 2 > x.ndim:
        raise bad_value(fn, "pad", pad, f"at most {x.ndim} pairs, one per axis of x")
    if mode not in _PAD_MODES:
        raise bad_value(fn, "mode", mode, "one of " + ", ".join(map(repr, _PAD_MODES)))
    if not checks.is_number(value):
        raise bad_type(fn, "value", value, "a number")
    widths = {x.ndim - 1 - k: (pads[2 * k], pads[2 * k + 1]) for k in range(len(pads) // 2)}
    for d, (before, after) in widths.items():
        n = x.shape[d]
        if mode == "constant":
            if before + after + n < 0 or -before > n or -after > n:
                raise bad_value(fn, "pad", pad, f"crops of at most the {n} elements of axis {d}")
        elif before < 0 or after < 0:
            raise bad_value(fn, "pad", pad, f"pads >= 0 in mode {mode!r}")
        elif mode == "reflect" and (before >= n or after >= n):
            raise bad_value(fn, "pad", pad, f"pads shorter than axis {d} ({n} elements) in "
                            "mode 'reflect'")
        elif (before or after) and (n == 0 or (mode == "circular" and
                                              (before > n or after > n))):
            raise bad_value(fn, "pad", pad, f"pads of at most the {n} elements of axis {d} "
                            f"in mode {mode!r}")
    if mode == "constant":
        return _pad_constant(x, widths, float(value))
    out = x
    for d, (before, after) in widths.items():
        n, head = out.shape[d], (slice(None),) * d
        if mode == "reflect":
            parts = (flip(getitem(out, head + (slice(1, before + 1),)), d),
                     flip(getitem(out, head + (slice(n - 1 - after, n - 1),)), d))
        elif mode == "replicate":
            edge = [list(out.shape), list(out.shape)]
            edge[0][d], edge[1][d] = before, after
            parts = (broadcast_to(getitem(out, head + (slice(0, 1),)), tuple(edge[0])),
                     broadcast_to(getitem(out, head + (slice(n - 1, n),)), tuple(edge[1])))
        else:                                                    # circular
            parts = (getitem(out, head + (slice(n - before, n),)),
                     getitem(out, head + (slice(0, after),)))
        pieces = [t for t, w in zip((parts[0], out, parts[1]), (before, 1, after)) if w]
        out = concat(pieces, d) if len(pieces) > 1 else out
    return out


def _pad_constant(x: Tensor, widths: dict, value: float) -> Tensor:
    """x written into a tensor filled with ``value`` (negative widths crop x first)."""
    key = [slice(None)] * x.ndim
    for d, (before, after) in widths.items():
        key[d] = slice(builtins.max(-before, 0), x.shape[d] - builtins.max(-after, 0))
    x = getitem(x, tuple(key)) if builtins.any(k != slice(None) for k in key) else x
    shape = list(x.shape)
    for d, (before, after) in widths.items():
        shape[d] += builtins.max(before, 0) + builtins.max(after, 0)
    shape = tuple(shape)
    strides = _contiguous_strides(shape)
    offset = builtins.sum(builtins.max(before, 0) * strides[d]
                          for d, (before, _) in widths.items())
    backend = device.active()
    out = backend.empty(shape, x.dtype)
    backend.fill(out, value)
    size = int(np.prod(shape))
    if x.size:
        backend.strided_backward(handle(backend, x), size, tuple(strides), offset, out=out)

    x_shape = x.shape

    def backward(g, needs):
        return (backend.strided(g, x_shape, tuple(strides), offset),)
    return _make(out, (x,), backward, backend)


def _install_methods() -> None:
    T = Tensor
    T.__getitem__ = getitem
    T.squeeze = lambda a, dim=None: squeeze(a, dim)
    T.unsqueeze = lambda a, dim: unsqueeze(a, dim)
    T.flatten = lambda a, start_dim=0, end_dim=-1: flatten(a, start_dim, end_dim)
    T.expand = lambda a, *sizes: expand(a, *sizes)
    T.flip = lambda a, dims: flip(a, dims)
    T.view = lambda a, *shape: reshape(a, *shape)
    T.repeat = lambda a, *sizes: repeat(a, *sizes)


_install_methods()

cat = concat            # PyTorch's other name

def movedim(input, source, destination) -> Tensor:  # noqa: A002 - PyTorch's names
    """The tensor with its axes ``source`` (an int or a sequence) moved to the places
    ``destination``, the others keeping their order, as ``torch.movedim`` (a copy)."""
    x = _tensor("movedim", "input", input, any_dtype=True)
    src = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise bad_value("movedim", "destination", destination,
                        f"as many axes as source ({len(src)})")
    src = tuple(_axis("movedim", "source", d, max(x.ndim, 1)) for d in src)
    dst = tuple(_axis("movedim", "destination", d, max(x.ndim, 1)) for d in dst)
    for name, axes in (("source", src), ("destination", dst)):
        if len(set(axes)) != len(axes):
            raise bad_value("movedim", name, axes, "distinct axes")
    if x.ndim == 0:
        return x
    rest = iter(a for a in range(x.ndim) if a not in src)
    placed = dict(zip(dst, src))
    return transpose(x, tuple(placed[i] if i in placed else next(rest)
                              for i in range(x.ndim)))


def swapaxes(input, axis0: int, axis1: int) -> Tensor:  # noqa: A002
    """The tensor with two axes swapped, as ``torch.swapaxes`` (``transpose(t, a, b)``
    there; dualgrad's ``transpose`` takes a permutation, as NumPy's)."""
    x = _tensor("swapaxes", "input", input, any_dtype=True)
    a = _axis("swapaxes", "axis0", axis0, max(x.ndim, 1))
    b = _axis("swapaxes", "axis1", axis1, max(x.ndim, 1))
    if x.ndim == 0:
        return x
    axes = list(range(x.ndim))
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(x, tuple(axes))


def swapdims(input, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    """``swapaxes``, under PyTorch's other name."""
    return swapaxes(input, dim0, dim1)


def flat_or_axis(fn: str, x: Tensor, dim) -> tuple:
    """(x, dim) for an op along ``dim``: x flattened (dim 0) where ``dim`` is None, a 0-d x
    as one element, else the checked dim."""
    if dim is None:
        return reshape(x, (x.size,)), 0
    if x.ndim == 0:
        return reshape(x, (1,)), _axis(fn, "dim", dim, 1)
    return x, _axis(fn, "dim", dim, x.ndim)


def repeat_interleave(input, repeats, dim=None, *, output_size=None) -> Tensor:  # noqa: A002
    """Each element (slice along ``dim``; of the flattened input without one) repeated
    ``repeats`` times in place, as ``torch.repeat_interleave``: ``repeats`` an int, or one
    count per slice (an integer array or tensor; ``output_size``, where given, must be
    their sum). The gradient sums over the repeats."""
    fn = "repeat_interleave"
    x, dim = flat_or_axis(fn, _tensor(fn, "input", input, any_dtype=True), dim)
    n = x.shape[dim]
    if isinstance(repeats, Tensor):
        repeats = repeats.numpy()
    if isinstance(repeats, (int, np.integer)) and not isinstance(repeats, bool):
        r = checks.integer(fn, "repeats", repeats, 0)
        total = n * r
    else:
        counts = checks.array(fn, "repeats", repeats, "iu", "an int or integer counts")
        if counts.ndim > 1 or (counts.size not in (1, n)):
            raise bad_shape(fn, "repeats", counts.shape, f"an int, or ({n},) counts: one a "
                            f"slice along dim {dim}")
        if counts.size and counts.min() < 0:
            raise bad_value(fn, "repeats", int(counts.min()), "non-negative counts")
        counts = np.broadcast_to(counts.reshape(-1), (n,))
        total, r = int(counts.sum()), None
    if output_size is not None and checks.integer(fn, "output_size", output_size, 0) != total:
        raise bad_value(fn, "output_size", output_size, f"the repeats' total, {total}")
    if r is not None:           # a broadcast and a reshape: nothing uploaded
        wide = reshape(x, x.shape[:dim + 1] + (1,) + x.shape[dim + 1:])
        wide = broadcast_to(wide, x.shape[:dim + 1] + (r,) + x.shape[dim + 1:])
        return reshape(wide, x.shape[:dim] + (total,) + x.shape[dim + 1:])
    return index_select(x, dim, np.repeat(np.arange(n), counts), fn)


__all__ = ["index_select", "squeeze", "unsqueeze", "flatten", "broadcast_to", "expand", "flip",
           "concat", "cat", "stack", "split", "chunk", "roll", "repeat", "pad", "movedim",
           "swapaxes", "swapdims", "repeat_interleave"]
