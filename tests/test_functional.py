"""PyTorch's spellings: ``dg.nn.functional`` (torch.nn.functional's names and argument
lists), the layers Softmax, LogSoftmax, Softmin, Unflatten, Parameter and
TransformerEncoder, the factories tensor / as_tensor / from_numpy / empty / randint /
randperm / rand_like / randn_like, isclose / allclose / equal, movedim / swapaxes, and the
methods view_as, expand_as, reshape_as, type_as; on both backends."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgrad as dg
import dualgrad.nn.functional as F

X = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)


def _same(call_a, call_b, x=X):
    """Both calls on a tensor of x give the same values and the same gradient of their
    sum of squares, bit for bit."""
    out = []
    for call in (call_a, call_b):
        t = dg.ag_tensor(x, requires_grad=True)
        with dg.with_grad_tape():
            y = call(t)
            dg.sum(y * y).backward()
        out.append((y.numpy(), t.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_functional_is_importable_as_torch_users_spell_it():
    from dualgrad.nn import functional
    assert functional is F is dg.nn.functional
    assert F.conv2d is dg.conv2d and F.gelu is dg.gelu and F.linear is dg.linear
    for name in F.__all__:
        assert callable(getattr(F, name)), name


@pytest.mark.parametrize("functional, ours", [
    (lambda t: F.relu(t), dg.relu),
    (lambda t: F.relu6(t, inplace=False), dg.relu6),
    (lambda t: F.elu(t, 0.5), lambda t: dg.elu(t, 0.5)),
    (lambda t: F.selu(t), dg.selu),
    (lambda t: F.celu(t, alpha=2.0), lambda t: dg.celu(t, 2.0)),
    (lambda t: F.leaky_relu(t, 0.2), lambda t: dg.leaky_relu(t, 0.2)),
    (lambda t: F.hardtanh(t, -0.5, 0.5), lambda t: dg.hardtanh(t, -0.5, 0.5)),
    (lambda t: F.hardsigmoid(t), dg.hardsigmoid),
    (lambda t: F.hardswish(t), dg.hardswish),
    (lambda t: F.silu(t), dg.silu),
    (lambda t: F.mish(t), dg.mish),
    (lambda t: F.softmax(t, dim=1), lambda t: dg.softmax(t, dim=1)),
    (lambda t: F.log_softmax(t, -1), lambda t: dg.log_softmax(t, dim=-1)),
    (lambda t: F.softmin(t, 2), lambda t: dg.softmax(-t, dim=2)),
    (lambda t: F.glu(t, -1), lambda t: t[..., :2] * dg.sigmoid(t[..., 2:])),
    (lambda t: F.normalize(t, dim=-1),
     lambda t: t / dg.clamp(dg.norm(t, dim=-1, keepdim=True), min=1e-12)),
    (lambda t: F.layer_norm(t, (4,)),
     lambda t: dg.layer_norm(t, dg.ones(4), dg.zeros(4))),
    (lambda t: F.layer_norm(t, 4, dg.ones(4) * 2, dg.ones(4)),
     lambda t: dg.layer_norm(t, dg.ones(4) * 2, dg.ones(4))),
    (lambda t: F.layer_norm(t, (3, 4)), lambda t: dg.nn.LayerNorm((3, 4))(t)),
    (lambda t: F.dropout(t, 0.5, training=False), lambda t: t),
    (lambda t: F.mse_loss(t, dg.zeros(2, 3, 4), reduction="sum"),
     lambda t: dg.mse_loss(t, dg.zeros(2, 3, 4), "sum")),
    (lambda t: F.l1_loss(t, dg.zeros(2, 3, 4), reduce=False),
     lambda t: dg.l1_loss(t, dg.zeros(2, 3, 4), "none")),
    (lambda t: F.smooth_l1_loss(t, dg.zeros(2, 3, 4), size_average=False, beta=0.5),
     lambda t: dg.smooth_l1_loss(t, dg.zeros(2, 3, 4), "sum", 0.5)),
    (lambda t: F.cross_entropy(t, np.array([[0, 1, 2, 0], [1, 1, 0, 2]]),
                               label_smoothing=0.1),
     lambda t: dg.softmax_cross_entropy(t, np.array([[0, 1, 2, 0], [1, 1, 0, 2]]),
                                        label_smoothing=0.1)),
    (lambda t: F.nll_loss(F.log_softmax(t, 1), np.array([[0, 1, 2, 0], [1, 1, 0, 2]])),
     lambda t: dg.nll_loss(dg.log_softmax(t, dim=1), np.array([[0, 1, 2, 0], [1, 1, 0, 2]]))),
    (lambda t: F.binary_cross_entropy_with_logits(t, dg.ones(2, 3, 4) * 0.25,
                                                   size_average=True, reduce=True),
     lambda t: dg.binary_cross_entropy_with_logits(t, dg.ones(2, 3, 4) * 0.25)),
    (lambda t: F.kl_div(F.log_softmax(t, -1), dg.ones(2, 3, 4) / 4, reduction="batchmean"),
     lambda t: dg.kl_div(dg.log_softmax(t, dim=-1), dg.ones(2, 3, 4) / 4, "batchmean")),
], ids=["relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh", "hardsigmoid",
        "hardswish", "silu", "mish", "softmax", "log_softmax", "softmin", "glu", "normalize",
        "layer_norm", "layer_norm affine", "layer_norm 2 axes", "dropout eval", "mse_loss",
        "l1_loss reduce", "smooth_l1_loss size_average", "cross_entropy", "nll_loss",
        "bce_with_logits legacy", "kl_div"])
def test_functional_is_the_op_it_names(device, functional, ours):
    _same(functional, ours)


def test_functional_values_follow_their_definitions(device):
    x = dg.ag_tensor(X)
    g = F.glu(x, 1 if False else -1).numpy()
    np.testing.assert_allclose(g, X[..., :2] / (1 + np.exp(-X[..., 2:])), rtol=1e-6)
    n = F.normalize(x, p=1.0, dim=1).numpy()
    np.testing.assert_allclose(n, X / np.abs(X).sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(F.normalize(dg.zeros(2, 3)).numpy(), np.zeros((2, 3)))
    m = F.softmin(x, 0).numpy()
    e = np.exp(-X.astype(np.float64))
    np.testing.assert_allclose(m, e / e.sum(0), rtol=1e-6)


def test_softmax_without_dim_picks_the_axis_as_torch_and_warns(device):
    for shape, axis in (((5,), 0), ((2, 5), 1), ((2, 3, 5), 0), ((2, 3, 4, 5), 1)):
        x = dg.ag_tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7)
        with pytest.warns(dg.DualgradWarning, match="pass dim="):
            got = F.softmax(x)
        np.testing.assert_array_equal(got.numpy(), dg.softmax(x, dim=axis).numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.softmax(x, dim=-1, dtype="float32")


def test_embedding_takes_torchs_argument_order_and_padding_idx(device):
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = dg.ag_param(table)
    with dg.with_grad_tape():
        rows = F.embedding(np.array([[0, 2], [2, 3]]), w, padding_idx=-2)
        dg.sum(rows).backward()
    np.testing.assert_array_equal(rows.numpy(), table[[[0, 2], [2, 3]]])
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [1.0, 0.0, 0.0, 1.0])  # row 2: none
    with pytest.raises(dg.InvalidValueError, match=r"^embedding: argument 'max_norm'"):
        F.embedding(np.array([0]), w, max_norm=1.0)


def test_inplace_is_refused_with_a_message():
    with pytest.raises(dg.InvalidValueError, match=r"^relu: argument 'inplace' is True"):
        F.relu(dg.ones(2), inplace=True)
    with pytest.raises(dg.InvalidValueError, match=r"^dropout: argument 'inplace'"):
        F.dropout(dg.ones(2), inplace=True)


def test_layer_norm_checks_its_shape():
    with pytest.raises(dg.InvalidValueError, match=r"^layer_norm: argument 'weight'"):
        F.layer_norm(dg.ones(2, 3), (3,), dg.ones(2))
    with pytest.raises(dg.ShapeError, match=r"^layer_norm: argument 'x'"):
        F.layer_norm(dg.ones(2, 3), (2, 3, 3))
    with pytest.raises(dg.InvalidValueError, match=r"normalized_shape"):
        F.layer_norm(dg.ones(2, 3), ())


def test_functional_dropout_draws_from_the_generator(device):
    x = dg.ones(1000)
    dg.manual_seed(4)
    a, b = F.dropout(x, 0.5).numpy(), F.dropout(x, 0.5).numpy()
    dg.manual_seed(4)
    again = F.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, again)
    assert not np.array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, 2.0} and 350 < np.count_nonzero(a) < 650


def test_functional_dropout_draws_anew_at_each_replay(device):
    w = dg.ag_param(np.ones(256, np.float32))

    def step(x):
        with dg.with_grad_tape():
            y = F.dropout(dg.ag_tensor(x) * w, 0.5)
            dg.sum(y).backward()
        out = w.grad.numpy().copy()
        w.grad = None
        return out
    captured = dg.capture_step(step)
    masks = [captured(np.ones(256, np.float32)) for _ in range(4)]
    assert len({m.tobytes() for m in masks}) == 4


def test_functional_dropout_under_checkpoint_recomputes_the_same_mask(device):
    w = dg.ag_param(np.ones(64, np.float32))
    with dg.with_grad_tape():
        y = dg.checkpoint(lambda t: F.dropout(t * 2.0, 0.5), w)
        dg.sum(y).backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.where(y.numpy() != 0, 4.0, 0.0))


# -- layers -----------------------------------------------------------------------------------
def test_softmax_layers_and_unflatten(device):
    x = dg.ag_tensor(X)
    np.testing.assert_array_equal(dg.nn.Softmax(dim=1)(x).numpy(), dg.softmax(x, 1).numpy())
    np.testing.assert_array_equal(dg.nn.LogSoftmax(-1)(x).numpy(),
                                  dg.log_softmax(x, -1).numpy())
    np.testing.assert_array_equal(dg.nn.Softmin(0)(x).numpy(), dg.softmax(-x, 0).numpy())
    assert repr(dg.nn.Softmax(1)) == "Softmax(dim=1)"
    u = dg.nn.Unflatten(-1, (2, -1))(x)
    assert u.shape == (2, 3, 2, 2)
    np.testing.assert_array_equal(u.numpy(), X.reshape(2, 3, 2, 2))
    with pytest.raises(dg.InvalidValueError, match=r"^Unflatten: argument 'unflattened_size'"):
        dg.nn.Unflatten(1, (2, 2))(x)
    with pytest.raises(dg.AxisOutOfRange, match=r"^Unflatten: dim 3"):
        dg.nn.Unflatten(3, (2, 2))(x)


def test_nn_parameter_makes_a_trainable_parameter(device):
    class Scale(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = dg.nn.Parameter(dg.ones(3) * 2)
            self.frozen = dg.nn.Parameter(np.ones(2), requires_grad=False)

        def forward(self, x):
            return x * self.w
    m = Scale()
    assert isinstance(m.w, dg.nn.Parameter) and isinstance(m.w, dg.Parameter)
    assert not isinstance(dg.ones(2), dg.nn.Parameter)
    assert [n for n, _ in m.named_parameters()] == ["w", "frozen"]
    assert m.w.requires_grad and not m.frozen.requires_grad
    with dg.with_grad_tape():
        dg.sum(m(dg.ones(3))).backward()
    np.testing.assert_array_equal(m.w.grad.numpy(), np.ones(3))
    np.testing.assert_array_equal(m.w.numpy(), [2.0, 2.0, 2.0])


def test_transformer_encoder_stacks_copies_of_its_layer(device):
    dg.manual_seed(1)
    layer = dg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = dg.nn.TransformerEncoder(layer, 2, norm=dg.nn.LayerNorm(8))
    keys = list(enc.state_dict())
    assert keys[0] == "layers.0.self_attn.in_proj_weight" and keys[-1] == "norm.bias"
    assert len(keys) == 2 * len(layer.state_dict()) + 2
    for name, value in layer.state_dict().items():       # copies start from its weights
        np.testing.assert_array_equal(enc.state_dict()["layers.1." + name], value)
    x = dg.ag_tensor(np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32))
    want = enc.norm(enc.layers[1](enc.layers[0](x, is_causal=True), is_causal=True))
    np.testing.assert_array_equal(enc(x, is_causal=True).numpy(), want.numpy())
    seeds = {m.seed for m in enc.modules() if isinstance(m, dg.nn.Dropout)}
    per_layer = sum(isinstance(m, dg.nn.Dropout) for m in layer.modules())
    assert per_layer >= 3 and len(seeds) == 2 * per_layer    # each copy's dropouts draw anew
    with pytest.raises(dg.ArgumentTypeError, match=r"^TransformerEncoder: argument 'norm'"):
        dg.nn.TransformerEncoder(layer, 2, norm="layer")
    with pytest.raises(dg.InvalidValueError, match=r"^TransformerEncoder: argument 'num_"):
        dg.nn.TransformerEncoder(layer, 0)


# -- factories, comparisons, shapes -----------------------------------------------------------
def test_tensor_infers_dtypes_as_torch(device):
    assert dg.tensor([1.5, 2]).dtype == dg.float32
    assert dg.tensor([1, 2]).dtype == np.int32 and dg.tensor(3).dtype == np.int32
    assert dg.tensor([True, False]).dtype == np.bool_
    assert dg.tensor(np.ones(2, np.float16)).dtype == dg.float16
    assert dg.tensor([1, 2], dtype="float32").dtype == dg.float32
    t = dg.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and dg.tensor(t).requires_grad is False
    assert dg.as_tensor(t) is t and dg.as_tensor(t, "float32") is t
    assert dg.as_tensor(t, "bfloat16").dtype == dg.bfloat16
    assert dg.from_numpy(np.arange(3)).dtype == np.int32
    assert dg.from_numpy(np.ones(2, np.float32)).dtype == dg.float32
    with pytest.raises(dg.ArgumentTypeError, match=r"^from_numpy: argument 'ndarray'"):
        dg.from_numpy([1, 2])
    with pytest.raises(dg.InvalidValueError):
        dg.tensor([2 ** 40])                     # past int32


def test_random_factories_follow_manual_seed(device):
    dg.manual_seed(7)
    a = dg.randint(3, 9, (1000,))
    p = dg.randperm(50)
    r, n = dg.rand_like(dg.ones(2, 3)), dg.randn_like(dg.ones(4))
    dg.manual_seed(7)
    np.testing.assert_array_equal(a.numpy(), dg.randint(3, 9, (1000,)).numpy())
    np.testing.assert_array_equal(p.numpy(), dg.randperm(50).numpy())
    np.testing.assert_array_equal(r.numpy(), dg.rand_like(dg.ones(2, 3)).numpy())
    assert n.shape == (4,) and r.shape == (2, 3) and 0 <= r.numpy().min()
    assert a.dtype == np.int32 and set(np.unique(a.numpy())) == set(range(3, 9))
    assert sorted(p.numpy().tolist()) == list(range(50))
    assert dg.randint(5, (2, 2)).numpy().max() < 5
    assert dg.randint(0, 4, (3,), dtype="float32").dtype == dg.float32
    np.testing.assert_array_equal(dg.empty(2, 3).numpy(), np.zeros((2, 3)))
    assert dg.empty_like(dg.ones(2, dtype="int32")).dtype == np.int32
    with pytest.raises(dg.InvalidValueError, match=r"^randint: argument 'high'"):
        dg.randint(5, 5, (2,))
    with pytest.raises(dg.InvalidValueError, match=r"^randint: argument 'size' is missing"):
        dg.randint(5)


def test_isclose_allclose_and_equal_as_torch(device):
    nan, inf = float("nan"), float("inf")
    a = dg.tensor([1.0, inf, nan, 1e-9, inf, 1.0])
    b = dg.tensor([1.0 + 1e-6, inf, nan, 0.0, -inf, 1.1])
    np.testing.assert_array_equal(dg.isclose(a, b).numpy(),
                                  [True, True, False, True, False, False])
    np.testing.assert_array_equal(dg.isclose(a, b, equal_nan=True).numpy(),
                                  [True, True, True, True, False, False])
    np.testing.assert_array_equal(dg.isclose(a, b, rtol=0.2).numpy()[-1], True)
    np.testing.assert_array_equal(dg.isclose(dg.tensor([1, 2]), 2).numpy(), [False, True])
    assert dg.allclose(a[:2], b[:2]) is True and dg.allclose(a, b) is False
    assert dg.equal(a[:2], a[:2]) is True and dg.equal(a, a) is False       # (NaN)
    assert dg.equal(dg.ones(2), dg.ones(3)) is False
    with pytest.raises(dg.InvalidValueError, match=r"^isclose: argument 'rtol'"):
        dg.isclose(a, b, rtol=-1.0)


def test_movedim_swapaxes_and_the_as_methods(device):
    t = dg.ag_tensor(X)
    np.testing.assert_array_equal(dg.movedim(t, 0, -1).numpy(), np.moveaxis(X, 0, -1))
    np.testing.assert_array_equal(t.movedim((0, 1), (2, 0)).numpy(),
                                  np.moveaxis(X, (0, 1), (2, 0)))
    np.testing.assert_array_equal(dg.swapaxes(t, 0, 2).numpy(), np.swapaxes(X, 0, 2))
    np.testing.assert_array_equal(t.swapdims(-1, 1).numpy(), np.swapaxes(X, -1, 1))
    assert t.view_as(dg.ones(4, 6)).shape == (4, 6) and t.reshape_as(dg.ones(24)).shape == (24,)
    assert dg.ones(1, 3, 1).expand_as(t).shape == (2, 3, 4)
    assert dg.tensor([1, 2]).type_as(t).dtype == dg.float32
    assert t.numel() == dg.numel(t) == 24 and dg.is_tensor(t) and not dg.is_tensor(X)
    np.testing.assert_array_equal(t.clip(-0.5, 0.5).numpy(), np.clip(X, -0.5, 0.5))
    with pytest.raises(dg.InvalidValueError, match=r"^movedim: argument 'destination'"):
        dg.movedim(t, (0, 1), 2)
    with pytest.raises(dg.InvalidValueError, match=r"^movedim: argument 'source'"):
        dg.movedim(t, (0, 0), (1, 2))
    with pytest.raises(dg.ArgumentTypeError, match=r"^view_as: argument 'other'"):
        t.view_as((4, 6))


def test_movedim_and_swapaxes_pass_gradients_back(device):
    _same(lambda t: dg.movedim(t, 2, 0) * 3, lambda t: dg.transpose(t, (2, 0, 1)) * 3)
    _same(lambda t: dg.swapaxes(t, 1, 2), lambda t: dg.transpose(t, (0, 2, 1)))


# -- resampling -------------------------------------------------------------------------------
def _nearest_reference(x, size):
    """PyTorch's nearest rule: source index floor(i * in / out), in float32."""
    out = x
    for axis, n in zip(range(2, x.ndim), size):
        scale = np.float32(x.shape[axis] / n)
        src = np.minimum(np.floor(np.arange(n, dtype=np.float32) * scale).astype(int),
                         x.shape[axis] - 1)
        out = np.take(out, src, axis=axis)
    return out


def _linear_reference(x, size, align_corners):
    """PyTorch's linear rule along each spatial axis, the last first, in float64."""
    out = x.astype(np.float64)
    for axis, n in reversed(list(zip(range(2, x.ndim), size))):
        m = x.shape[axis]
        dst = np.arange(n, dtype=np.float64)
        if align_corners:
            src = dst * ((m - 1) / (n - 1) if n > 1 else 0.0)
        else:
            src = np.maximum((dst + 0.5) * (m / n) - 0.5, 0.0)
        i0 = np.minimum(src.astype(int), m - 1)
        i1 = i0 + (i0 < m - 1)
        w = (src - i0).reshape((n,) + (1,) * (x.ndim - axis - 1))
        out = np.take(out, i0, axis=axis) * (1 - w) + np.take(out, i1, axis=axis) * w
    return out


@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 5, 7), dict(scale_factor=2)),
    ((2, 3, 5, 7), dict(size=(4, 9))),
    ((2, 3, 5, 7), dict(size=(11, 3))),
    ((2, 3, 9), dict(size=13)),
    ((2, 3, 5, 7), dict(size=(8, 13), mode="bilinear")),
    ((2, 3, 5, 7), dict(size=(10, 14), mode="bilinear")),
    ((2, 3, 5, 7), dict(size=(8, 13), mode="bilinear", align_corners=True)),
    ((2, 3, 5, 7), dict(size=(3, 4), mode="bilinear")),
    ((2, 3, 9), dict(size=15, mode="linear")),
    ((2, 3, 6, 8), dict(scale_factor=0.5)),
    ((2, 3, 4, 5), dict(scale_factor=3, mode="bilinear")),
    ((2, 3, 1, 5), dict(size=(2, 20), mode="bilinear")),
    ((2, 3, 9), dict(scale_factor=4, mode="linear")),
], ids=["nearest x2", "nearest up", "nearest mixed", "nearest 1-D", "bilinear",
        "bilinear x2", "bilinear corners", "bilinear down", "linear", "nearest down",
        "bilinear x3", "bilinear from one row", "linear x4"])
def test_interpolate_follows_torchs_rules(device, shape, kwargs):
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    t = dg.ag_tensor(x, requires_grad=True)
    with dg.with_grad_tape():
        y = F.interpolate(t, **kwargs)
        dg.sum(y).backward()
    size = y.shape[2:]
    if kwargs.get("mode", "nearest") == "nearest":
        want = _nearest_reference(x, size)
        np.testing.assert_array_equal(y.numpy(), want)
    else:
        want = _linear_reference(x, size, kwargs.get("align_corners", False))
        # three float32 roundings a linear step of terms no larger than max |x|, two steps
        np.testing.assert_allclose(y.numpy(), want, rtol=0,
                                   atol=8 * np.finfo(np.float32).eps * np.abs(x).max())
    assert y.shape == want.shape
    # each input element's gradient: the total weight it gets (its copies' count, or the
    # sum of its interpolation weights), so the gradients sum to the output's size
    assert abs(float(t.grad.numpy().sum()) - y.numpy().size) < 1e-3 * y.numpy().size


def test_interpolate_gradients_in_float64():
    x = np.random.default_rng(9).standard_normal((1, 2, 3, 4))
    assert dg.gradcheck(lambda t: F.interpolate(t, size=(5, 7), mode="bilinear"), x)
    assert dg.gradcheck(lambda t: F.interpolate(t, size=(5, 2)), x)


def test_upsample_and_pixel_shuffle_layers(device):
    x = np.random.default_rng(10).standard_normal((2, 8, 3, 5)).astype(np.float32)
    t = dg.ag_tensor(x)
    up = dg.nn.Upsample(scale_factor=2)(t).numpy()
    np.testing.assert_array_equal(up, x.repeat(2, axis=2).repeat(2, axis=3))
    shuffled = dg.nn.PixelShuffle(2)(t)
    want = x.reshape(2, 2, 2, 2, 3, 5).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 10)
    np.testing.assert_array_equal(shuffled.numpy(), want)
    np.testing.assert_array_equal(dg.nn.PixelUnshuffle(2)(shuffled).numpy(), x)
    np.testing.assert_array_equal(dg.pixel_shuffle(t[0], 2).numpy(), want[0])   # (3-D)
    with pytest.raises(dg.InvalidValueError, match=r"^Upsample: argument 'mode'"):
        dg.nn.Upsample(scale_factor=2, mode="bicubic")
    with pytest.raises(dg.ShapeError, match=r"^pixel_shuffle: argument 'input'"):
        dg.pixel_shuffle(dg.ones(1, 3, 2, 2), 2)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: F.interpolate(dg.ones(1, 1, 2, 2), size=3, scale_factor=2), dg.InvalidValueError,
     r"exactly one of 'size' and 'scale_factor'"),
    (lambda: F.interpolate(dg.ones(1, 1, 2, 2), scale_factor=2, mode="linear"), dg.ShapeError,
     r"3 dimensions for mode 'linear'"),
    (lambda: F.interpolate(dg.ones(1, 1, 2, 2), scale_factor=2, align_corners=True),
     dg.InvalidValueError, r"only the linear modes"),
    (lambda: F.interpolate(dg.ones(1, 1, 2, 2), size=(2, 2, 2)), dg.InvalidValueError,
     r"argument 'size' has 3 entries"),
    (lambda: F.interpolate(dg.ones(2, 2), scale_factor=2), dg.ShapeError,
     r"^interpolate: argument 'input'"),
    (lambda: F.interpolate(dg.ones(1, 1, 2, 2), scale_factor=0.1), dg.InvalidValueError,
     r"leaves an empty output"),
])
def test_interpolate_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- composites -------------------------------------------------------------------------------
INF, NAN = float("inf"), float("nan")


def test_logaddexp_hypot_and_nan_to_num(device):
    a = np.array([1, -3, 1e30, -INF, INF, NAN, 0, 100, -1e-30, 3e38, INF], np.float32)
    b = np.array([2, 5, 1e30, -INF, 1, 1, 0, -100, 1e-30, 3e38, NAN], np.float32)
    with np.errstate(invalid="ignore"):            # (the NaN operands')
        wide = np.logaddexp(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(dg.logaddexp(dg.ag_tensor(a), dg.ag_tensor(b)).numpy(), wide,
                               rtol=4 * np.finfo(np.float32).eps)
    with np.errstate(over="ignore", invalid="ignore"):
        h = np.hypot(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(dg.hypot(dg.ag_tensor(a), dg.ag_tensor(b)).numpy(), h,
                               rtol=4 * np.finfo(np.float32).eps)
    x = np.array([NAN, INF, -INF, 2.0], np.float32)
    big = np.finfo(np.float32).max
    np.testing.assert_array_equal(dg.nan_to_num(dg.ag_tensor(x)).numpy(), [0, big, -big, 2])
    np.testing.assert_array_equal(dg.ag_tensor(x).nan_to_num(1.0, 5.0, -5.0).numpy(),
                                  [1, 5, -5, 2])


def test_composites_pass_gradients_in_float64():
    rng = np.random.default_rng(12)
    assert dg.gradcheck(dg.logaddexp, (rng.standard_normal(5), rng.standard_normal(5)))
    assert dg.gradcheck(dg.hypot, (rng.standard_normal(5), rng.standard_normal(5)))
    assert dg.gradcheck(lambda t: dg.nan_to_num(t * 2), rng.standard_normal(4))


@pytest.mark.parametrize("args, want", [
    ((2,), lambda x: np.repeat(x.reshape(-1), 2)),
    ((2, 0), lambda x: np.repeat(x, 2, 0)),
    ((np.array([1, 0, 2]), 1), lambda x: np.repeat(x, [1, 0, 2], 1)),
    ((np.array([3]), -1), lambda x: np.repeat(x, 3, -1)),
])
def test_repeat_interleave_as_numpy_repeat(device, args, want):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dg.ag_tensor(x, requires_grad=True)
    with dg.with_grad_tape():
        y = dg.repeat_interleave(t, *args)
        dg.sum(y).backward()
    np.testing.assert_array_equal(y.numpy(), want(x))
    assert t.grad.numpy().sum() == y.numpy().size       # one for each copy made


def test_repeat_interleave_errors():
    with pytest.raises(dg.ShapeError, match=r"^repeat_interleave: argument 'repeats'"):
        dg.repeat_interleave(dg.ones(2, 3), np.array([1, 2]), 1)
    with pytest.raises(dg.InvalidValueError, match=r"^repeat_interleave: argument 'output_size'"):
        dg.repeat_interleave(dg.ones(3), 2, output_size=5)
    with pytest.raises(dg.InvalidValueError, match=r"^repeat_interleave: argument 'repeats'"):
        dg.repeat_interleave(dg.ones(3), np.array([1, -1, 1]))


def test_inference_mode_and_is_grad_enabled(device):
    assert not dg.is_grad_enabled()
    w = dg.ag_param(np.ones(2, np.float32))
    with dg.with_grad_tape():
        assert dg.is_grad_enabled()
        with dg.inference_mode():
            assert not dg.is_grad_enabled()
            assert not (w * 2).requires_grad
        with dg.inference_mode(False):
            assert dg.is_grad_enabled() and (w * 2).requires_grad

        @dg.no_grad()
        def evaluate():
            return (w * 2).requires_grad, dg.is_grad_enabled()

        @dg.inference_mode(False)
        def unchanged():
            return dg.is_grad_enabled()
        assert evaluate() == (False, False) and dg.is_grad_enabled() and unchanged()
    with pytest.raises(dg.ArgumentTypeError, match=r"^no_grad: argument 'fn'"):
        dg.no_grad()(3)


# -- decoders ---------------------------------------------------------------------------------
def test_transformer_decoder_layer_names_and_blocks(device):
    dg.manual_seed(4)
    layer = dg.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    attn = ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    want = ([f"self_attn.{k}" for k in attn] + [f"multihead_attn.{k}" for k in attn] +
            [f"{m}.{p}" for m in ("linear1", "linear2", "norm1", "norm2", "norm3")
             for p in ("weight", "bias")])
    assert list(layer.state_dict()) == want                   # (PyTorch's keys, in order)
    rng = np.random.default_rng(5)
    tgt = dg.ag_tensor(rng.standard_normal((2, 4, 8)).astype(np.float32))
    memory = dg.ag_tensor(rng.standard_normal((2, 6, 8)).astype(np.float32))
    got = layer(tgt, memory, tgt_is_causal=True)
    x = layer.norm1(tgt + layer.self_attn(tgt, tgt, tgt, need_weights=False,
                                          is_causal=True)[0])
    x = layer.norm2(x + layer.multihead_attn(x, memory, memory, need_weights=False)[0])
    x = layer.norm3(x + layer.linear2(dg.relu(layer.linear1(x))))
    np.testing.assert_array_equal(got.numpy(), x.numpy())


def test_transformer_is_an_encoder_then_a_decoder(device):
    dg.manual_seed(6)
    model = dg.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, batch_first=True, norm_first=True)
    rng = np.random.default_rng(7)
    src = dg.ag_tensor(rng.standard_normal((2, 5, 8)).astype(np.float32))
    tgt = dg.ag_tensor(rng.standard_normal((2, 3, 8)).astype(np.float32))
    mask = dg.nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.full((3, 3), -np.inf), 1))
    got = model(src, tgt, tgt_mask=mask)
    want = model.decoder(tgt, model.encoder(src), tgt_mask=mask)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.shape == (2, 3, 8) and len(model.decoder.layers) == 1
    keys = list(model.state_dict())
    assert keys[0] == "encoder.layers.0.self_attn.in_proj_weight"
    assert "decoder.layers.0.multihead_attn.out_proj.bias" in keys and keys[-1] == \
        "decoder.norm.bias"
    with dg.with_grad_tape():
        dg.sum(model(src, tgt, tgt_mask=mask)).backward()
    assert model.decoder.layers[0].multihead_attn.in_proj_weight.grad is not None
    with pytest.raises(dg.ArgumentTypeError, match=r"^TransformerDecoder: argument 'norm'"):
        dg.nn.TransformerDecoder(model.decoder.layers[0], 2, norm=3)


# -- devices named as PyTorch names them -------------------------------------------------------
def test_to_a_device_name_keeps_the_tensor_on_the_active_backend(device):
    t = dg.ag_tensor(X)
    model = dg.nn.Linear(4, 2)
    assert t.to("cpu") is t and t.cpu() is t and model.to("cpu") is model
    assert t.to("cpu", "bfloat16").dtype == dg.bfloat16
    assert t.to(dtype="float16").dtype == dg.float16 and t.to(dg.tensor([1])).dtype == np.int32
    assert t.to("float32") is t
    if device == "gpu":
        assert t.to("cuda:0") is t and t.cuda() is t and model.cuda() is model
        assert t.to("gpu") is t
    else:
        with pytest.raises(dg.InvalidValueError, match=r"^to: argument 'device' is 'cuda'.*"
                                                       r"dg.ag_device\('gpu'\)"):
            t.to("cuda")
        with pytest.raises(dg.InvalidValueError, match=r"^Module.to: argument 'device'"):
            model.cuda()
    with pytest.raises(dg.ArgumentTypeError, match=r"^to: argument 'dtype'"):
        t.to("float16", "bfloat16")


def test_factories_take_device_and_torchs_dtype_names(device):
    where = dg.ones(1).device
    assert where == device
    t = dg.arange(5, dtype=dg.long, device=where)
    assert t.dtype == np.int32 and dg.zeros(2, 3, device=where).shape == (2, 3)
    assert dg.tensor([1, 2], dtype=dg.int64, device=where).dtype == np.int32
    assert dg.full_like(t, 7, device=where).numpy().tolist() == [7] * 5
    assert dg.ones(2).to(dg.long).dtype == np.int32 and dg.float == dg.float32
    assert dg.double == np.float64 and dg.half == dg.float16 and dg.bool == np.bool_
    if device == "cpu":
        with pytest.raises(dg.InvalidValueError, match=r"^zeros: argument 'device' is 'cuda'"):
            dg.zeros(2, device="cuda")
    with pytest.raises(dg.ArgumentTypeError, match=r"^randn: argument 'device'"):
        dg.randn(2, device=0)
