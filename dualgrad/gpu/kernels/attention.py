"""attention.comp: fused attention and its backward, no L x S matrix stored; the twin of
``dualgrad/cpu/attention.py``."""
from __future__ import annotations

import struct

from ..dispatch import packer

_ADDRESSES = packer(10)
ROWS = 64            # a workgroup's rows (the shader's)
MAX_HEAD = 128       # the longest rows its registers and shared tiles are sized for


def _push(addresses, rows: int, keys: int, scale: float) -> bytes:
    return _ADDRESSES.pack(*addresses) + struct.pack("<2If", rows, keys, scale)


def _groups(rows: int, batch: int) -> tuple:
    return (-(-rows // ROWS), batch, 1)


def attention(dev, q, k, v, causal: bool, scale: float):
    batch, rows, head = q.shape
    keys = k.shape[1]
    o, lse = dev.empty(q.shape), dev.empty((batch, rows))
    if q.size:
        dev.launch("attention", (0, head, int(causal)),
                   _push((q.address, k.address, v.address, o.address, lse.address, 0, 0, 0,
                          0, 0), rows, keys, scale),
                   _groups(rows, batch), [q, k, v], [o, lse])
    return o, lse


def attention_backward(dev, q, k, v, o, lse, g, causal: bool, scale: float):
    batch, rows, head = q.shape
    keys = k.shape[1]
    dq, dk, dv = dev.empty(q.shape), dev.empty(k.shape), dev.empty(v.shape)
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
        dev.launch("attention", (2, *spec), push, _groups(keys, batch),
                   [q, k, v, lse, g, delta], [dk, dv])
    return dq, dk, dv
