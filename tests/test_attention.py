"""scaled_dot_product_attention against a float64 NumPy reference (masks, causality,
scale, dropout) on both backends; MultiheadAttention and TransformerEncoderLayer: PyTorch's
parameter names and mask conventions, causality, a captured training step; gradients in
float64; bad arguments."""
import math

import numpy as np
import pytest

import dualgrad as dg
from dualgrad import nn
from conftest import peak_during, train_step

RNG = np.random.default_rng(4)
Q = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
K = RNG.standard_normal((2, 3, 7, 4)).astype(np.float32)
V = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)


def attention_ref(q, k, v, keep=None, add=None, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if add is not None:
        s = s + add
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


KEEP = RNG.random((5, 7)) > 0.4
KEEP[:, 0] = True
ADD = RNG.standard_normal((3, 5, 7)).astype(np.float32)


@pytest.mark.parametrize("kwargs, ref", [
    ({}, {}),
    (dict(is_causal=True), dict(keep=np.tril(np.ones((5, 7), bool)))),
    (dict(attn_mask=KEEP), dict(keep=KEEP)),
    (dict(attn_mask=ADD), dict(add=ADD)),
    (dict(scale=0.3), dict(scale=0.3)),
    (dict(attn_mask=KEEP, is_causal=True), dict(keep=KEEP & np.tril(np.ones((5, 7), bool)))),
], ids=["plain", "causal", "bool mask", "float mask", "scale", "bool mask and causal"])
def test_sdpa_matches_the_reference(device, kwargs, ref):
    y = dg.scaled_dot_product_attention(dg.ag_tensor(Q), dg.ag_tensor(K), dg.ag_tensor(V),
                                        **kwargs)
    np.testing.assert_allclose(y.numpy(), attention_ref(Q, K, V, **ref), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hide", ["bool", "float"])
def test_a_row_every_mask_hides_is_zero_with_zero_gradients(device, hide):
    """As PyTorch's: the hidden row's output and every gradient it sends are 0, and the
    other rows are as before (no NaN reaches the value gradient through the hidden row)."""
    keep = np.ones((5, 7), bool)
    keep[1] = False
    mask = keep if hide == "bool" else np.where(keep, 0.0, -np.inf).astype(np.float32)
    g = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    ts = [dg.ag_tensor(a, requires_grad=True) for a in (Q, K, V)]
    with dg.with_grad_tape():
        y = dg.scaled_dot_product_attention(*ts, attn_mask=mask)
        dg.sum(y * dg.ag_tensor(g)).backward()
    out = y.numpy()
    np.testing.assert_array_equal(out[:, :, 1], 0.0)
    rows = [0, 2, 3, 4]
    np.testing.assert_allclose(out[:, :, rows], attention_ref(Q, K, V)[:, :, rows], rtol=1e-5,
                               atol=1e-5)
    dq, dk, dv = (t.grad.numpy() for t in ts)
    assert np.isfinite(dq).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    np.testing.assert_array_equal(dq[:, :, 1], 0.0)
    kept_g = g.copy()
    kept_g[:, :, 1] = 0.0                 # the hidden row adds nothing to dv
    w = attention_ref(Q, K, np.broadcast_to(np.eye(7, dtype=np.float32), (2, 3, 7, 7)))
    np.testing.assert_allclose(dv, np.swapaxes(w, -1, -2) @ kept_g, rtol=1e-4, atol=1e-5)


EYE = np.broadcast_to(np.eye(7, dtype=np.float32), (2, 3, 7, 7)).copy()


def test_sdpa_dropout_drops_weights_and_repeats_with_the_seed(device):
    def run():
        dg.manual_seed(7)
        return dg.scaled_dot_product_attention(dg.ag_tensor(Q), dg.ag_tensor(K),
                                               dg.ag_tensor(EYE), dropout_p=0.5).numpy()
    weights = run()            # value = I: the output is the dropped-out weights
    kept = weights != 0
    assert 0.3 < kept.mean() < 0.7
    full = attention_ref(Q, K, EYE)
    np.testing.assert_allclose(weights[kept], 2 * full[kept], rtol=1e-5)
    np.testing.assert_array_equal(run(), weights)


def _causal_step(mask: bool, shape=(4, 24, 16)):
    """Outputs and gradients of causal attention, fused (is_causal) or composed (the same
    mask given as a boolean array)."""
    r = np.random.default_rng(2)
    ts = [dg.ag_tensor(r.standard_normal(shape).astype(np.float32), requires_grad=True)
          for _ in range(3)]
    keep = np.tril(np.ones(shape[1:2] * 2, bool))
    with dg.with_grad_tape():
        y = dg.scaled_dot_product_attention(*ts, **(dict(attn_mask=keep) if mask else
                                                     dict(is_causal=True)))
        dg.sum(y * y).backward()
    return [y.numpy()] + [t.grad.numpy() for t in ts]


# Heads of 128 run within the shared memory of every device, lavapipe's 32 KiB too; their
# gradients (up to about 11) are sums of 40 products of 128 terms that cancel to near 0, so
# their absolute bound is 1e-5 of that size.
@pytest.mark.parametrize("shape, atol", [((4, 24, 16), 1e-5), ((2, 40, 128), 1e-4)],
                         ids=["head 16", "head 128"])
def test_the_fused_kernel_and_the_composition_agree(device, shape, atol):
    for fused, composed in zip(_causal_step(False, shape), _causal_step(True, shape)):
        np.testing.assert_allclose(fused, composed, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("causal", [False, True])
def test_cpu_attention_in_parts_and_slices_gives_the_bits_of_one_call(monkeypatch, causal):
    """The cpu kernels cut the batch into parts on every core and each part into slices
    of a few score matrices: the same bits as all at once, and the heads read in place
    from a packed projection the same bits as heads copied out of it."""
    from dualgrad.cpu import attention as cpu_attention, split
    r = np.random.default_rng(7)
    qkv = r.standard_normal((6, 24, 3, 4, 8)).astype(np.float32)
    g = r.standard_normal((6, 24, 4, 8)).astype(np.float32)
    heads = [np.ascontiguousarray(qkv[:, :, i].transpose(0, 2, 1, 3)).reshape(24, 24, 8)
             for i in range(3)]
    rows_g = np.ascontiguousarray(g.transpose(0, 2, 1, 3)).reshape(24, 24, 8)

    def run():
        o, lse = cpu_attention.attention(*heads, causal, 0.3)
        grads = cpu_attention.attention_backward(*heads, o, lse, rows_g, causal, 0.3)
        po, plse = cpu_attention.attention_packed(qkv, 4, causal, 0.3)
        pgrads = cpu_attention.attention_packed_backward(qkv, po, plse, g, 4, causal, 0.3)
        return [o, lse, *grads], [po, plse, pgrads]
    whole, packed = run()
    monkeypatch.setattr(split, "SPLIT_MIN", 64)          # parts on 3 cores, slices of 2-3
    monkeypatch.setattr(split, "cores", lambda: 3)
    monkeypatch.setattr(cpu_attention, "SLICE", 2 * 24 * 24)
    cut, cut_packed = run()
    for a, b in zip(whole + packed, cut + cut_packed):
        np.testing.assert_array_equal(a, b)
    _assert_heads_agree(*whole, *packed)


def _assert_heads_agree(o, lse, dq, dk, dv, po, plse, pgrads):
    """The packed kernels' results for qkv (N, L, 3, H, D) are the bits of the row kernels'
    for its heads copied out as (N * H, L, D)."""
    n, length, _, heads, d = pgrads.shape

    def rows(x):
        return x.transpose(0, 2, 1, 3).reshape(n * heads, length, d)
    np.testing.assert_array_equal(rows(po), o)
    np.testing.assert_array_equal(plse, lse)
    for i, grad in enumerate((dq, dk, dv)):
        np.testing.assert_array_equal(rows(pgrads[:, :, i]), grad)


def attention_grads_ref(q, k, v, g, causal, scale):
    """dq, dk, dv of attention_ref's output against g, in float64."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    dw = g @ np.swapaxes(v, -1, -2)
    ds = w * (dw - (dw * w).sum(-1, keepdims=True)) * scale
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(w, -1, -2) @ g


@pytest.mark.parametrize("rows, cols, causal", [(40, 40, True), (40, 40, False),
                                                (50, 20, True), (20, 50, True)])
def test_cpu_attention_in_blocks_of_rows(monkeypatch, rows, cols, causal):
    """Heads whose scores pass SLICE elements are taken in blocks of rows (under the causal
    mask, each against the keys its last row sees), their key and value gradients summed
    over the blocks: the float64 reference's values within float32 rounding, the same bits
    on any number of cores, and heads read in place the bits of heads copied out."""
    from dualgrad.cpu import attention as cpu_attention, split
    monkeypatch.setattr(cpu_attention, "SLICE", 16 * cols)   # blocks of 16 rows
    r = np.random.default_rng(8)
    heads, d, scale = 3, 8, 0.4
    qkv = r.standard_normal((2, max(rows, cols), 3, heads, d)).astype(np.float32)
    g = r.standard_normal((2, rows, heads, d)).astype(np.float32)

    def copied(x, length):
        return np.ascontiguousarray(x[:, :length].transpose(0, 2, 1, 3)).reshape(
            2 * heads, length, d)
    q, k, v = copied(qkv[:, :, 0], rows), copied(qkv[:, :, 1], cols), copied(qkv[:, :, 2], cols)
    rows_g = copied(g, rows)

    def run():
        o, lse = cpu_attention.attention(q, k, v, causal, scale)
        return [o, lse, *cpu_attention.attention_backward(q, k, v, o, lse, rows_g, causal,
                                                          scale)]
    whole = run()
    o, _, dq, dk, dv = whole
    np.testing.assert_allclose(o, attention_ref(q, k, v, np.tril(np.ones((rows, cols), bool))
                                                if causal else None, scale=scale),
                               rtol=1e-5, atol=1e-6)
    for grad, ref in zip((dq, dk, dv), attention_grads_ref(q, k, v, rows_g, causal, scale)):
        np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(split, "SPLIT_MIN", 64)          # parts on 3 cores
    monkeypatch.setattr(split, "cores", lambda: 3)
    for a, b in zip(whole, run()):
        np.testing.assert_array_equal(a, b)
    if rows == cols:
        po, plse = cpu_attention.attention_packed(qkv, heads, causal, scale)
        pgrads = cpu_attention.attention_packed_backward(qkv, po, plse, g, heads, causal,
                                                         scale)
        _assert_heads_agree(*whole, po, plse, pgrads)


@pytest.mark.gpu
def test_the_fused_kernel_keeps_no_score_matrix(gpu):
    shape = (4, 256, 16)
    fused = peak_during(lambda: _causal_step(False, shape))
    composed = peak_during(lambda: _causal_step(True, shape))
    scores = 4 * 256 * 256 * 4                  # one (4, 256, 256) float32 matrix
    # (parameters and gradients counted in both: the score matrices are the difference)
    assert fused < 2 * scores and fused + 2 * scores <= composed, (fused, composed)


@pytest.mark.parametrize("name, fn, shapes", [
    ("sdpa", lambda q, k, v: dg.scaled_dot_product_attention(q, k, v),
     [(2, 3, 4), (2, 5, 4), (2, 5, 3)]),
    ("sdpa causal", lambda q, k, v: dg.scaled_dot_product_attention(q, k, v, is_causal=True),
     [(1, 4, 2), (1, 4, 2), (1, 4, 3)]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradients_by_finite_differences(name, fn, shapes):
    assert dg.gradcheck(fn, tuple(RNG.standard_normal(s) for s in shapes))


def test_multihead_attention_follows_pytorchs_layout_and_masks(device):
    dg.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2)
    assert list(mha.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                      "out_proj.bias"]
    x = RNG.standard_normal((5, 3, 8)).astype(np.float32)          # (L, N, E)
    hide = np.triu(np.ones((5, 5), bool), 1)                        # True: not attended
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    out, weights = mha(*3 * [dg.ag_tensor(x)], attn_mask=hide, key_padding_mask=pad)
    # the same with the projections written out, heads as a batch axis
    sd = mha.state_dict()
    xb = x.transpose(1, 0, 2)
    q, k, v = np.split(xb @ sd["in_proj_weight"].T + sd["in_proj_bias"], 3, -1)
    heads = (lambda t: t.reshape(3, 5, 2, 4).transpose(0, 2, 1, 3))
    keep = ~hide[None, None] & ~pad[:, None, None, :]
    o = attention_ref(heads(q), heads(k), heads(v), keep=keep)
    want = o.transpose(0, 2, 1, 3).reshape(3, 5, 8) @ sd["out_proj.weight"].T + \
        sd["out_proj.bias"]
    np.testing.assert_allclose(out.numpy(), want.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)
    assert weights.shape == (3, 5, 5)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1, rtol=1e-5)
    assert np.all(weights.numpy()[1, :, 3:] == 0) and np.all(weights.numpy()[:, 0, 1:] == 0)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("autocast", [None, "bfloat16"])
def test_self_attention_in_place_matches_the_composition(device, batch_first, autocast,
                                                         monkeypatch):
    # Without weights or masks, self-attention reads its heads in place from the
    # projection and writes their gradients as one: the same values, and gradients, as
    # the composition that need_weights=True takes.
    from dualgrad.api import device as api_device
    parts, kind = [], type(api_device.active())
    packed = kind.attention_packed

    def spy(self, *args):
        parts.append(args[1])
        return packed(self, *args)
    monkeypatch.setattr(kind, "attention_packed", spy)
    dg.manual_seed(4)
    mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)
    x = RNG.standard_normal((3, 7, 16) if batch_first else (7, 3, 16)).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    found = []
    for need_weights in (False, True):
        t = dg.ag_tensor(x, requires_grad=True)
        with dg.with_grad_tape(), dg.autocast(autocast or "bfloat16",
                                              enabled=autocast is not None):
            out, weights = mha(t, t, t, need_weights=need_weights, is_causal=True)
            dg.sum(out * dg.ag_tensor(g)).backward()
        assert (weights is None) != need_weights
        assert parts == ([] if need_weights else [4])     # in place, 4 heads
        parts.clear()
        found.append([out.numpy(), t.grad.numpy(), mha.in_proj_weight.grad.numpy()])
        mha.zero_grad()
    for fused, composed in zip(*found):
        if autocast is None:
            np.testing.assert_allclose(fused, composed, rtol=2e-4, atol=2e-5)
        else:   # the fused kernel's backward reads its bfloat16 output, as PyTorch's does,
            # where the composition's has float32 values: the gradients about a bfloat16
            # unit (2^-8) apart as a whole (an element of a sum of many: more)
            assert np.linalg.norm(fused - composed) <= 2 ** -8 * np.linalg.norm(composed)


def test_multihead_attention_projects_keys_and_values_of_their_own_widths(device):
    """kdim and vdim: PyTorch's separate projections and their state_dict names, keys of 5
    features and values of 3 projected to the 8 of the heads."""
    dg.manual_seed(2)
    mha = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True)
    assert mha.in_proj_weight is None
    sd = mha.state_dict()
    assert list(sd) == ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                        "out_proj.weight", "out_proj.bias"]
    assert [sd[k].shape for k in list(sd)[:3]] == [(8, 8), (8, 5), (8, 3)]
    r = np.random.default_rng(6)
    x, k, v = (r.standard_normal(s).astype(np.float32) for s in ((2, 4, 8), (2, 6, 5),
                                                                    (2, 6, 3)))
    bias = sd["in_proj_bias"] + r.standard_normal(24).astype(np.float32)
    mha.load_state_dict({**sd, "in_proj_bias": bias})
    for need_weights in (True, False):
        out, _ = mha(dg.ag_tensor(x), dg.ag_tensor(k), dg.ag_tensor(v),
                     need_weights=need_weights, is_causal=False)
        bq, bk, bv = np.split(bias, 3)
        heads = (lambda t: t.reshape(2, -1, 2, 4).transpose(0, 2, 1, 3))
        o = attention_ref(heads(x @ sd["q_proj_weight"].T + bq),
                          heads(k @ sd["k_proj_weight"].T + bk),
                          heads(v @ sd["v_proj_weight"].T + bv))
        want = o.transpose(0, 2, 1, 3).reshape(2, 4, 8) @ sd["out_proj.weight"].T + \
            sd["out_proj.bias"]
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(dg.ShapeError, match=r"argument 'key'.*\(kdim\)"):
        mha(dg.ag_tensor(x), dg.ag_tensor(x), dg.ag_tensor(v))
    with pytest.raises(dg.InvalidValueError, match=r"argument 'add_bias_kv'"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_takes_unbatched_inputs_as_a_batch_of_one(device, batch_first):
    """(L, E) query and (S, E) key and value, a (S,) padding mask: PyTorch's unbatched form,
    the batch of one's output (L, E) and weights (L, S) or per head (H, L, S)."""
    dg.manual_seed(5)
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    r = np.random.default_rng(3)
    x, kv = (r.standard_normal(shape).astype(np.float32) for shape in ((5, 8), (6, 8)))
    pad = np.array([False, True, False, False, True, False])
    axis = 0 if batch_first else 1
    for per_head in (True, False):
        out, w = mha(dg.ag_tensor(x), dg.ag_tensor(kv), dg.ag_tensor(kv), key_padding_mask=pad,
                     average_attn_weights=per_head is False)
        bout, bw = mha(*(dg.ag_tensor(np.expand_dims(a, axis)) for a in (x, kv, kv)),
                       key_padding_mask=pad[None], average_attn_weights=per_head is False)
        assert out.shape == (5, 8) and w.shape == ((2, 5, 6) if per_head else (5, 6))
        np.testing.assert_array_equal(out.numpy(), np.squeeze(bout.numpy(), axis))
        np.testing.assert_array_equal(w.numpy(), bw.numpy()[0])
    alone = mha(dg.ag_tensor(x), dg.ag_tensor(x), dg.ag_tensor(x), need_weights=False)
    assert alone[0].shape == (5, 8) and alone[1] is None


@pytest.mark.parametrize("norm_first", [False, True])
def test_an_encoder_layer_with_a_causal_mask_ignores_the_future(device, norm_first):
    dg.manual_seed(1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    assert list(layer.state_dict())[:4] == ["self_attn.in_proj_weight",
                                            "self_attn.in_proj_bias",
                                            "self_attn.out_proj.weight",
                                            "self_attn.out_proj.bias"]
    assert list(layer.state_dict())[4:] == ["linear1.weight", "linear1.bias", "linear2.weight",
                                            "linear2.bias", "norm1.weight", "norm1.bias",
                                            "norm2.weight", "norm2.bias"]
    x = RNG.standard_normal((2, 6, 8)).astype(np.float32)
    changed = x.copy()
    changed[:, 4:] += 1.0
    a = layer(dg.ag_tensor(x), is_causal=True).numpy()
    b = layer(dg.ag_tensor(changed), is_causal=True).numpy()
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-5, atol=1e-6)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-3


def test_an_encoder_layer_without_biases_has_pytorchs_keys(device):
    layer = nn.TransformerEncoderLayer(8, 2, 16, bias=False)
    assert list(layer.state_dict()) == ["self_attn.in_proj_weight", "self_attn.out_proj.weight",
                                        "linear1.weight", "linear2.weight", "norm1.weight",
                                        "norm2.weight"]
    x = RNG.standard_normal((3, 2, 8)).astype(np.float32)
    y = nn.LayerNorm(8, bias=False)(dg.ag_tensor(x)).numpy()
    np.testing.assert_allclose(y, (x - x.mean(-1, keepdims=True)) /
                               np.sqrt(x.var(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)
    assert layer(dg.ag_tensor(x)).shape == (3, 2, 8)


@pytest.mark.gpu
def test_a_captured_transformer_step_replays_with_fresh_dropout(gpu):
    def make():
        dg.manual_seed(5)
        model = nn.Sequential(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1,
                                                         batch_first=True), nn.Flatten(),
                              nn.Linear(32, 2))
        return model, dg.optimizer_adam(model.parameters(), lr=1e-2)

    (m1, o1), (m2, o2) = make(), make()
    eager = (lambda x, y: train_step(m1, o1, x, y))
    captured = dg.capture_step(lambda x, y: train_step(m2, o2, x, y))
    losses = []
    for k in range(5):
        x = np.random.default_rng(k).standard_normal((3, 4, 8)).astype(np.float32)
        y = np.arange(3) % 2
        losses.append(eager(x, y).item())
        assert captured(x, y).item() == losses[-1], k
    assert captured.replays >= 1 and captured.reason == ""


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: dg.scaled_dot_product_attention(Q, K[..., :3], V), dg.ShapeError,
     r"argument 'key'"),
    (lambda: dg.scaled_dot_product_attention(Q, K, V[:, :, :6]), dg.ShapeError,
     r"argument 'value'"),
    (lambda: dg.scaled_dot_product_attention(Q, K, V, attn_mask=np.ones((4, 7), bool)),
     dg.ShapeError, r"argument 'attn_mask'"),
    (lambda: dg.scaled_dot_product_attention(Q, K, V, dropout_p=1.5), dg.InvalidValueError,
     r"argument 'dropout_p'"),
    (lambda: nn.MultiheadAttention(10, 3), dg.InvalidValueError, r"argument 'embed_dim'"),
    (lambda: nn.MultiheadAttention(8, 2)(*3 * [dg.ag_tensor(Q[0])]), dg.ShapeError,
     r"argument 'query'"),
    (lambda: nn.TransformerEncoderLayer(8, 2, activation="tanh"), dg.ArgumentTypeError,
     r"argument 'activation'"),
])
def test_bad_arguments_name_themselves(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_positional_embeddings_add_each_positions_row(device):
    x = RNG.standard_normal((2, 5, 6)).astype(np.float32)
    fixed = nn.PositionalEmbedding(8, 6, learned=False)
    t = np.arange(5)[:, None]
    rate = 10000.0 ** (-np.arange(0, 6, 2) / 6)
    want = np.zeros((5, 6))
    want[:, 0::2], want[:, 1::2] = np.sin(t * rate), np.cos(t * rate)
    np.testing.assert_allclose(fixed(dg.ag_tensor(x)).numpy(), x + want, rtol=1e-5,
                               atol=1e-6)
    assert list(fixed.state_dict()) == ["pe"] and fixed.num_parameters() == 0
    learned = nn.PositionalEmbedding(8, 6)
    xt = dg.ag_tensor(x)
    with dg.with_grad_tape():
        dg.sum(learned(xt)).backward()
    grad = learned.weight.grad.numpy()
    np.testing.assert_array_equal(grad[:5], 2.0)          # two rows of the batch each
    np.testing.assert_array_equal(grad[5:], 0.0)
    assert learned.num_parameters() == 48
    with pytest.raises(dg.ShapeError, match="^PositionalEmbedding: argument 'x'"):
        learned(dg.ag_tensor(np.zeros((9, 6), np.float32)))


def shaders_launched(dev, monkeypatch) -> list:
    """The names of the shaders ``dev`` launches from now on, in order."""
    launched, launch = [], type(dev).launch

    def spy(self, shader, spec, *rest):
        launched.append(shader)
        return launch(self, shader, spec, *rest)
    monkeypatch.setattr(type(dev), "launch", spy)
    return launched


@pytest.mark.gpu
def test_heads_of_64_take_the_tiled_kernels_on_this_device(gpu, monkeypatch):
    # The tiles (64 or 32 rows a workgroup, as the device's shared memory allows) must be
    # what runs here, else the differential checks of heads of 64 test the other kernel.
    from dualgrad.api import device
    dev = device.active().device
    launched = shaders_launched(dev, monkeypatch)
    rng = np.random.default_rng(3)
    q, k, v = (dg.ag_tensor(rng.standard_normal((2, 70, 64)).astype(np.float32),
                            requires_grad=True) for _ in range(3))
    with dg.with_grad_tape():
        dg.sum(dg.scaled_dot_product_attention(q, k, v, is_causal=True)).backward()
    keys = "attention_tiled_grad_dq" if dev.ctx.float_atomics else "attention_tiled_grad"
    assert {"attention_tiled", "attention_tiled_dq", keys} <= set(launched)
    assert "attention" not in launched


@pytest.mark.gpu
@pytest.mark.parametrize("packed", [False, True])
def test_dq_added_atomically_agrees_with_dq_in_tiles(gpu, monkeypatch, packed):
    # Where the device adds float32 atomically the keys' kernel makes dq too (in shares of
    # 32 keys, added in any order); elsewhere dq has its own kernel: both agree, and dk and
    # dv are the same bits.
    from dualgrad.api import device
    ctx = device.active().device.ctx
    if not ctx.float_atomics:
        pytest.skip(f"{ctx.name} does not add float32 atomically")
    rng = np.random.default_rng(6)
    mha = nn.MultiheadAttention(128, 2, batch_first=True)    # heads of 64, read in place
    x = rng.standard_normal((2, 45, 128) if packed else (3, 70, 3, 64)).astype(np.float32)

    def grad_of_x():
        t = dg.ag_tensor(x, requires_grad=True)
        with dg.with_grad_tape():
            if packed:
                out = mha(t, t, t, need_weights=False, is_causal=True)[0]
            else:
                out = dg.scaled_dot_product_attention(t[:, :, 0], t[:, :, 1], t[:, :, 2],
                                                      is_causal=True)
            dg.sum(out * out).backward()
        return t.grad.numpy()
    atomic = grad_of_x()
    monkeypatch.setattr(ctx, "float_atomics", False)
    tiled = grad_of_x()
    np.testing.assert_allclose(atomic, tiled, rtol=1e-5, atol=1e-6)
    if not packed:
        np.testing.assert_array_equal(atomic[:, :, 1:], tiled[:, :, 1:])    # dk, dv


@pytest.fixture
def deterministic():
    dg.use_deterministic_algorithms(True)
    yield
    dg.use_deterministic_algorithms(False)


@pytest.mark.gpu
def test_deterministic_algorithms_give_dq_the_same_bits_each_run(gpu, deterministic,
                                                                  monkeypatch):
    # Under use_deterministic_algorithms(True) dq takes its own kernel, whose sums come in
    # one order: two runs agree bit for bit, whatever the device adds atomically.
    from dualgrad.api import device
    dev = device.active().device
    launched = shaders_launched(dev, monkeypatch)
    assert dg.are_deterministic_algorithms_enabled()
    x = np.random.default_rng(8).standard_normal((3, 3, 90, 64)).astype(np.float32)
    runs = []
    for _ in range(2):
        q, k, v = (dg.ag_tensor(a, requires_grad=True) for a in x)
        with dg.with_grad_tape():
            out = dg.scaled_dot_product_attention(q, k, v, is_causal=True)
            dg.sum(out * out).backward()
        runs.append([t.grad.numpy() for t in (q, k, v)])
    for first, second in zip(*runs):
        np.testing.assert_array_equal(first, second)
    assert "attention_tiled_grad" in launched and "attention_tiled_grad_dq" not in launched


def test_use_deterministic_algorithms_takes_flags_only():
    with pytest.raises(dg.ArgumentTypeError,
                       match=r"^use_deterministic_algorithms: argument 'mode' has type str"):
        dg.use_deterministic_algorithms("yes")
    with pytest.raises(dg.ArgumentTypeError, match=r"argument 'warn_only' has type int"):
        dg.use_deterministic_algorithms(True, warn_only=1)
    assert not dg.are_deterministic_algorithms_enabled()       # (unchanged by either)
