"""sort.comp: the rows of a (rows, n) tensor sorted (a bitonic sort of key pairs that makes
ties keep their order); the twin of ``dualgrad/cpu/sort.py``. Rows padded to P elements,
at most BLOCK, sort in one dispatch; longer ones take the stages past a block as one
dispatch per distance of a block or more, and a shared-memory dispatch for the distances
below it."""
from __future__ import annotations

import numpy as np

from ..dispatch import MAX_GROUPS, grid, packer

LOCAL, GLOBAL = 0, 1
FIRST, LAST, DESCENDING = 1, 2, 4
# Elements a workgroup sorts in shared memory (sort.comp's): 16 KiB, Vulkan's least. On the
# H200 4096 (32 KiB) was slower: the shared-memory stages were a third slower, with fewer
# workgroups resident, than the global pass they saved.
BLOCK = 2048
INT32 = np.dtype(np.int32)
_PUSH = packer(5, 7)


def sort(dev, x, descending: bool):
    """(values, int32 indices) of x's rows (rows, n) sorted along n."""
    rows, n = x.shape
    vals, order = dev.empty(x.shape, x.dtype), dev.empty(x.shape, INT32)
    if not x.size:
        return vals, order
    padded = 1 << (n - 1).bit_length()
    total = rows * padded
    spec = (0 if x.dtype.kind == "f" else 1,)
    down = DESCENDING if descending else 0
    if padded <= BLOCK:
        keys = idx = vals                      # (unused: one dispatch makes and writes)
    else:
        keys, idx = dev.empty((total,), INT32), dev.empty((total,), INT32)
    blocks = (min(-(-total // BLOCK), MAX_GROUPS), 1, 1)

    def local(kfirst, klast, flags):
        dev.launch("sort", (LOCAL, *spec),
                   _PUSH.pack(x.address, keys.address, idx.address, vals.address,
                              order.address, total, n, padded, kfirst, klast, 0, flags | down),
                   blocks, [x, keys, idx], [keys, idx, vals, order])

    if padded <= BLOCK:
        local(2, padded, FIRST | LAST)
        return vals, order
    local(2, BLOCK, FIRST)
    k = 2 * BLOCK
    while k <= padded:
        j = k // 2
        while j >= BLOCK:
            dev.launch("sort", (GLOBAL, *spec),
                       _PUSH.pack(x.address, keys.address, idx.address, vals.address,
                                  order.address, total, n, padded, k, k, j, down),
                       grid(total // 2), [keys, idx], [keys, idx])
            j //= 2
        local(k, k, LAST if k == padded else 0)
        k *= 2
    return vals, order
