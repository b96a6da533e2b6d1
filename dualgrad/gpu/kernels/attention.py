"""Fused attention and its backward, no L x S matrix stored; the twin of
``dualgrad/cpu/attention.py``. attention.comp gives each thread a row; for rows (heads) of 64
tiled shaders take the forward and both gradients instead (attention_tiled.comp,
attention_tiled_dq.comp, attention_tiled_grad.comp: a thread a 4 x 2 block of scores; on a
device that adds float32 atomically, attention_tiled_grad_dq.comp makes dq beside dk and
dv, and attention_tiled_dq.comp only delta). Every shader finds its rows by strides
(``Layout``): contiguous (B, L, D) arrays, or self-attention's projection read in place
(``attention_packed``). float16 and bfloat16 q, k, v (and o, g) are read and their outputs
written in 16 bits by the shaders' LOW form (attention16.glsl: rows of an even length;
others through float32 copies), lse and delta staying float32."""
from __future__ import annotations

import functools
import struct
from typing import NamedTuple

import numpy as np

from ... import determinism
from ..dispatch import ROUND16, packer
from ..memory import DeviceArray
from . import logic

_ADDRESSES = packer(10)
F32 = np.dtype(np.float32)
ROWS = 64            # a workgroup's rows in attention.comp
MAX_HEAD = 128       # the longest rows its registers and shared tiles are sized for
# Rows the tiles take (their 16 column groups split a row of 64 into quads). Heads of 32
# stay with a thread a row: the tiled backward (8 groups) was 4% slower for the GPT
# benchmark's 32 x 8 heads of 128 x 32 on an H100.
TILED_HEADS = (64,)
# A workgroup's query rows in attention_tiled.comp and attention_tiled_dq.comp, and keys in
# attention_tiled_grad.comp: the first whose shared memory the device grants (48 KiB on
# NVIDIA's; lavapipe's 32 KiB takes the second).
TILED_ROWS = (64, 32)
TILED_GRAD_ROWS = (32, 16)
# Column groups of a tile (the shaders' TX): a thread's score block is 4 x (32 / groups).
FORWARD_GROUPS = GRAD_GROUPS = 16
COLS = 32                # streamed rows a tile
STREAMED_ROWS = (32, 16)  # attention.comp's streamed rows a step, by shared memory
QUADS_A_ROW = 68 // 4    # a shared row's quads: a head of 64, and 4 floats apart


def _forward_bytes(rows: int) -> int:
    """attention_tiled.comp's shared memory: q rows, k and v tiles, the weights, the maxima."""
    return 16 * (rows * QUADS_A_ROW + 2 * COLS * QUADS_A_ROW + COLS * (rows + 4) // 4) \
        + 4 * rows * FORWARD_GROUPS


def _keys_bytes(rows: int) -> int:
    """attention_tiled_grad.comp's: k and v rows, q and g tiles, p and ds, lse and delta."""
    return 16 * (2 * rows * QUADS_A_ROW + 2 * COLS * QUADS_A_ROW + 2 * COLS * (rows + 4) // 4) \
        + 8 * COLS


def _queries_bytes(rows: int) -> int:
    """attention_tiled_dq.comp's: q and g rows, k and v tiles, ds, lse and delta."""
    return 16 * (2 * rows * QUADS_A_ROW + 2 * COLS * QUADS_A_ROW + COLS * (rows + 4) // 4) \
        + 8 * rows


def _streamed_bytes(head: int):
    """attention.comp's shared memory for ``rows`` streamed rows of ``head``: two tiles of
    rows, and lse and delta of each row."""
    return lambda rows: 4 * rows * (2 * head + 2)


def _stream_spec(dev, mode: int, head: int, causal: bool, low: int) -> tuple:
    """attention.comp's specialization: 32 streamed rows a step, or 16 where those would
    not fit the device's shared memory; ``low``, the 16-bit code (LOW) or 0."""
    return (mode, head, int(causal), _tile_rows(dev, STREAMED_ROWS, _streamed_bytes(head)),
            low)


def _tile_rows(dev, options, size) -> int | None:
    """The first of ``options`` whose shared memory (``size(rows)``) the device grants."""
    limit = dev.ctx.limits.maxComputeSharedMemorySize
    return next((rows for rows in options if size(rows) <= limit), None)


class Layout(NamedTuple):
    """Where the rows lie, in floats: row r of head-row b of q (and dq) starts at (b // heads)
    * q_outer + (b % heads) * D + r * q_row; k, v, dk, dv alike by k_outer and k_row; o and
    g by o_outer and o_row (lse and delta are (B, L) always)."""
    heads: int
    q_outer: int
    q_row: int
    k_outer: int
    k_row: int
    o_outer: int
    o_row: int


def contiguous(rows: int, keys: int, head: int) -> Layout:
    """q, o (B, rows, head) and k, v (B, keys, head), each contiguous."""
    return Layout(1, rows * head, head, keys * head, head, rows * head, head)


def packed(rows: int, heads: int, head: int) -> Layout:
    """q, k, v inside a projection (N, rows, 3, heads, head); o (N, rows, heads, head)."""
    e = heads * head
    return Layout(heads, rows * 3 * e, 3 * e, rows * 3 * e, 3 * e, rows * e, e)


def _push(addresses, rows: int, keys: int, scale: float, layout: Layout) -> bytes:
    return _ADDRESSES.pack(*addresses) + struct.pack("<2If7I", rows, keys, scale, *layout)


def _groups(rows: int, batch: int, per: int = ROWS) -> tuple:
    return (-(-rows // per), batch, 1)


def _tiled(head: int, addresses, layout: Layout) -> bool:
    """Whether the tiled shaders take these rows: their length, and every row starting on a
    quad (they read and write four floats at a time)."""
    return head in TILED_HEADS and all(a % 16 == 0 for a in addresses) and \
        all(n % 4 == 0 for n in layout[1:])


def _spec(head: int, causal: bool, rows: int, low: int, groups: int) -> tuple:
    """A tiled shader's specialization: its threads are rows / 4 row groups by ``groups``."""
    return (head, int(causal), rows // 4 * groups, rows, low)


def _forward(dev, addresses, reads, o, lse, batch, rows, keys, head, causal, scale, layout):
    push = _push((*addresses, o.address, lse.address, 0, 0, 0, 0, 0), rows, keys, scale,
                 layout)
    low = ROUND16.get(o.dtype, 0)
    tile = _tile_rows(dev, TILED_ROWS, _forward_bytes)
    if tile and _tiled(head, (*addresses, o.address), layout):
        dev.launch("attention_tiled", _spec(head, causal, tile, low, FORWARD_GROUPS), push,
                   _groups(rows, batch, tile), reads, [o, lse])
    else:
        dev.launch("attention", _stream_spec(dev, 0, head, causal, low), push,
                   _groups(rows, batch), reads, [o, lse])


def _backward(dev, addresses, grads, reads, o, lse, g, batch, rows, keys, head, causal,
              scale, layout):
    """dq into grads[0], dk and dv into grads[1] and [2] (addresses: q, k, v's; grads:
    (handle written, its address) each)."""
    delta = dev.empty((batch, rows))
    push = _push((*addresses, o.address, lse.address, g.address, delta.address,
                  *(a for _, a in grads)), rows, keys, scale, layout)
    written = [h for h, _ in grads]
    low = ROUND16.get(o.dtype, 0)
    tiled = _tiled(head, (*addresses, o.address, g.address, *(a for _, a in grads)), layout)
    query_rows = tiled and _tile_rows(dev, TILED_GRAD_ROWS, _queries_bytes)
    key_rows = tiled and _tile_rows(dev, TILED_GRAD_ROWS, _keys_bytes)
    if query_rows and key_rows:
        # dq added atomically by the keys' kernel, a share a tile of queries, where the
        # device adds float32 atomically: it then recomputes no weights of its own (its
        # sums then come in any order: not under use_deterministic_algorithms)
        atomic = low == 0 and dev.ctx.float_atomics and \
            not determinism.are_deterministic_algorithms_enabled()
        if atomic:
            dev.fill(written[0], 0.0)
        dev.launch("attention_tiled_dq",
                   (*_spec(head, causal, query_rows, low, GRAD_GROUPS), int(atomic)), push,
                   _groups(rows, batch, query_rows), [*reads, o, lse, g],
                   [delta] if atomic else [written[0], delta])
        dev.launch("attention_tiled_grad_dq" if atomic else "attention_tiled_grad",
                   _spec(head, causal, key_rows, low, GRAD_GROUPS), push,
                   _groups(keys, batch, key_rows), [*reads, lse, g, delta],
                   written if atomic else written[1:])
    else:
        dev.launch("attention", _stream_spec(dev, 1, head, causal, low), push,
                   _groups(rows, batch), [*reads, o, lse, g], [written[0], delta])
        dev.launch("attention", _stream_spec(dev, 2, head, causal, low), push,
                   _groups(keys, batch), [*reads, lse, g, delta], written[1:])


def _odd_16_through_float32(rounded):
    """A function of the kernels made to take 16-bit rows of an odd length, which the LOW
    forms do not (a pair of values would span two rows): its arrays of the first one's
    type widened to float32, the outputs at ``rounded`` (indices; None: the one output)
    converted back. (The cpu twin's ``_of_16_bit`` does the same for every 16-bit call.)"""
    def made(fn):
        @functools.wraps(fn)
        def run(dev, first, *args):
            low = first.dtype
            if low not in ROUND16 or first.shape[-1] % 2 == 0:
                return fn(dev, first, *args)
            out = fn(dev, *(logic.cast(dev, a, F32) if isinstance(a, DeviceArray) and
                            a.dtype == low else a for a in (first, *args)))
            if rounded is None:
                return logic.cast(dev, out, low)
            return tuple(logic.cast(dev, h, low) if i in rounded else h
                         for i, h in enumerate(out))
        return run
    return made


@_odd_16_through_float32((0,))
def attention(dev, q, k, v, causal: bool, scale: float):
    batch, rows, head = q.shape
    keys = k.shape[1]
    o, lse = dev.empty(q.shape, q.dtype), dev.empty((batch, rows))
    if q.size:
        _forward(dev, (q.address, k.address, v.address), [q, k, v], o, lse, batch, rows,
                 keys, head, causal, scale, contiguous(rows, keys, head))
    return o, lse


@_odd_16_through_float32((0, 1, 2))
def attention_backward(dev, q, k, v, o, lse, g, causal: bool, scale: float):
    batch, rows, head = q.shape
    keys = k.shape[1]
    dq, dk, dv = (dev.empty(t.shape, t.dtype) for t in (q, k, v))
    if q.size and k.size:
        _backward(dev, (q.address, k.address, v.address),
                  [(h, h.address) for h in (dq, dk, dv)], [q, k, v], o, lse, g, batch, rows,
                  keys, head, causal, scale, contiguous(rows, keys, head))
    elif k.size:                 # no queries: nothing reaches the keys
        dev.fill(dk, 0.0)
        dev.fill(dv, 0.0)
    return dq, dk, dv


def _thirds(h, e: int) -> tuple:
    """The addresses of q, k and v (or their gradients) inside a projection h."""
    return tuple(h.address + i * e * h.dtype.itemsize for i in range(3))


@_odd_16_through_float32((0,))
def attention_packed(dev, qkv, heads: int, causal: bool, scale: float):
    n, rows, _, _, head = qkv.shape
    o, lse = dev.empty((n, rows, heads, head), qkv.dtype), dev.empty((n * heads, rows))
    if o.size:
        _forward(dev, _thirds(qkv, heads * head), [qkv], o, lse, n * heads, rows, rows,
                 head, causal, scale, packed(rows, heads, head))
    return o, lse


@_odd_16_through_float32(None)
def attention_packed_backward(dev, qkv, o, lse, g, heads: int, causal: bool, scale: float):
    n, rows, _, _, head = qkv.shape
    grad = dev.empty(qkv.shape, qkv.dtype)
    if grad.size:
        _backward(dev, _thirds(qkv, heads * head),
                  [(grad, a) for a in _thirds(grad, heads * head)], [qkv], o, lse, g,
                  n * heads, rows, rows, head, causal, scale, packed(rows, heads, head))
    return grad
