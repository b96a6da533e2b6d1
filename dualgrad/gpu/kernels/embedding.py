"""embedding.comp: rows gathered, and their gradients summed back per row in position
order; the twin of ``dualgrad/cpu/embedding.py``."""
from __future__ import annotations

import numpy as np

from ..dispatch import grid, push_constants


def embedding(dev, table, idx):
    count, dim = idx.size, table.shape[1]
    out = dev.empty((count, dim), table.dtype)
    if out.size:
        dev.launch("embedding", (0,), push_constants((table.address, idx.address, 0, 0,
                                                      out.address), (count, dim)),
                   grid(out.size), [table, idx], [out])
    return dev.reshape(out, tuple(idx.shape) + (dim,))


def embedding_backward(dev, idx, g, num_rows):
    dev.uncapturable("embedding's gradient groups the indices on the host")
    dim = g.shape[-1]
    out = dev.empty((num_rows, dim))
    dev.fill(out, 0.0)
    positions = idx.host.reshape(-1)
    if positions.size and dim:
        # Group the positions by the row they looked up, keeping position order.
        order = np.argsort(positions, kind="stable").astype(np.int32)
        looked_up, starts = np.unique(positions[order], return_index=True)
        seg = np.append(starts, positions.size).astype(np.int32)
        rows_h, order_h, seg_h = (dev.upload(a) for a in (looked_up.astype(np.int32), order,
                                                          seg))
        dev.launch("embedding", (1,), push_constants((g.address, rows_h.address,
                                                      order_h.address, seg_h.address,
                                                      out.address), (looked_up.size, dim)),
                   grid(looked_up.size * dim), [g, rows_h, order_h, seg_h], [out])
    return out
