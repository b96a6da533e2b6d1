"""Fused attention and its backward, no L x S matrix stored; the twin of
``dualgrad/cpu/attention.py``. attention.comp gives each thread a row; for rows (heads) of 64
the forward and the keys' gradients take tiled shaders instead (attention_tiled.comp,
attention_tiled_grad.comp: a thread a 4 x 4 block of scores), the queries' gradient stays a
thread a row, which measured faster."""
from __future__ import annotations

import struct

from ..dispatch import packer

_ADDRESSES = packer(10)
ROWS = 64            # a workgroup's rows in attention.comp
MAX_HEAD = 128       # the longest rows its registers and shared tiles are sized for
# The tiles' gain, H200, causal, T = 128-2048: heads of 64, forward 1.7x and keys 1.5-1.8x
# faster; heads of 32 (which the shaders take too), forward no faster, keys 1.4-1.9x slower.
TILED_HEADS = (64,)
# A workgroup's query rows in attention_tiled.comp and keys in attention_tiled_grad.comp:
# the first whose shared memory the device grants (48 KiB on NVIDIA's; lavapipe's 32 KiB
# takes the second).
TILED_ROWS = (64, 32)
TILED_GRAD_ROWS = (32, 16)
COLS = 32                # streamed rows a tile
QUADS_A_ROW = 68 // 4    # a shared row's quads: a head of 64, and 4 floats apart


def _forward_bytes(rows: int) -> int:
    """attention_tiled.comp's shared memory: q rows, k and v tiles, the weights, the maxima."""
    return 16 * (rows * QUADS_A_ROW + 2 * COLS * QUADS_A_ROW + COLS * (rows + 4) // 4) \
        + 4 * rows * 8


def _keys_bytes(rows: int) -> int:
    """attention_tiled_grad.comp's: k and v rows, q and g tiles, p and ds, lse and delta."""
    return 16 * (2 * rows * QUADS_A_ROW + 2 * COLS * QUADS_A_ROW + 2 * COLS * (rows + 4) // 4) \
        + 8 * COLS


def _tile_rows(dev, options, size) -> int | None:
    """The first of ``options`` whose shared memory (``size(rows)``) the device grants."""
    limit = dev.ctx.limits.maxComputeSharedMemorySize
    return next((rows for rows in options if size(rows) <= limit), None)


def _push(addresses, rows: int, keys: int, scale: float) -> bytes:
    return _ADDRESSES.pack(*addresses) + struct.pack("<2If", rows, keys, scale)


def _groups(rows: int, batch: int, per: int = ROWS) -> tuple:
    return (-(-rows // per), batch, 1)


def _tiled(head: int, arrays) -> bool:
    """Whether the tiled shaders take these rows: their length, and every array starting on
    a quad (they read and write four floats at a time)."""
    return head in TILED_HEADS and all(a.address % 16 == 0 for a in arrays)


def _spec(head: int, causal: bool, rows: int) -> tuple:
    return (head, int(causal), rows // 4 * 8, rows)


def attention(dev, q, k, v, causal: bool, scale: float):
    batch, rows, head = q.shape
    keys = k.shape[1]
    o, lse = dev.empty(q.shape), dev.empty((batch, rows))
    if q.size:
        push = _push((q.address, k.address, v.address, o.address, lse.address, 0, 0, 0, 0, 0),
                     rows, keys, scale)
        tile = _tile_rows(dev, TILED_ROWS, _forward_bytes)
        if tile and _tiled(head, (q, k, v, o)):
            dev.launch("attention_tiled", _spec(head, causal, tile), push,
                       _groups(rows, batch, tile), [q, k, v], [o, lse])
        else:
            dev.launch("attention", (0, head, int(causal)), push, _groups(rows, batch),
                       [q, k, v], [o, lse])
    return o, lse


def attention_backward(dev, q, k, v, o, lse, g, causal: bool, scale: float, out=None):
    batch, rows, head = q.shape
    keys = k.shape[1]
    dq, dk, dv = (dev.empty(q.shape), dev.empty(k.shape), dev.empty(v.shape)) if out is None \
        else out
    delta = dev.empty((batch, rows))
    push = _push((q.address, k.address, v.address, o.address, lse.address, g.address,
                  delta.address, dq.address, dk.address, dv.address), rows, keys, scale)
    spec = (head, int(causal))
    if q.size:
        dev.launch("attention", (1, *spec), push, _groups(rows, batch), [q, k, v, o, lse, g],
                   [dq, delta])
    if k.size:
        if not q.size:
            dev.fill(delta, 0.0)
        reads = [q, k, v, lse, g, delta]
        tile = _tile_rows(dev, TILED_GRAD_ROWS, _keys_bytes)
        if tile and _tiled(head, (q, k, v, g, dk, dv)):
            dev.launch("attention_tiled_grad", _spec(head, causal, tile), push,
                       _groups(keys, batch, tile), reads, [dk, dv])
        else:
            dev.launch("attention", (2, *spec), push, _groups(keys, batch), reads, [dk, dv])
    return dq, dk, dv
