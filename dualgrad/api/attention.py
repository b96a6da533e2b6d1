"""Attention: ``scaled_dot_product_attention`` with PyTorch's arguments and masks.

Without a mask (or with the causal one) and without dropout, the ``attention`` kernel
pair computes softmax(q @ k^T * scale) @ v and its gradients with no L x S matrix kept
(an online softmax on the gpu, the weights recomputed in the backward from each row's
log-sum-exp). Otherwise it is composed of the batched products, softmax and dropout, so
its gradient is theirs; the causal mask is then made on the device (no host array), so a
recorded step keeps it.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import bad_shape
from . import autocast, capture, checks, device, logic, ops, random
from .logic import tril, where
from .low_precision import computes_in_float32, converted
from .ops import (_constant, _low_result, _make, _product_operands, _same_dtype, _tensor,
                  matmul, product_type, reshape, softmax, transpose)
from .residency import handle
from .tensor import BOOL, Tensor, ag_tensor


def fresh_dropout(x: Tensor, p: float) -> Tensor:
    """dropout(x, p) with a mask drawn from dualgrad's generator, a new one at each call
    and at each replay of a recorded step."""
    if p == 0.0:
        return x
    if ops.recomputing():                # (the first run's draw: nothing new drawn)
        return ops.dropout(x, p, 0, 0)
    recorded = (int(random.generator().integers(0, 2 ** 63)), 0)
    out = ops.dropout(x, p, *recorded)

    def replayed():
        device.active().replay_dropout(recorded, int(random.generator().integers(0, 2 ** 63)),
                                       0)
    capture.on_replay(lambda: ("dropout", p), replayed)
    return out


MAX_HEAD = 128          # the longest rows the attention kernels take
MAX_BATCH = 65535       # and the most batches (heads) in one call


def low_precision_inputs(core, q: Tensor, k: Tensor, v: Tensor):
    """``core(q, k, v)`` -> (out, ...), made in a 16-bit type where ops.product_type gives
    one (under ``autocast``, q, k and v converted to its type first): the fused kernel
    reads them in it, the composition widens them (``widened``), both compute inside in
    float32, and out is rounded to the type once; else as it is."""
    low = product_type((q, k, v))
    if low is None:
        return core(q, k, v)
    backend = device.active()
    with autocast.suspended():
        out, *rest = core(*(t if t.dtype == low else converted(backend, t, low)
                            for t in (q, k, v)))
    return (_low_result(out, low) if out.dtype != low else out, *rest)


def widened(*tensors: Tensor) -> tuple:
    """16-bit tensors converted to float32 (recorded), the rest as they are: what the
    composed attention computes with."""
    backend = device.active()
    return tuple(converted(backend, t, np.dtype(np.float32)) if t.dtype.itemsize == 2
                 else t for t in tensors)


def kernels_take(batch: int, keys: int, e: int) -> bool:
    """Whether the attention kernels take ``batch`` rows of queries against ``keys`` keys,
    each of ``e`` values."""
    return 1 <= e <= MAX_HEAD and keys >= 1 and batch <= MAX_BATCH


def fused_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float):
    """softmax(q @ k^T * scale) @ v by the ``attention`` kernel pair for q (..., L, E),
    k and v (..., S, E) with the same leading axes; None where the kernels do not take the
    shapes (then the caller composes it)."""
    lead, (length, e), s = q.shape[:-2], q.shape[-2:], k.shape[-2]
    batch = math.prod(lead)
    if v.shape[-1] != e or not kernels_take(batch, s, e):
        return None
    backend = device.active()
    hq, hk, hv = (backend.reshape(handle(backend, t), (batch, t.shape[-2], e))
                  for t in (q, k, v))
    # (16-bit q, k, v: o and the gradients 16-bit too, o kept so for the backward, as
    # PyTorch's is)
    ho, hlse = backend.attention(hq, hk, hv, bool(causal), float(scale))

    def backward(g, needs):
        return backend.attention_backward(hq, hk, hv, ho, hlse, g, bool(causal),
                                          float(scale))
    out = _make(ho, (reshape(q, (batch, length, e)), reshape(k, (batch, s, e)),
                     reshape(v, (batch, s, e))), backward, backend)
    return reshape(out, lead + (length, e))


def fused_packed_attention(qkv: Tensor, causal: bool, scale: float) -> Tensor:
    """Self-attention by the ``attention_packed`` kernel pair: q, k, v = qkv[:, :, 0],
    [:, :, 1], [:, :, 2] for qkv (N, L, 3, heads, D), a projection reshaped, read in place
    (no copy, no transpose into heads); the output (N, L, heads, D) and qkv's gradient
    come as they lie. Under ``autocast`` (or of a 16-bit qkv) it is made in the 16-bit type
    (ops.product_type): qkv converted to it, the output rounded to it. The caller checks that
    the kernels take the shapes (``kernels_take``)."""
    n, length, _, heads, e = qkv.shape
    backend = device.active()
    low = product_type((qkv,))
    if low is not None and qkv.dtype != low:
        qkv = converted(backend, qkv, low)
    hqkv = handle(backend, qkv)
    ho, hlse = backend.attention_packed(hqkv, heads, bool(causal), float(scale))

    def backward(g, needs):
        return (backend.attention_packed_backward(hqkv, ho, hlse, g, heads, bool(causal),
                                                  float(scale)),)
    return _make(ho, (qkv,), backward, backend)


def causal_mask(rows: int, cols: int) -> Tensor:
    """A boolean (rows, cols) mask, True where column <= row (PyTorch's is_causal)."""
    return tril(_constant((rows, cols), 1, BOOL))


def mask_tensor(fn: str, name: str, mask, like: Tensor) -> Tensor:
    """A mask argument as a tensor: a boolean array stays boolean, any other becomes a
    float tensor of ``like``'s dtype."""
    if isinstance(mask, Tensor):
        return mask
    if isinstance(mask, (np.ndarray, list, tuple)) and np.asarray(mask).dtype == np.bool_:
        return ag_tensor(np.asarray(mask), dtype=BOOL)
    return _tensor(fn, name, mask, like)


def _mask_operand(fn: str, mask, like: Tensor, shape: tuple) -> Tensor:
    """``mask_tensor`` of an attn_mask that broadcasts to ``shape``."""
    m = mask_tensor(fn, "attn_mask", mask, like)
    try:
        if np.broadcast_shapes(m.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise bad_shape(fn, "attn_mask", m.shape, f"a shape that broadcasts to the "
                                                  f"scores' {shape}") from None
    if m.dtype != BOOL:
        _same_dtype(fn, like, m)
    return m


def attention_scores(fn: str, q: Tensor, k: Tensor, attn_mask, is_causal: bool,
                     scale) -> Tensor:
    """q @ k^T * scale with the masks applied, (..., L, S)."""
    lead, (length, e), s = q.shape[:-2], q.shape[-2:], k.shape[-2]
    batch = math.prod(lead)
    scale = 1.0 / math.sqrt(e) if scale is None else checks.number(fn, "scale", scale)
    q3, k3 = reshape(q, (batch, length, e)), reshape(k, (batch, s, e))
    scores = reshape(matmul(q3, transpose(k3, (0, 2, 1))) * scale, lead + (length, s))
    if is_causal:
        scores = where(causal_mask(length, s), scores, -math.inf)
    if attn_mask is not None:
        m = _mask_operand(fn, attn_mask, q, scores.shape)
        scores = where(m, scores, -math.inf) if m.dtype == BOOL else scores + m
    return scores


@computes_in_float32
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value, as
    ``torch.nn.functional.scaled_dot_product_attention``: query (..., L, E), key
    (..., S, E), value (..., S, Ev) with the same leading axes; ``attn_mask`` boolean (True:
    take part) or float (added), broadcastable to (..., L, S); ``is_causal``: the mask
    tril(ones(L, S)), with attn_mask too where both are given; ``scale`` by default 1 /
    sqrt(E); ``dropout_p``: dropout on the attention weights (always applied, as PyTorch's).
    A row that the masks hide entirely is 0, its gradients 0, as PyTorch's.
    Without a mask (or with is_causal), without dropout and with E = Ev <= 128, no L x S
    matrix is kept (a fused kernel). Under ``autocast`` it takes query, key and value in
    the autocast type (converted where float32), computes inside in float32 and rounds its
    result to that type, as it does for 16-bit tensors of one type."""
    fn = "scaled_dot_product_attention"
    (q, k, v), _ = _product_operands(fn, (("query", query), ("key", key), ("value", value)))
    for name, t in (("key", k), ("value", v)):
        if t.ndim != q.ndim or t.shape[:-2] != q.shape[:-2]:
            raise bad_shape(fn, name, t.shape, f"the query's leading axes {q.shape[:-2]} "
                                               "and two more")
    if q.ndim < 2:
        raise bad_shape(fn, "query", q.shape, "(..., L, E)")
    if k.shape[-1] != q.shape[-1]:
        raise bad_shape(fn, "key", k.shape, f"(..., S, {q.shape[-1]}) (the query's E)")
    if v.shape[-2] != k.shape[-2]:
        raise bad_shape(fn, "value", v.shape, f"(..., {k.shape[-2]}, Ev) (the key's S)")
    checks.flag(fn, "is_causal", is_causal)
    p = checks.number(fn, "dropout_p", dropout_p, 0.0, 1.0)
    return low_precision_inputs(lambda q, k, v: (_attend(fn, q, k, v, attn_mask, p, is_causal,
                                                         scale),), q, k, v)[0]


def _attend(fn, q, k, v, attn_mask, p, is_causal, scale):
    """The attention of checked arguments: the fused kernel where it takes them, else the
    composition."""
    if attn_mask is None and p == 0.0:
        scale_ = 1.0 / math.sqrt(q.shape[-1]) if scale is None else \
            checks.number(fn, "scale", scale)
        out = fused_attention(q, k, v, is_causal, scale_)
        if out is not None:
            return out
    q, k, v = widened(q, k, v)
    scores = attention_scores(fn, q, k, attn_mask, is_causal, scale)
    if attn_mask is None:
        weights = softmax(scores, -1)
    else:           # a row every mask hides takes no value (not 0 / 0), as PyTorch's
        hidden = logic.all(logic.eq(scores, -math.inf), -1, keepdim=True)
        weights = where(hidden, 0.0, softmax(where(hidden, 0.0, scores), -1))
    weights = fresh_dropout(weights, p)
    lead, length, s = q.shape[:-2], q.shape[-2], k.shape[-2]
    batch = math.prod(lead)
    out = matmul(reshape(weights, (batch, length, s)), reshape(v, (batch, s, v.shape[-1])))
    return reshape(out, lead + (length, v.shape[-1]))


__all__ = ["scaled_dot_product_attention"]
