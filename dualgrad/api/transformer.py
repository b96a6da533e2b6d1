"""Attention layers: ``MultiheadAttention`` and ``TransformerEncoderLayer``, with PyTorch's
arguments, parameter names (so their state_dicts carry over) and initialisation."""
from __future__ import annotations

import copy
import math

import numpy as np

from ..errors import bad_shape, bad_type, bad_value
from . import checks, init, ops, random
from .attention import (attention_scores, fused_attention, fused_packed_attention,
                        kernels_take, low_precision_inputs, mask_tensor, widened)
from .indexing import split, squeeze, unsqueeze
from .logic import logical_not, where
from .nn import Dropout, LayerNorm, Linear, Module, ModuleList
from .ops import _tensor, linear, matmul, reshape, softmax, transpose
from .tensor import BOOL, Tensor, ag_param, ag_tensor


class MultiheadAttention(Module):
    """Attention of ``num_heads`` heads over ``embed_dim`` features, as
    ``torch.nn.MultiheadAttention``: in_proj_weight (3E, E) and in_proj_bias project
    query, key and value; out_proj (a Linear) the result. With keys of ``kdim`` or values
    of ``vdim`` features other than E, q_proj_weight (E, E), k_proj_weight (E, kdim) and
    v_proj_weight (E, vdim) project them instead (in_proj_weight is then None, as
    PyTorch's). add_bias_kv and add_zero_attn are not supported (False only). Inputs are
    (L, N, E), or (N, L, E) with ``batch_first``; a boolean ``attn_mask`` or
    ``key_padding_mask`` is True where a position may NOT be attended (PyTorch's
    convention here, the opposite of scaled_dot_product_attention's); float masks add.
    Without ``need_weights``, masks other than the causal one, or active dropout, the
    attention is the fused kernel's (no L x S matrix kept)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False):
        super().__init__()
        fn = "MultiheadAttention"
        for name, value in (("add_bias_kv", add_bias_kv), ("add_zero_attn", add_zero_attn)):
            if checks.flag(fn, name, value):
                raise bad_value(fn, name, value, "False (not supported)")
        self.embed_dim = e = checks.integer(fn, "embed_dim", embed_dim, 1)
        self.kdim = e if kdim is None else checks.integer(fn, "kdim", kdim, 1)
        self.vdim = e if vdim is None else checks.integer(fn, "vdim", vdim, 1)
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        self.num_heads = checks.integer(fn, "num_heads", num_heads, 1)
        if e % self.num_heads:
            raise bad_value(fn, "embed_dim", embed_dim,
                            f"a multiple of num_heads ({num_heads})")
        self.head_dim = e // self.num_heads
        self.dropout = checks.number(fn, "dropout", dropout, 0.0, 1.0)
        # the attention weights' dropout: a mask per call from the layer's own seed and
        # counter, checkpointed (as Dropout's)
        self.attn_dropout = Dropout(self.dropout)
        self.batch_first = checks.flag(fn, "batch_first", batch_first)
        checks.flag(fn, "bias", bias)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = ag_param(np.zeros((3 * e, e), np.float32))
            init.xavier_uniform_(self.in_proj_weight)
        else:
            self.in_proj_weight = None
            for name, width in (("q_proj_weight", e), ("k_proj_weight", self.kdim),
                                ("v_proj_weight", self.vdim)):
                setattr(self, name, ag_param(np.zeros((e, width), np.float32)))
                init.xavier_uniform_(getattr(self, name))
        self.in_proj_bias = ag_param(np.zeros(3 * e, np.float32)) if bias else None
        self.out_proj = Linear(e, e, bias)
        if bias:
            init.zeros_(self.out_proj.bias)

    def _heads(self, x: Tensor, n: int) -> Tensor:
        """(N, L, E) -> (N, heads, L, head_dim)."""
        return transpose(reshape(x, (n, x.shape[1], self.num_heads, self.head_dim)),
                         (0, 2, 1, 3))

    def _projected(self, query, key, value) -> tuple:
        """q, k, v of shape (N, L or S, E): one product where they are one tensor."""
        w, b = self.in_proj_weight, self.in_proj_bias
        if query is key and key is value and w is not None:
            return split(linear(query, w, b), self.embed_dim, -1)
        ws = split(w, self.embed_dim, 0) if w is not None else \
            (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        bs = split(b, self.embed_dim, 0) if b is not None else (None,) * 3
        return tuple(linear(x, wi, bi) for x, wi, bi in zip((query, key, value), ws, bs))

    def _masked(self, scores: Tensor, mask, name: str, shape: tuple) -> Tensor:
        """scores (N, H, L, S) with ``mask`` (boolean: True hides; float: added)."""
        if mask is None:
            return scores
        m = mask_tensor("MultiheadAttention", name, mask, scores)
        if m.shape not in shape:
            raise bad_shape("MultiheadAttention", name, m.shape, " or ".join(map(str, shape)))
        m = reshape(m, _mask_view(m.shape, scores.shape, name))
        return where(logical_not(m), scores, -math.inf) if m.dtype == BOOL else scores + m

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        """(attention output like query, the attention weights (N, L, S), averaged over the
        heads, or per head (N, H, L, S), or None without ``need_weights``). As in PyTorch,
        query, key and value may also be unbatched, (L, E) and (S, E) (key_padding_mask
        (S,)): the output (L, E), the weights (L, S) or (H, L, S)."""
        fn = "MultiheadAttention"
        same = query is key and key is value
        query = _tensor(fn, "query", query)
        key = query if same else _tensor(fn, "key", key, query)
        value = query if same else _tensor(fn, "value", value, query)
        if query.ndim == 2 and key.ndim == 2 and value.ndim == 2:
            return self._unbatched(query, key, value, same, key_padding_mask, need_weights,
                                   attn_mask, average_attn_weights, is_causal)
        for name, t, width, dim in (("query", query, self.embed_dim, "embed_dim"),
                                    ("key", key, self.kdim, "kdim"),
                                    ("value", value, self.vdim, "vdim")):
            if t.ndim != 3 or t.shape[-1] != width:
                raise bad_shape(fn, name, t.shape, f"3 dimensions, the last {width} ({dim})")
        checks.flag(fn, "need_weights", need_weights)
        checks.flag(fn, "is_causal", is_causal)
        if not self.batch_first:
            query, key, value = (transpose(t, (1, 0, 2)) for t in (query, key, value))
            if same:
                key = value = query
        n, length, e = query.shape
        s = key.shape[1]
        if key.shape[0] != n or value.shape[:2] != (n, s):
            raise bad_shape(fn, "key", key.shape, "the batch of the query, and value's length")
        h = self.num_heads
        fused = not need_weights and key_padding_mask is None and attn_mask is None and \
            not (self.training and self.dropout > 0.0)
        if same and fused and self._qkv_same_embed_dim:
            out = self._self_attention(query, n, is_causal)
            if out is not None:
                return out, None
        q, k, v = (self._heads(t, n) for t in self._projected(query, key, value))

        def core(q, k, v):
            if fused:
                out = fused_attention(q, k, v, is_causal, 1.0 / math.sqrt(self.head_dim))
                if out is not None:
                    return out, None
            q, k, v = widened(q, k, v)
            scores = attention_scores(fn, q, k, None, is_causal and attn_mask is None, None)
            scores = self._masked(scores, attn_mask, "attn_mask",
                                  ((length, s), (n * h, length, s)))
            scores = self._masked(scores, key_padding_mask, "key_padding_mask", ((n, s),))
            weights = self.attn_dropout(softmax(scores, -1))
            return matmul(reshape(weights, (n * h, length, s)),
                          reshape(v, (n * h, s, self.head_dim))), weights
        out, weights = low_precision_inputs(core, q, k, v)
        out = reshape(transpose(reshape(out, (n, h, length, self.head_dim)), (0, 2, 1, 3)),
                      (n, length, e))
        out = self.out_proj(out)
        if not self.batch_first:
            out = transpose(out, (1, 0, 2))
        if not need_weights:
            return out, None
        return out, (ops.mean(weights, 1) if average_attn_weights else weights)

    def _unbatched(self, query, key, value, same, key_padding_mask, need_weights, attn_mask,
                   average_attn_weights, is_causal):
        """forward of (L, E) inputs as a batch of one, the batch axis dropped after."""
        axis = 0 if self.batch_first else 1
        batched = [unsqueeze(t, axis) for t in ((query,) if same else (query, key, value))]
        if same:
            batched = batched * 3
        if key_padding_mask is not None:
            key_padding_mask = unsqueeze(mask_tensor("MultiheadAttention", "key_padding_mask",
                                                     key_padding_mask, query), 0)
        out, weights = self.forward(*batched, key_padding_mask=key_padding_mask,
                                    need_weights=need_weights, attn_mask=attn_mask,
                                    average_attn_weights=average_attn_weights,
                                    is_causal=is_causal)
        return squeeze(out, axis), None if weights is None else squeeze(weights, 0)

    def _self_attention(self, x: Tensor, n: int, is_causal: bool):
        """The fused attention of x (N, L, E) with itself, its output projected: the heads
        read in place from the projection (``fused_packed_attention``), with no copy or
        transpose into heads and back; None where the kernels do not take the shapes."""
        length, h, d = x.shape[1], self.num_heads, self.head_dim
        if not kernels_take(n * h, length, d):
            return None
        qkv = linear(x, self.in_proj_weight, self.in_proj_bias)
        out = fused_packed_attention(reshape(qkv, (n, length, 3, h, d)), is_causal,
                                     1.0 / math.sqrt(d))
        out = self.out_proj(reshape(out, (n, length, self.embed_dim)))
        return transpose(out, (1, 0, 2)) if not self.batch_first else out

    def extra_repr(self) -> str:
        dims = "" if self._qkv_same_embed_dim else f", kdim={self.kdim}, vdim={self.vdim}"
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}{dims}"


def _mask_view(shape: tuple, scores: tuple, name: str) -> tuple:
    """How a mask of ``shape`` lines up with scores (N, H, L, S)."""
    n, h, length, s = scores
    if name == "key_padding_mask":
        return (n, 1, 1, s)
    return (1, 1, length, s) if len(shape) == 2 else (n, h, length, s)


_ACTIVATIONS = {"relu": ops.relu, "gelu": ops.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and layer
    norm, as ``torch.nn.TransformerEncoderLayer``: after each block by default, before it
    with ``norm_first`` (pre-norm)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        fn = "TransformerEncoderLayer"
        if activation in _ACTIVATIONS:
            self.activation = _ACTIVATIONS[activation]
        elif callable(activation):
            self.activation = activation
        else:
            raise bad_type(fn, "activation", activation, '"relu", "gelu" or a callable')
        self.norm_first = checks.flag(fn, "norm_first", norm_first)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                            batch_first=batch_first)
        self.linear1 = Linear(d_model, checks.integer(fn, "dim_feedforward",
                                                      dim_feedforward, 1), bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def _attend(self, x, mask, padding, is_causal):
        out, _ = self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False,
                                attn_mask=mask, is_causal=is_causal)
        return self.dropout1(out)

    def _feed_forward(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._attend(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attend(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))


def _clones(layer: Module, count: int) -> ModuleList:
    """``count`` deep copies of ``layer`` (its weights, as PyTorch's), each dropout with a
    seed of its own (PyTorch's share one generator)."""
    copies = []
    for _ in range(count):
        clone = copy.deepcopy(layer)
        for module in clone.modules():
            if isinstance(module, Dropout):
                module.seed = int(random.generator().integers(0, 2 ** 63))
                module.step = 0
        copies.append(clone)
    return ModuleList(copies)


def _stack_parts(fn: str, layer, layer_kind: type, norm, num_layers) -> int:
    """Check a stack's arguments: the layer, the final norm, the count."""
    if not isinstance(layer, Module):
        raise bad_type(fn, fn.replace("Transformer", "").lower() + "_layer", layer,
                       f"a Module (a {layer_kind.__name__})")
    if norm is not None and not isinstance(norm, Module):
        raise bad_type(fn, "norm", norm, "None or a Module (a LayerNorm)")
    return checks.integer(fn, "num_layers", num_layers, 1)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm`` where given,
    as ``torch.nn.TransformerEncoder``: the copies start from the layer's weights (deep
    copies, as PyTorch's), under ``layers.0``, ``layers.1``, ... in ``state_dict()``. Each
    copy's dropout draws masks of its own (a new seed; PyTorch's share one generator)."""

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        fn = "TransformerEncoder"
        count = _stack_parts(fn, encoder_layer, TransformerEncoderLayer, norm, num_layers)
        checks.flag(fn, "enable_nested_tensor", enable_nested_tensor)   # (no nested tensors:
        checks.flag(fn, "mask_check", mask_check)                       # accepted, unused)
        self.layers = _clones(encoder_layer, count)
        self.num_layers = count
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        causal = False if is_causal is None else checks.flag("TransformerEncoder",
                                                             "is_causal", is_causal)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoderLayer(TransformerEncoderLayer):
    """Self-attention over the target, attention to the encoder's output (``memory``) and
    a feed-forward block, each with a residual connection and layer norm, as
    ``torch.nn.TransformerDecoderLayer`` (after each block by default, before it with
    ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                         batch_first, norm_first, bias)
        # PyTorch's order of registration: self_attn, multihead_attn, linear1, dropout,
        # linear2, norm1..3, dropout1..3 (state_dict keys follow it)
        parts = dict(self._modules)
        self._modules.clear()
        for name in ("self_attn",):
            self._modules[name] = parts[name]
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                                 batch_first=batch_first)
        for name in ("linear1", "dropout", "linear2", "norm1", "norm2"):
            self._modules[name] = parts[name]
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias)
        for name in ("dropout1", "dropout2"):
            self._modules[name] = parts[name]
        self.dropout3 = Dropout(dropout)

    def _cross(self, x, memory, mask, padding, is_causal):
        out, _ = self.multihead_attn(x, memory, memory, key_padding_mask=padding,
                                     need_weights=False, attn_mask=mask, is_causal=is_causal)
        return self.dropout2(out)

    def _feed_forward(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False):
        x = tgt
        if self.norm_first:
            x = x + self._attend(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._cross(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                memory_is_causal)
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._attend(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._cross(x, memory, memory_mask, memory_key_padding_mask,
                                       memory_is_causal))
        return self.norm3(x + self._feed_forward(x))


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` applied in turn to the target, each
    attending to ``memory``, then ``norm`` where given, as ``torch.nn.TransformerDecoder``
    (copies as TransformerEncoder's)."""

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        count = _stack_parts("TransformerDecoder", decoder_layer, TransformerDecoderLayer,
                             norm, num_layers)
        self.layers = _clones(decoder_layer, count)
        self.num_layers = count
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        causal = False if tgt_is_causal is None else checks.flag(
            "TransformerDecoder", "tgt_is_causal", tgt_is_causal)
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, causal, memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """An encoder and a decoder of ``num_encoder_layers`` and ``num_decoder_layers`` layers,
    each stack ending in a LayerNorm, as ``torch.nn.Transformer``;
    ``forward(src, tgt, ...)`` gives the decoder's output."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*args), num_encoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*args), num_decoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                            memory_key_padding_mask, tgt_is_causal, memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int) -> Tensor:
        """A float (sz, sz) mask: 0 on and below the diagonal, -inf above it (the causal
        mask), as PyTorch's."""
        n = checks.integer("generate_square_subsequent_mask", "sz", sz, 1)
        mask = np.triu(np.full((n, n), -np.inf, np.float32), 1)
        return ag_tensor(mask)


class PositionalEmbedding(Module):
    """Adds each position's vector to the rows of x (..., T, dim), T <= ``max_len``:
    learned (a Parameter ``weight`` (max_len, dim) from N(0, 1), as an Embedding's) or, with
    ``learned=False``, the fixed sinusoids of "Attention is all you need" (a buffer ``pe``:
    sin(t / 10000^(2i/dim)) at column 2i, cos at 2i + 1). The rows are read as a slice of
    the table: nothing is uploaded, so a recorded step keeps it."""

    def __init__(self, max_len: int, dim: int, learned: bool = True):
        super().__init__()
        fn = "PositionalEmbedding"
        self.max_len = checks.integer(fn, "max_len", max_len, 1)
        self.dim = checks.integer(fn, "dim", dim, 1)
        self.learned = checks.flag(fn, "learned", learned)
        if learned:
            self.weight = ag_param(random.generator().standard_normal(
                (self.max_len, self.dim), dtype=np.float32))
        else:
            t = np.arange(self.max_len, dtype=np.float64)[:, None]
            rate = 10000.0 ** (-np.arange(0, self.dim, 2, dtype=np.float64) / self.dim)
            table = np.zeros((self.max_len, self.dim))
            table[:, 0::2] = np.sin(t * rate)
            table[:, 1::2] = np.cos(t * rate[:self.dim // 2])
            self.register_buffer("pe", table.astype(np.float32))

    def forward(self, x):
        x = _tensor("PositionalEmbedding", "x", x)
        if x.ndim < 2 or x.shape[-1] != self.dim or x.shape[-2] > self.max_len:
            raise bad_shape("PositionalEmbedding", "x", x.shape,
                            f"(..., T, {self.dim}) with T <= {self.max_len}")
        table = self.weight if self.learned else self.pe
        return x + table[:x.shape[-2]]

    def extra_repr(self) -> str:
        return f"{self.max_len}, {self.dim}, learned={self.learned}"


__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer", "PositionalEmbedding"]
