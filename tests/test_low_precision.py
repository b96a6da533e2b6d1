"""float16 and bfloat16 tensors: made, converted and read back on both backends, rounded
as NumPy and ml_dtypes round (the differential check "convert16" holds the two backends'
conversions together bit for bit); the ops on them compute in float32 and round once, and
their gradients are 16-bit (the checks "<family>@<type>" hold the backends together)."""
import copy
import pickle

import ml_dtypes
import numpy as np
import pytest

import dualgrad as dg
from conftest import assert_layer_step_replays

LOW = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
NAMES = {"float16": LOW[0], "bfloat16": LOW[1]}


def _values():
    """Ties, the edges of each type's range, subnormals, specials; odd length."""
    return np.array([1.0, 1.00390625, 1.01171875, 1 + 2.0**-11, 1 + 3 * 2.0**-11, -0.0,
                     np.nan, np.inf, -np.inf, 65504, 65519.99, 65520, 3.3895e38, 3.4e38,
                     2.0**-24, 2.0**-25, 1.5 * 2.0**-25, 1e-40, -1e-45, 0.1, -7.25],
                    np.float32)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, signed zeros told apart, NaN equal to NaN."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32) * ~np.isnan(a),
                                                 b.view(np.uint32) * ~np.isnan(b)) and \
        np.array_equal(np.isnan(a), np.isnan(b))


@pytest.mark.parametrize("name", NAMES)
def test_conversion_rounds_to_nearest_even_and_widens_exactly(device, name):
    x = _values()
    with np.errstate(over="ignore"):
        want = x.astype(NAMES[name])
    low = dg.ag_tensor(x).to(name)
    assert low.dtype == NAMES[name] and low.shape == x.shape
    got = low.numpy()
    assert got.dtype == NAMES[name]
    assert _same(got, want)
    back = low.float()
    assert back.dtype == np.float32
    assert _same(back.numpy(), want.astype(np.float32))
    # straight from host values, rounded once from float32, as .to() does
    assert _same(dg.ag_tensor(x, dtype=name).numpy(), want)


def test_the_methods_and_the_names(device):
    t = dg.ag_tensor(np.arange(5, dtype=np.float32) / 3)
    assert t.half().dtype == np.float16 and t.bfloat16().dtype == LOW[1]
    assert t.to(np.float16).dtype == np.float16
    assert t.astype("half").dtype == np.float16
    assert dg.bfloat16 == LOW[1] and dg.float16 == LOW[0] and dg.float32 == np.float32
    assert t.to(dg.bfloat16).to(dg.float32).dtype == np.float32


@pytest.mark.parametrize("n", [0, 1, 2, 3, 1025])
def test_every_length_converts_including_odd_ones(device, n):
    """Two 16-bit values share a 32-bit word on the device: odd lengths and the empty
    tensor keep their last value and their neighbours."""
    x = (np.arange(n, dtype=np.float32) - n / 2) * 0.37
    for low in LOW:
        t = dg.ag_tensor(x).to(low)
        assert _same(t.numpy(), x.astype(low))
        assert _same(t.float().numpy(), x.astype(low).astype(np.float32))


def _low(x, low):
    """Values of 16-bit type ``low``, as float32."""
    return np.asarray(x, np.float32).astype(low).astype(np.float32)


@pytest.mark.parametrize("low", LOW, ids=str)
def test_arithmetic_on_16_bit_tensors_is_correctly_rounded(device, low):
    """+ - * of two 16-bit values in float32, rounded once more, is the exact result rounded
    (float32 has more than twice their significand bits, plus two)."""
    rng = np.random.default_rng(1)
    x, y = (_low(rng.uniform(-300, 300, 4099), low) for _ in range(2))
    a, b = dg.ag_tensor(x, dtype=low), dg.ag_tensor(y, dtype=low)
    exact = {"add": x.astype(np.float64) + y, "sub": x.astype(np.float64) - y,
             "mul": x.astype(np.float64) * y}
    for name, got in (("add", a + b), ("sub", a - b), ("mul", a * b)):
        assert got.dtype == low
        with np.errstate(over="ignore"):             # (past float16's range: inf)
            want = exact[name].astype(low) if low == np.float16 else \
                exact[name].astype(np.float32).astype(low)   # (ml_dtypes rounds float32s)
        assert _same(got.numpy(), want), name


# Every public op on float tensors, called on leaves: (x, m, img, w, q) of shapes
# (2, 3, 4), (4, 5), (2, 3, 8, 8), (4, 3, 3, 3), (2, 2, 5, 8).
def _ints(*values):
    return dg.ag_tensor(np.array(values), dtype="int32")


OPS = {
    "add": lambda x, m, img, w, q: x + x.flip(0), "radd": lambda x, m, img, w, q: 2.0 + x,
    "sub": lambda x, m, img, w, q: x - 1, "mul": lambda x, m, img, w, q: x * x,
    "div": lambda x, m, img, w, q: x / 3, "pow": lambda x, m, img, w, q: dg.abs(x) ** 1.5,
    "neg": lambda x, m, img, w, q: -x, "matmul": lambda x, m, img, w, q: x @ m,
    "exp": lambda x, m, img, w, q: dg.exp(x), "gelu": lambda x, m, img, w, q: dg.gelu(x),
    "leaky_relu": lambda x, m, img, w, q: dg.leaky_relu(x, 0.1),
    "clamp": lambda x, m, img, w, q: dg.clamp(x, -0.5, 0.5),
    "maximum": lambda x, m, img, w, q: dg.maximum(x, x.flip(2)),
    "lerp": lambda x, m, img, w, q: dg.lerp(x, x.flip(1), 0.3),
    "atan2": lambda x, m, img, w, q: dg.atan2(x, x.flip(0)),
    "fmod": lambda x, m, img, w, q: dg.fmod(x, 0.3),
    "floor_divide": lambda x, m, img, w, q: x // 0.3,
    "remainder": lambda x, m, img, w, q: x % 0.3,
    "hardtanh": lambda x, m, img, w, q: dg.hardtanh(x),
    "sum": lambda x, m, img, w, q: x.sum(), "mean": lambda x, m, img, w, q: x.mean(1),
    "max": lambda x, m, img, w, q: x.max(), "min": lambda x, m, img, w, q: dg.min(x, 2).values,
    "var": lambda x, m, img, w, q: dg.var(x), "std": lambda x, m, img, w, q: dg.std(x, 1),
    "logsumexp": lambda x, m, img, w, q: dg.logsumexp(x, 1),
    "norm": lambda x, m, img, w, q: dg.norm(x), "cumsum": lambda x, m, img, w, q: dg.cumsum(x, 1),
    "cumprod": lambda x, m, img, w, q: dg.cumprod(x, 1),
    "prod": lambda x, m, img, w, q: dg.prod(x, 2),
    "reshape": lambda x, m, img, w, q: x.reshape(6, 4),
    "transpose": lambda x, m, img, w, q: dg.transpose(x),
    "softmax": lambda x, m, img, w, q: dg.softmax(x, dim=-1),
    "log_softmax": lambda x, m, img, w, q: dg.log_softmax(x, dim=-1),
    "linear": lambda x, m, img, w, q: dg.linear(x, m.T, m[0]),
    "layer_norm": lambda x, m, img, w, q: dg.layer_norm(x, m[:, 0], m[:, 1]),
    "embedding": lambda x, m, img, w, q: dg.embedding(m, _ints(0, 2, 1)),
    "dropout": lambda x, m, img, w, q: dg.dropout(x, 0.5, 1, 2),
    "gather": lambda x, m, img, w, q: dg.gather(x, 2, _ints(0, 3, 1).reshape(1, 3, 1)),
    "scatter_add": lambda x, m, img, w, q: dg.scatter_add(x, 2, _ints(0, 3, 1).reshape(
        1, 3, 1), x[:1, :, :1]),
    "index_select": lambda x, m, img, w, q: dg.index_select(x, 1, _ints(2, 0)),
    "getitem": lambda x, m, img, w, q: x[0, 1:, ::2], "mask": lambda x, m, img, w, q: x[x > 0],
    "squeeze": lambda x, m, img, w, q: x[None].squeeze(0),
    "flatten": lambda x, m, img, w, q: x.flatten(),
    "expand": lambda x, m, img, w, q: x[:, :1].expand(2, 3, 4),
    "concat": lambda x, m, img, w, q: dg.concat([x, x]),
    "stack": lambda x, m, img, w, q: dg.stack([x, x]),
    "split": lambda x, m, img, w, q: dg.split(x, 3, dim=2)[1],
    "roll": lambda x, m, img, w, q: dg.roll(x, 1, 0),
    "repeat": lambda x, m, img, w, q: x.repeat(2, 1, 1),
    "pad": lambda x, m, img, w, q: dg.pad(x, (1, 2)),
    "where": lambda x, m, img, w, q: dg.where(x > 0, x, x.flip(0)),
    "masked_fill": lambda x, m, img, w, q: x.masked_fill(x > 0, 1.0),
    "tril": lambda x, m, img, w, q: dg.tril(x),
    "sort": lambda x, m, img, w, q: dg.sort(x, 2)[0],
    "topk": lambda x, m, img, w, q: dg.topk(x, 2)[0],
    "mse_loss": lambda x, m, img, w, q: dg.mse_loss(x, x.flip(0)),
    "l1_loss": lambda x, m, img, w, q: dg.l1_loss(x, x.flip(0)),
    "huber_loss": lambda x, m, img, w, q: dg.huber_loss(x, x.flip(0)),
    "smooth_l1_loss": lambda x, m, img, w, q: dg.smooth_l1_loss(x, x.flip(0)),
    "bce_with_logits": lambda x, m, img, w, q: dg.binary_cross_entropy_with_logits(
        x, dg.abs(x.flip(0)) / 4),
    "nll_loss": lambda x, m, img, w, q: dg.nll_loss(m, _ints(0, 1, 2, 3)),
    "cross_entropy": lambda x, m, img, w, q: dg.softmax_cross_entropy(m, _ints(0, 1, 2, 3)),
    "kl_div": lambda x, m, img, w, q: dg.kl_div(x, dg.abs(x.flip(1))),
    "cosine_similarity": lambda x, m, img, w, q: dg.cosine_similarity(x, x.flip(0)),
    "conv1d": lambda x, m, img, w, q: dg.conv1d(img[:, :, 0], w[:, :, 0]),
    "conv2d": lambda x, m, img, w, q: dg.conv2d(img, w, padding=1),
    "conv_transpose2d": lambda x, m, img, w, q: dg.conv_transpose2d(
        img, dg.transpose(w, (1, 0, 2, 3))),
    "max_pool2d": lambda x, m, img, w, q: dg.max_pool2d(img, 2),
    "avg_pool2d": lambda x, m, img, w, q: dg.avg_pool2d(img, 2),
    "adaptive_avg_pool2d": lambda x, m, img, w, q: dg.adaptive_avg_pool2d(img, 1),
    "unfold": lambda x, m, img, w, q: dg.unfold(img, 3),
    "batch_norm": lambda x, m, img, w, q: dg.batch_norm(img, None, None, training=True),
    "round_decimals": lambda x, m, img, w, q: dg.round(x, decimals=1),
    "softplus_beta": lambda x, m, img, w, q: dg.softplus(x, beta=2.0, threshold=3.0),
    "clamp_tensors": lambda x, m, img, w, q: dg.clamp(x, min=x.flip(0), max=x.flip(1)),
    "group_norm": lambda x, m, img, w, q: dg.group_norm(img, 3),
    "rms_norm": lambda x, m, img, w, q: dg.rms_norm(x, (4,)),
    "attention": lambda x, m, img, w, q: dg.scaled_dot_product_attention(q, q, q,
                                                                         is_causal=True),
}


@pytest.mark.parametrize("low", LOW, ids=str)
def test_every_op_on_16_bit_tensors_rounds_its_float32_result_once(device, low):
    """An op built of others too: rounded at its end, not at its parts'."""
    rng = np.random.default_rng(2)
    shapes = [(2, 3, 4), (4, 5), (2, 3, 8, 8), (4, 3, 3, 3), (2, 2, 5, 8)]
    values = [_low(rng.standard_normal(shape), low) for shape in shapes]
    for name, op in OPS.items():
        got = op(*[dg.ag_tensor(v, dtype=low) for v in values])
        wide = op(*[dg.ag_tensor(v) for v in values])
        assert got.dtype == low and got.shape == wide.shape, name
        with np.errstate(over="ignore"):
            want = wide.numpy().astype(low)
        if device == "cpu":
            assert _same(got.numpy(), want), name
        else:         # (a unary kernel's 16-bit form may fuse multiply-adds differently)
            assert _within_a_unit(got.numpy(), want, low), name


@pytest.mark.parametrize("low", LOW, ids=str)
def test_a_0d_float32_tensor_does_not_promote_a_16_bit_one(device, low):
    """PyTorch's rule: a 0-d tensor of the same category beside tensors with dimensions
    leaves their type (x16 + a 0-d float32 is 16-bit, as x16 + a number); two tensors with
    dimensions promote."""
    x = dg.ag_tensor(np.array([1.5, 2.25, -3.0], np.float32), dtype=low)
    y = dg.ag_tensor(np.array([1.0, 2.0, 3.0], np.float32))
    point = dg.ag_tensor(np.float32(0.1))
    for result in (x + point, x * y.sum(), dg.maximum(x, point)):
        assert result.dtype == low
    np.testing.assert_array_equal((x + point).numpy(), (x + 0.1).numpy())
    assert (x + y).dtype == np.float32
    assert (point + dg.ag_tensor(np.float32(0.2), dtype=low)).dtype == np.float32


@pytest.mark.parametrize("low", LOW, ids=str)
def test_a_number_or_0d_tensor_beside_a_16_bit_one_is_rounded_to_its_type_first(device, low):
    """PyTorch casts a Python number (and a 0-d float tensor) to the 16-bit operand's type,
    through float32, before the op: the op then rounds its float32 result once."""
    top = 256.0 if low == LOW[1] else 2048.0          # where the type's spacing is 2
    x = dg.ag_tensor(np.array([top, top, 200.0], np.float32), dtype=low)
    w = x.numpy().astype(np.float32)

    def rounded(v):                                   # a number as PyTorch takes it
        return np.float32(v).astype(low).astype(np.float32)

    def want(values):
        return np.asarray(values, np.float32).astype(low)
    # rounds to 1 in the type (under half its spacing at 1), and top + near above the tie
    near = 1 + 0.3 * 2.0 ** (-8 if low == LOW[1] else -11)
    point = dg.ag_tensor(np.float32(near))
    cases = [(x + near, w + rounded(near)), (near + x, rounded(near) + w),
             (x - (-near), w + rounded(near)), (x * near, w * rounded(near)),
             (x / (1 / near), w / rounded(1 / near)), (x ** near, w ** rounded(near)),
             (dg.clamp(x, min=top + near), np.maximum(w, rounded(top + near))),
             (x + point, w + rounded(near)), (dg.maximum(x, point), np.maximum(w, rounded(near)))]
    for got, expected in cases:
        assert got.dtype == low
        assert _same(got.numpy(), want(expected)), (got.numpy(), want(expected))
    assert float((x + near).numpy()[0]) == top       # the tie at top + 1 goes to even


@pytest.mark.parametrize("low", LOW, ids=str)
def test_normalisations_of_16_bit_input_beside_float32_parameters_keep_its_type(device, low):
    """PyTorch's mixed-type normalisations: a 16-bit input and float32 weights (a float32
    model's layer under autocast) give the input's type, the float32 result rounded once;
    a float32 BatchNorm's statistics move in float32. Under autocast, layer_norm and
    group_norm (PyTorch's float32 ops) give float32."""
    rng = np.random.default_rng(6)
    x = _low(rng.standard_normal((4, 6)) + 1.0, low)
    img = _low(rng.standard_normal((2, 4, 3, 3)), low)
    ones, zeros = (dg.ag_tensor(np.full(n, v, np.float32)) for n, v in ((6, 1.0), (6, 0.0)))
    cases = {
        "layer_norm": lambda t: dg.layer_norm(t, ones, zeros),
        "rms_norm": lambda t: dg.rms_norm(t, (6,), ones),
        "group_norm": lambda t: dg.group_norm(t, 2, ones[:4], zeros[:4]),
    }
    for name, op in cases.items():
        arg = img if name == "group_norm" else x
        got = op(dg.ag_tensor(arg, dtype=low))
        assert got.dtype == low, name
        assert _same(got.numpy(), op(dg.ag_tensor(arg)).numpy().astype(low)), name
        with dg.autocast(str(low)):
            kept = op(dg.ag_tensor(arg, dtype=low)).dtype
        assert kept == (np.float32 if name != "rms_norm" else low), name
    wide, mixed = dg.nn.BatchNorm1d(6), dg.nn.BatchNorm1d(6)
    with dg.with_grad_tape():
        want = wide(dg.ag_tensor(x)).numpy()
        got = mixed(dg.ag_tensor(x, dtype=low))
    assert got.dtype == low and _same(got.numpy(), want.astype(low))
    np.testing.assert_array_equal(mixed.running_mean.numpy(), wide.running_mean.numpy())
    np.testing.assert_array_equal(mixed.running_var.numpy(), wide.running_var.numpy())


@pytest.mark.parametrize("low", LOW, ids=str)
def test_batch_norm_moves_16_bit_running_statistics_in_place(device, low):
    """A converted model's BatchNorm: its 16-bit running mean and variance move by the
    batch's statistics (computed in float32, rounded once into the buffers), as the float32
    module's do, and eval mode normalises by them."""
    x = (np.random.default_rng(4).standard_normal((8, 3)) + 1.0).astype(np.float32)
    x = _low(x, low).astype(np.float32)
    wide, narrow = dg.nn.BatchNorm1d(3), dg.nn.BatchNorm1d(3).to(low)
    for bn, dtype in ((wide, None), (narrow, low)):
        with dg.with_grad_tape():
            bn(dg.ag_tensor(x, dtype=dtype))
    for name in ("running_mean", "running_var"):
        got, want = getattr(narrow, name), getattr(wide, name)
        assert got.dtype == low
        assert _within_a_unit(got.numpy(), want.numpy().astype(low), low), name
        assert not np.array_equal(want.numpy(), [0.0, 0.0, 0.0] if name == "running_mean"
                                  else [1.0, 1.0, 1.0])
    narrow.eval()
    wide.load_state_dict({k: np.asarray(v, np.float32) for k, v in narrow.state_dict().items()
                          if k != "num_batches_tracked"}, strict=False)
    wide.eval()
    out = narrow(dg.ag_tensor(x, dtype=low)).numpy()
    assert _within_a_unit(out, wide(dg.ag_tensor(x)).numpy().astype(low), low)


def _within_a_unit(got, want, low) -> bool:
    """Equal, or neighbouring values of the 16-bit type (NaN equal to NaN)."""
    bits = [np.asarray(v, low).view(np.int16).astype(np.int32) for v in (got, want)]
    ordered = [np.where(b < 0, -(b & 0x7FFF), b) for b in bits]
    nan = np.isnan(got.astype(np.float32))
    return np.array_equal(nan, np.isnan(want.astype(np.float32))) and \
        bool((np.abs(ordered[0] - ordered[1])[~nan] <= 1).all())


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 1025])
def test_unary_kernels_take_16_bit_storage_of_every_length(device, low, n):
    """unary and unary_backward read and write the 16-bit type (two to a word on a device)
    as the float32 kernels' results rounded; odd lengths keep their last element."""
    from dualgrad.api.device import active
    backend = active()
    x = _low(np.linspace(-3, 3, n), low).astype(low)
    for op in ("exp", "gelu", "neg", "sigmoid"):
        y = backend.download(backend.unary(op, backend.upload(x)))
        with np.errstate(over="ignore"):
            want = backend.download(backend.unary(op, backend.upload(
                x.astype(np.float32)))).astype(low)
        assert y.dtype == low and y.shape == x.shape
        assert _within_a_unit(y, want, low) and (device == "gpu" or _same(y, want)), op
        g = backend.download(backend.unary_backward(op, *(backend.upload(v) for v in
                                                          (x, y, x))))
        with np.errstate(over="ignore"):
            want = backend.download(backend.unary_backward(op, *(backend.upload(
                v.astype(np.float32)) for v in (x, y, x)))).astype(low)
        assert g.dtype == low and _within_a_unit(g, want, low), op


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("m, n, k", [(8, 12, 5), (33, 7, 9), (4, 8, 3000), (70, 64, 40)])
def test_products_take_and_give_16_bit_storage(device, low, m, n, k):
    """Backend.matmul made in a 16-bit type takes operands stored in it as they are and,
    with ``result``, stores each output rounded once after its epilogue: the same bits as
    the float32 product of the rounded operands, rounded (quads of 16-bit outputs where N
    is a multiple of 4, a float32 product converted otherwise; a deep K splits)."""
    from dualgrad.api.device import active
    from dualgrad.backend import Epilogue
    backend = active()
    rng = np.random.default_rng(m + n + k)
    a = _low(rng.standard_normal((m, k)), low).astype(low)
    b = _low(rng.standard_normal((n, k)), low).astype(low)
    bias = backend.upload(rng.standard_normal(n).astype(np.float32))
    for relu in (False, True):
        epilogue = Epilogue(bias=bias, relu=relu)
        got = backend.matmul(backend.upload(a), backend.upload(b), False, True,
                             epilogue=epilogue, low=low, result=low)
        wide = backend.matmul(*(backend.upload(x.astype(np.float32)) for x in (a, b)),
                              False, True, epilogue=epilogue, low=low)
        assert got.dtype == low
        assert _same(backend.download(got), backend.download(backend.cast(wide, low)))


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("head", [3, 8, 64])
def test_attention_kernels_take_16_bit_storage(device, low, head):
    """q, k, v (and the backward's o and g) read in 16 bits, o and the gradients written
    so, lse float32: the float32 kernels' results rounded, within a unit (heads of 64 take
    the device's tiled kernels; odd ones go through float32 copies)."""
    from dualgrad.api.device import active
    backend = active()
    rng = np.random.default_rng(head)
    qkv = _low(rng.uniform(-2, 2, (2, 19, 3, 2, head)), low).astype(low)
    g = _low(rng.uniform(-2, 2, (2, 19, 2, head)), low).astype(low)
    wide = [backend.upload(a.astype(np.float32)) for a in (qkv, g)]
    o, lse = backend.attention_packed(backend.upload(qkv), 2, True, 0.3)
    o32, lse32 = backend.attention_packed(wide[0], 2, True, 0.3)
    assert backend.download(lse).dtype == np.float32
    got, want = backend.download(o), backend.download(o32).astype(low)
    assert got.dtype == low and _within_a_unit(got, want, low)
    grad = backend.attention_packed_backward(backend.upload(qkv), o, lse, backend.upload(g),
                                             2, True, 0.3)
    want = backend.attention_packed_backward(wide[0], backend.cast(o, np.float32), lse,
                                             wide[1], 2, True, 0.3)
    assert _within_a_unit(backend.download(grad), backend.download(want).astype(low), low)
    q, k, v = (np.ascontiguousarray(qkv[:, :, i, 0]) for i in range(3))
    o, lse = backend.attention(*(backend.upload(a) for a in (q, k, v)), False, 0.3)
    o32, _ = backend.attention(*(backend.upload(a.astype(np.float32)) for a in (q, k, v)),
                               False, 0.3)
    assert _within_a_unit(backend.download(o), backend.download(o32).astype(low), low)
    grads = backend.attention_backward(*(backend.upload(a) for a in (q, k, v)), o, lse,
                                       backend.upload(g[:, :, 0].copy()), False, 0.3)
    wants = backend.attention_backward(*(backend.upload(a.astype(np.float32))
                                         for a in (q, k, v)), backend.cast(o, np.float32),
                                       lse, backend.upload(g[:, :, 0].astype(np.float32)),
                                       False, 0.3)
    for a, b in zip(grads, wants):
        assert _within_a_unit(backend.download(a), backend.download(b).astype(low), low)


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 1025])
def test_fill_sets_16_bit_storage_to_the_value_rounded_from_float32(device, low, n):
    """Two values to a device's word, an odd length's last one too; a 16-bit loss's
    gradient seed is such a fill."""
    from dualgrad.api.device import active
    backend = active()
    for value in (1.0, 1 / 3, -2.0 ** -20, 70000.0):
        h = backend.empty((n,), low)
        backend.fill(h, value)
        with np.errstate(over="ignore"):
            want = np.full(n, np.float32(value)).astype(low)
        assert _same(backend.download(h), want), value


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("n", [0, 1, 3, 1025])
def test_binary_kernels_take_16_bit_operands_of_one_shape(device, low, n):
    from dualgrad.api.device import active
    backend = active()
    x = _low(np.linspace(-3, 3, n), low).astype(low)
    y = _low(np.linspace(0.5, 2, n)[::-1], low).astype(low)
    for op in ("add", "mul", "div", "maximum", "atan2"):
        got = backend.download(backend.binary(op, backend.upload(x), backend.upload(y)))
        with np.errstate(over="ignore"):
            want = backend.download(backend.binary(op, *(backend.upload(
                v.astype(np.float32)) for v in (x, y)))).astype(low)
        assert got.dtype == low and _within_a_unit(got, want, low), op
        grads = backend.binary_backward(op, *(backend.upload(v) for v in (x, y, x)))
        wide = backend.binary_backward(op, *(backend.upload(v.astype(np.float32))
                                             for v in (x, y, x)))
        for g, w in zip(grads, wide):
            with np.errstate(over="ignore"):
                w = backend.download(w).astype(low)
            assert _within_a_unit(backend.download(g), w, low), op


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("n", [1, 3, 4, 1025])
def test_binary_kernels_take_a_float32_and_a_16_bit_operand(device, low, n):
    """Either side 16-bit, one shape: the float32 op of the widened operand, its bits;
    any other mix is refused."""
    from dualgrad.api.device import active
    from dualgrad.errors import InvalidValueError
    backend = active()
    x = np.linspace(-3, 3, n).astype(np.float32) * np.float32(1.1)
    y = _low(np.linspace(0.5, 2, n)[::-1], low).astype(low)
    for op in ("add", "sub", "mul", "maximum"):
        for a, b in ((x, y), (y, x)):
            got = backend.download(backend.binary(op, backend.upload(a), backend.upload(b)))
            want = backend.download(backend.binary(op, *(backend.upload(
                v.astype(np.float32)) for v in (a, b))))
            assert got.dtype == np.float32 and np.array_equal(got, want), op
    other = LOW[0] if low == LOW[1] else LOW[1]
    with pytest.raises(InvalidValueError, match="float32 beside a 16-bit type"):
        backend.binary("add", backend.upload(x.astype(other)), backend.upload(y))
    if n > 1:
        with pytest.raises(InvalidValueError, match="float32 beside a 16-bit type"):
            backend.binary("add", backend.upload(x[:1]), backend.upload(y))


@pytest.mark.parametrize("low", LOW, ids=str)
def test_a_residual_sum_takes_its_16_bit_operand_as_it_is(device, low, monkeypatch):
    """float32 + 16-bit (and -) of one shape: one kernel on both storages, a float32
    result, each operand's gradient of its own type; no widened copy is made."""
    from dualgrad.api import low_precision
    widened = []
    monkeypatch.setattr(low_precision, "converted",
                        lambda *args, _c=low_precision.converted: widened.append(args) or
                        _c(*args))
    x = np.array([1.5, -2.0, 3.25, 0.1], np.float32)
    f = dg.ag_tensor(x, requires_grad=True)
    h = dg.ag_tensor(x[::-1].copy(), dtype=low, requires_grad=True)
    with dg.with_grad_tape():
        y = (f + h) * 2.0 - (h - f)
        y.sum().backward()
    assert y.dtype == np.float32 and not widened
    assert (f * h).dtype == np.float32 and len(widened) == 1     # (mul widens it)
    wide = x[::-1].astype(low).astype(np.float32)
    assert np.array_equal(y.numpy(), (x + wide) * 2 - (wide - x))
    assert f.grad.dtype == np.float32 and np.array_equal(f.grad.numpy(), np.full(4, 3.0))
    assert h.grad.dtype == low and np.array_equal(h.grad.numpy(), np.ones(4, low))


@pytest.mark.gpu
def test_elementwise_ops_on_16_bit_tensors_hold_16_bit_storage_only(gpu):
    """No float32 copy is made or kept: four elementwise ops on a 2 MiB bfloat16 tensor
    under a tape take their four 2 MiB results (a widened copy and a float32 result would
    be 6 MiB more an op)."""
    b = dg.ag_tensor(np.linspace(-1, 1, 1 << 20), dtype="bfloat16", requires_grad=True)
    with dg.with_grad_tape():
        used = dg.tape_mem()
        dg.reset_peak_memory_stats()
        y = dg.gelu(dg.exp(b) * 2.0) + b
        grown = dg.tape_mem()["peak_bytes"] - used["buffer_bytes"] - used["p_buffer_bytes"]
        assert y.dtype == LOW[1]
        assert 4 * 2 ** 21 <= grown < 4 * 2 ** 21 + 2 ** 16


def test_results_take_pytorchs_promotion(device):
    x = np.array([1.5, -2.25, 3.0], np.float32)
    b, h, f = (dg.ag_tensor(x, dtype=d) for d in ("bfloat16", "float16", "float32"))
    assert (b + 2.0).dtype == LOW[1] and (2 * h).dtype == LOW[0]      # numbers keep it
    assert (b + f).dtype == np.float32 and (f * h).dtype == np.float32
    assert (b + h).dtype == np.float32                                 # two 16-bit kinds
    assert (b > 0).dtype == np.bool_ and dg.argmax(h).dtype == np.int32
    values, indices = dg.topk(b, 2)
    assert values.dtype == LOW[1] and indices.dtype == np.int32
    assert [p.dtype for p in dg.split(h, 1)] == [LOW[0]] * 3
    assert dg.where(b > 0, b, 0.0).dtype == LOW[1]
    if device == "cpu":                           # (the cpu's float64 tensors)
        wide = b * dg.ag_tensor(x.astype(np.float64), dtype="float64")
        assert wide.dtype == np.float64
        assert np.array_equal(wide.numpy(), x.astype(np.float64) ** 2)


@pytest.mark.parametrize("low", LOW, ids=str)
def test_gradients_of_16_bit_tensors_are_16_bit_and_add_up(device, low):
    x = np.array([[0.5, -1.25, 3.0], [2.0, -0.75, 1.5]], np.float32)
    t = dg.ag_tensor(x, dtype=low, requires_grad=True)
    with dg.with_grad_tape():
        loss = (t * t).sum() + (3 * t).mean(0).sum()    # t meets two ops: its gradients add
        assert loss.dtype == low
        loss.backward()                                 # (the seed made in 16 bits)
    assert t.grad.dtype == low
    assert _same(t.grad.numpy(), (2 * x + 1.5).astype(low))
    with dg.with_grad_tape():
        dg.exp(t).sum().backward()                      # accumulates into .grad
    want = (2 * x + 1.5).astype(low).astype(np.float32) + np.exp(x).astype(low)
    assert _same(t.grad.numpy(), want.astype(low))


def test_the_gradient_flows_through_conversions(device):
    w = dg.ag_param(np.array([0.5, -2.0, 3.0], np.float32))
    with dg.with_grad_tape():
        loss = (w.bfloat16() * 3).half().float().sum()
        loss.backward()
    assert w.grad.dtype == np.float32 and np.array_equal(w.grad.numpy(), [3.0, 3.0, 3.0])


def test_the_16_bit_types_convert_from_and_to_the_others_through_float32(device):
    i = dg.ag_tensor(np.array([3, 257, 16777217, -40000]), dtype="int32")
    # (int32 rounds to float32 first, as PyTorch converts: 16777217 -> 16777216)
    assert _same(i.to("bfloat16").numpy(),
                 np.array([3, 257, 16777217, -40000]).astype(np.float32).astype(LOW[1]))
    h = dg.ag_tensor(np.array([1.5, -2.7, 70000.0, 0.1], np.float32)).half()
    # (70000 is past float16's range: inf, which saturates)
    assert np.array_equal(h.to("int32").numpy(), [1, -2, 2 ** 31 - 1, 0])
    assert _same(h.to("bfloat16").numpy(),
                 h.numpy().astype(np.float32).astype(LOW[1]))
    assert np.array_equal(h.bool().numpy(), [True, True, True, True])


@pytest.mark.gpu
def test_a_captured_step_with_16_bit_activations_replays_as_eager_steps(gpu):
    assert_layer_step_replays(
        lambda h: (dg.gelu(h.bfloat16()) @ h.bfloat16().T).mean(), 6, seed=5)


def test_a_16_bit_tensor_prints_copies_pickles_and_moves(device):
    x = _values()
    with np.errstate(over="ignore"):
        want = x.astype(LOW[1])
    t = dg.ag_tensor(x).bfloat16()
    assert "dtype=bfloat16" in repr(t)
    assert _same(copy.deepcopy(t).numpy(), want)
    assert _same(pickle.loads(pickle.dumps(t)).numpy(), want)
    assert float(dg.ag_tensor(np.array([2.5], np.float32)).half().item()) == 2.5


def test_a_16_bit_tensor_survives_leaving_the_device(gpu):
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    t = dg.ag_tensor(x).to("float16")
    dg.ag_device("cpu")                          # rescued into host memory
    assert _same(t.numpy(), x.astype(np.float16))
    dg.ag_device("gpu")                          # and moved back once used
    assert _same(t.float().numpy(), x.astype(np.float16).astype(np.float32))


def test_buffers_keep_their_type_through_state_dict_and_checkpoints(device, tmp_path):
    values = np.array([1.5, -2.5, 65504.0], np.float32)

    def model(fill):
        m = dg.nn.Linear(3, 2)
        m.register_buffer("half", dg.ag_tensor(values * fill, dtype="float16"))
        m.register_buffer("brain", dg.ag_tensor(values * fill, dtype="bfloat16"))
        m.register_buffer("mask", dg.ag_tensor(values * fill > 0, dtype="bool"))
        return m
    saved = model(1.0)
    state = saved.state_dict()
    assert (state["half"].dtype, state["brain"].dtype, state["mask"].dtype) == \
        (LOW[0], LOW[1], np.dtype(np.bool_))
    dg.save_checkpoint(tmp_path / "m.ckpt", saved)
    loaded = model(0.0)
    dg.load_checkpoint(tmp_path / "m.ckpt", loaded)
    for name in ("half", "brain", "mask"):
        got, want = getattr(loaded, name), getattr(saved, name)
        assert got.dtype == want.dtype and np.array_equal(got.numpy(), want.numpy()), name


def test_a_model_converted_to_16_bits_runs_and_takes_gradients(device):
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.GELU(), dg.nn.Linear(8, 3))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    want = model(dg.ag_tensor(x)).numpy()
    params = model.parameters()
    values = [p.numpy() for p in params]
    assert model.bfloat16() is model
    assert [p.dtype for p in model.parameters()] == [LOW[1]] * 4
    assert all(p is q for p, q in zip(model.parameters(), params))     # the same objects
    assert all(_same(p.numpy(), v.astype(LOW[1])) for p, v in zip(params, values))
    out = model(dg.ag_tensor(x, dtype="bfloat16"))
    assert out.dtype == LOW[1]
    assert np.allclose(out.numpy().astype(np.float32), want, rtol=0.05, atol=0.05)
    with dg.with_grad_tape():
        model(dg.ag_tensor(x, dtype="bfloat16")).sum().backward()
    assert all(p.grad.dtype == LOW[1] for p in params)
    model.float()
    assert all(p.dtype == np.float32 and p.grad is None for p in params)
    assert all(_same(p.numpy(), v.astype(LOW[1])) for p, v in zip(params, values))


def test_the_optimizers_refuse_16_bit_parameters_before_anything_changes(device):
    model = dg.nn.Linear(3, 2)
    opt = dg.optimizer_adam(model.parameters(), lr=0.1)
    model.half()
    with dg.with_grad_tape():
        model(dg.ag_tensor(np.ones((2, 3)), dtype="float16")).sum().backward()
    before = [p.numpy() for p in model.parameters()]
    with pytest.raises(dg.ArgumentTypeError, match=r"float16 parameter.*autocast"):
        opt.step()
    assert all(_same(p.numpy(), b) for p, b in zip(model.parameters(), before))
    assert not any(opt.state)                       # no state was made
    with pytest.raises(dg.ArgumentTypeError, match="float16 parameter"):
        dg.optimizer_sgd(model.parameters(), lr=0.1)
    # gradient clipping takes 16-bit gradients: the norm in float32, each scaled and rounded
    grads = [p.grad.numpy().astype(np.float32) for p in model.parameters()]
    norm = float(dg.clip_grad_norm(model.parameters(), 0.5).item())
    assert norm == pytest.approx(np.sqrt(sum((g.astype(np.float64) ** 2).sum()
                                             for g in grads)), rel=1e-6)
    for p, g in zip(model.parameters(), grads):
        assert p.grad.dtype == LOW[0]
        want = (g * np.float32(0.5 / (norm + 1e-6))).astype(LOW[0])
        assert _within_a_unit(p.grad.numpy(), want, LOW[0])    # (a device's division)


@pytest.mark.parametrize("low", LOW, ids=str)
def test_the_cpus_conversions_are_numpys_and_ml_dtypes_bit_for_bit(low):
    """cpu/convert16.py against NumPy's (float16) and ml_dtypes' (bfloat16) conversions:
    every 16-bit pattern widened; narrowed, every finite 16-bit value, its float32
    neighbours, the halfway points between neighbouring 16-bit values and beside them,
    the edges and a million random bit patterns (NaNs as NaNs of the same sign: their
    payloads may differ, as the device's do)."""
    from dualgrad.cpu import convert16
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(low)
    wide = convert16.widen(patterns)
    want = patterns.astype(np.float32)
    assert wide.dtype == np.float32 and _same(wide, want)
    finite = want[np.isfinite(want)]
    with np.errstate(over="ignore"):              # (the largest value's next is inf)
        up = np.nextafter(finite.astype(low), np.array(np.inf, low)).astype(np.float64)
        halfway = ((finite.astype(np.float64) + up) / 2).astype(np.float32)
    rand = np.random.default_rng(0).integers(0, 1 << 32, 1 << 20, dtype=np.uint64)
    values = np.concatenate([
        finite, np.nextafter(finite, np.float32(np.inf)),
        np.nextafter(finite, np.float32(-np.inf)), halfway,
        np.nextafter(halfway, np.float32(np.inf)), np.nextafter(halfway, np.float32(-np.inf)),
        rand.astype(np.uint32).view(np.float32),
        np.array([np.nan, -np.nan, np.inf, -np.inf, 65519.99, 65520, -65520, 3.4e38, 1e-45,
                  -0.0], np.float32)])
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(low)
    got = convert16.narrow(values, low)
    assert got.dtype == low and _same(got, want)
    assert np.array_equal(np.signbit(got.astype(np.float32)), np.signbit(want.astype(np.float32)))
