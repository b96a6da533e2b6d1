"""logic.comp (comparisons, logical ops and tests, with boolean results), intops.comp
(int32 arithmetic), intreduce.comp (int32 reductions), where.comp, convert.comp and
convert16.comp (float32 and the 16-bit floats); the twins of ``dualgrad/cpu/logic.py``
and ``intops.py``. Bools are stored a byte each, 0 or 1 (shaders/bytes.glsl)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...kernel_ops import INT_REDUCE, INTEGER, INTEGER_UNARY, LOGIC, LOGIC_UNARY
from ..dispatch import MAX_GROUPS, WG, grid, packer, quad_grid
from ..workspace import COUNTER, COUNTERS
from .elementwise import at, broadcast_layout

INT32, BOOL = np.dtype(np.int32), np.dtype(np.bool_)
_KIND = {np.dtype(np.float32): 0, INT32: 1, BOOL: 2}
_ADDRESSES3, _ADDRESSES4 = packer(3), packer(4)
_CAST = packer(2, 1)
_LOW = {np.dtype(np.float16): 0, np.dtype(ml_dtypes.bfloat16): 1}     # convert16's KIND


def logic(dev, op, x, y=None):
    return _two_operands(dev, "logic", (LOGIC.code[op], _KIND[x.dtype]), x,
                         None if op in LOGIC_UNARY else y, BOOL)


def integer(dev, op, x, y=None):
    """intops.comp: int32 arithmetic, broadcasting as logic does."""
    return _two_operands(dev, "intops", (INTEGER.code[op],), x,
                         None if op in INTEGER_UNARY else y, INT32)


# intreduce.comp's items: a workgroup's run of a row (rows of at least a workgroup's
# length, contiguous), else a thread's run of an output's elements. Rows are cut into
# about ROW_ITEMS runs in all where they are few, so that a line has few partial results.
ROW_CHUNK, COLUMN_CHUNK, ROW_ITEMS = 16 * WG, 64, 1024
_INT_REDUCE = packer(4, 5)
IDENTITY = {"int_sum": 0, "int_max": -2 ** 31, "int_min": 2 ** 31 - 1}


def int_reduce(dev, op, x, outer: int, n: int, inner: int):
    n_out = outer * inner
    out = dev.empty((n_out,), INT32)
    if not (n_out and n):
        if n_out:
            dev.fill(out, IDENTITY[op])        # (of nothing: the op's identity)
        return out
    rows = inner == 1 and n >= WG
    chunk = COLUMN_CHUNK
    if rows:                        # (a multiple of 4: VEC's runs start quads)
        chunk = max(ROW_CHUNK, -(-n // max(1, ROW_ITEMS // n_out) // 4) * 4)
    items = n_out * -(-n // chunk)
    # rows finish in the dispatch (intreduce.comp's FINISH) where each is one item or a
    # counter an output fits; else each item combines its part into the filled output
    finish = rows and (items == n_out or n_out <= COUNTERS)
    spec = (INT_REDUCE.code[op], int(rows), int(rows and n % 4 == 0), int(finish))
    groups = (min(items, MAX_GROUPS), 1, 1) if rows else grid(items)
    if finish and items > n_out:
        with dev.lock:                  # (a workspace range taken for this dispatch)
            partials, writes = dev.workspace.partials((items,), [out])
            counters = dev.workspace.take(COUNTER, n_out)
            dev.launch("intreduce", spec, _INT_REDUCE.pack(
                x.address, out.address, partials, counters, n_out, n, inner, chunk, items),
                groups, [x], writes)
        return out
    if not finish:
        dev.fill(out, IDENTITY[op])            # (each item combines its part in)
    dev.launch("intreduce", spec, _INT_REDUCE.pack(x.address, out.address, 0, 0, n_out, n,
                                                   inner, chunk, items), groups, [x], [out])
    return out


def _two_operands(dev, shader, spec, x, y, dtype):
    """A result of ``dtype``, x op y (broadcast) or op x (y None); the shader's spec
    constants are ``spec`` and then FLAT."""
    out = dev.empty(x.shape if y is None else np.broadcast_shapes(x.shape, y.shape), dtype)
    if out.size:
        y = x if y is None else y
        _, parts, flat = broadcast_layout((x.shape, y.shape), out.shape)
        for tail, n, (ox, oy, oo) in parts:
            dev.launch(shader, (*spec, flat),
                       _ADDRESSES3.pack(at(x, ox), at(y, oy), at(out, oo)) + tail,
                       (quad_grid if flat else grid)(n), [x, y], [out])
    return out


def where(dev, cond, a, b):
    shape, parts, flat = broadcast_layout((cond.shape, a.shape, b.shape), None)
    out = dev.empty(shape, a.dtype)
    if out.size:
        for tail, n, (oc, oa, ob, oo) in parts:
            dev.launch("where", (flat,),
                       _ADDRESSES4.pack(at(cond, oc), at(a, oa), at(b, ob), at(out, oo)) + tail,
                       (quad_grid if flat else grid)(n), [cond, a, b], [out])
    return out


def cast(dev, x, dtype, out=None):
    dtype = np.dtype(dtype)
    out = dev.empty(x.shape, dtype) if out is None else out
    low = _LOW.get(dtype, _LOW.get(x.dtype))
    if low is not None:              # convert16.comp: float32 <-> a 16-bit float
        narrow = dtype in _LOW
        if out.size:
            dev.launch("convert16", (low, 0 if narrow else 1),
                       _CAST.pack(x.address, out.address, x.size),
                       grid((x.size + 1) // 2 if narrow else x.size), [x], [out])
        return out
    if out.size:
        dev.launch("convert", (_KIND[x.dtype], _KIND[dtype]),
                   _CAST.pack(x.address, out.address, x.size), quad_grid(x.size), [x], [out])
    return out
