"""embedding.comp: rows gathered, and their gradients summed back per row in position
order (the positions grouped by row by a stable sort on the device); the twin of
``dualgrad/cpu/embedding.py``."""
from __future__ import annotations

from ..dispatch import grid, push_constants
from .sort import sort


def embedding(dev, table, idx):
    count, dim = idx.size, table.shape[1]
    out = dev.empty((count, dim), table.dtype)
    if out.size:
        dev.launch("embedding", (0,), push_constants((table.address, idx.address, 0,
                                                      out.address), (count, dim, 0)),
                   grid(out.size), [table, idx], [out])
    return dev.reshape(out, tuple(idx.shape) + (dim,))


def embedding_backward(dev, idx, g, num_rows, out=None):
    """The table's gradient (into ``out`` where given): every row written."""
    dim, n = g.shape[-1], idx.size
    out = dev.empty((num_rows, dim)) if out is None else out
    if not n or not dim:
        dev.fill(out, 0.0)
        return out
    looked_up, order = sort(dev, dev.reshape(idx, (1, n)), False)
    dev.launch("embedding", (1,), push_constants((g.address, looked_up.address, order.address,
                                                  out.address), (num_rows, dim, n)),
               grid(out.size), [g, looked_up, order], [out])
    return out
