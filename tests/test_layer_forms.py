"""Layers and functions that PyTorch models use beside the main ones: the 1-D pooling and
transposed convolution (as the 2-D ops of one row), padding layers, instance norm, PReLU,
channel dropout and parameter containers; on both backends, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg
import dualgrad.nn.functional as F

X = np.random.default_rng(41).standard_normal((2, 3, 10)).astype(np.float32)


def _windows(x, k, s, p, fill):
    """(N, C, out, k) windows of x along its last axis, padded by ``fill``."""
    padded = np.pad(x, ((0, 0), (0, 0), (p, p)), constant_values=fill)
    out = (padded.shape[-1] - k) // s + 1
    return np.stack([padded[..., i * s:i * s + k] for i in range(out)], 2)


def test_1d_pooling_as_numpy(device):
    t = dg.ag_tensor(X)
    np.testing.assert_array_equal(F.max_pool1d(t, 3, 2, 1).numpy(),
                                  _windows(X, 3, 2, 1, -np.inf).max(-1))
    np.testing.assert_allclose(F.avg_pool1d(t, 3, 2, 1).numpy(),
                               _windows(X, 3, 2, 1, 0.0).mean(-1), rtol=1e-6)
    values, indices = dg.nn.MaxPool1d(2, return_indices=True)(t)
    np.testing.assert_array_equal(np.take_along_axis(X, indices.numpy(), -1), values.numpy())
    np.testing.assert_allclose(dg.nn.AdaptiveAvgPool1d(5)(t).numpy(),
                               X.reshape(2, 3, 5, 2).mean(-1), rtol=1e-6)
    assert dg.nn.AvgPool1d(2)(t[0]).shape == (3, 5)                       # (unbatched)
    with pytest.raises(dg.ShapeError, match=r"^max_pool1d: argument 'input'"):
        F.max_pool1d(dg.ones(2, 3, 4, 5), 2)
    with pytest.raises(dg.InvalidValueError, match=r"^avg_pool1d: argument 'padding'"):
        F.avg_pool1d(t, 2, padding=2)


def test_conv_transpose1d_is_the_gradient_of_conv1d(device):
    """<conv_transpose1d(y, w), x> = <y, conv1d(x, w)>: the transpose of the same map."""
    rng = np.random.default_rng(42)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)      # conv1d: out 4, in 3
    x = rng.standard_normal((2, 3, 11)).astype(np.float32)
    y = dg.conv1d(dg.ag_tensor(x), dg.ag_tensor(w), stride=2, padding=1)
    g = rng.standard_normal(y.shape).astype(np.float32)
    back = F.conv_transpose1d(dg.ag_tensor(g), dg.ag_tensor(w), stride=2, padding=1,
                              output_padding=0)
    assert back.shape == x.shape
    lhs = float(np.sum(back.numpy().astype(np.float64) * x))
    rhs = float(np.sum(y.numpy().astype(np.float64) * g))
    assert abs(lhs - rhs) < 1e-4 * (1 + abs(rhs))
    layer = dg.nn.ConvTranspose1d(3, 4, 3, stride=2)
    assert layer.weight.shape == (3, 4, 3) and layer(dg.ag_tensor(x)).shape == (2, 4, 23)


@pytest.mark.parametrize("layer, mode, widths", [
    (dg.nn.ZeroPad1d(2), "constant", (2, 2)),
    (dg.nn.ConstantPad1d((1, 3), 2.5), "constant", (1, 3)),
    (dg.nn.ReflectionPad1d((2, 1)), "reflect", (2, 1)),
    (dg.nn.ReplicationPad1d(1), "edge", (1, 1)),
    (dg.nn.CircularPad1d(2), "wrap", (2, 2)),
])
def test_1d_padding_layers_as_numpy(device, layer, mode, widths):
    want = np.pad(X, ((0, 0), (0, 0), widths), mode=mode,
                  **({"constant_values": layer.value} if mode == "constant" else {}))
    np.testing.assert_array_equal(layer(dg.ag_tensor(X)).numpy(), want)


@pytest.mark.parametrize("layer, mode, widths", [
    (dg.nn.ZeroPad2d((1, 2, 0, 3)), "constant", ((0, 3), (1, 2))),
    (dg.nn.ConstantPad2d(1, -1.0), "constant", ((1, 1), (1, 1))),
    (dg.nn.ReflectionPad2d(1), "reflect", ((1, 1), (1, 1))),
    (dg.nn.ReplicationPad2d((0, 1, 2, 0)), "edge", ((2, 0), (0, 1))),
    (dg.nn.CircularPad2d(1), "wrap", ((1, 1), (1, 1))),
])
def test_2d_padding_layers_as_numpy(device, layer, mode, widths):
    image = X.reshape(2, 3, 2, 5)
    want = np.pad(image, ((0, 0), (0, 0)) + widths, mode=mode,
                  **({"constant_values": layer.value} if mode == "constant" else {}))
    np.testing.assert_array_equal(layer(dg.ag_tensor(image)).numpy(), want)


def test_instance_norm_normalises_each_channel_of_each_sample(device):
    mean = X.astype(np.float64).mean(-1, keepdims=True)
    var = X.astype(np.float64).var(-1, keepdims=True)
    want = (X - mean) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(F.instance_norm(dg.ag_tensor(X)).numpy(), want, atol=2e-6)
    layer = dg.nn.InstanceNorm1d(3, affine=True)
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]
    np.testing.assert_allclose(layer(dg.ag_tensor(X[0])).numpy(), want[0], atol=2e-6)
    image = X.reshape(2, 3, 2, 5)
    got = dg.nn.InstanceNorm2d(3)(dg.ag_tensor(image)).numpy()
    np.testing.assert_allclose(got, want.reshape(2, 3, 2, 5), atol=2e-6)
    with pytest.raises(dg.InvalidValueError, match=r"^InstanceNorm1d: argument 'track_run"):
        dg.nn.InstanceNorm1d(3, track_running_stats=True)
    with pytest.raises(dg.ShapeError, match=r"^InstanceNorm2d: argument 'x'"):
        dg.nn.InstanceNorm2d(4)(dg.ag_tensor(image))


def test_prelu_per_channel_and_shared(device):
    slopes = np.array([0.1, 0.2, 0.3], np.float32)
    want = np.where(X >= 0, X, slopes[:, None] * X)
    np.testing.assert_array_equal(F.prelu(dg.ag_tensor(X), dg.ag_tensor(slopes)).numpy(), want)
    layer = dg.nn.PReLU()
    x = dg.ag_tensor(X, requires_grad=True)
    with dg.with_grad_tape():
        y = layer(x)
        dg.sum(y).backward()
    np.testing.assert_array_equal(y.numpy(), np.where(X >= 0, X, np.float32(0.25) * X))
    np.testing.assert_allclose(layer.weight.grad.numpy(), [X[X < 0].sum()], rtol=1e-5)
    with pytest.raises(dg.ShapeError, match=r"^prelu: argument 'weight'"):
        F.prelu(dg.ag_tensor(X), dg.ones(4))


@pytest.mark.parametrize("make, shape", [(lambda: dg.nn.Dropout2d(0.5), (4, 8, 3, 3)),
                                         (lambda: dg.nn.Dropout1d(0.5), (8, 5)),
                                         (lambda: F.dropout2d, (4, 8, 3, 3))])
def test_channel_dropout_keeps_or_drops_whole_channels(device, make, shape):
    drop = make()
    y = drop(dg.ones(*shape)).numpy().reshape(shape[:-2 if len(shape) == 4 else -1] + (-1,))
    assert all(len(np.unique(row)) == 1 for row in y.reshape(-1, y.shape[-1]))
    assert set(np.unique(y)) <= {0.0, 2.0} and 0 < np.count_nonzero(y) < y.size
    if isinstance(drop, dg.nn.Module):
        drop.eval()
        np.testing.assert_array_equal(drop(dg.ones(*shape)).numpy(), np.ones(shape))


def test_parameter_containers_register_and_train(device):
    class Model(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = dg.nn.ParameterList([np.ones(3, np.float32), dg.ones(3) * 2])
            self.shifts = dg.nn.ParameterDict({"a": np.zeros(3, np.float32)})

        def forward(self, x):
            for s in self.scales:
                x = x * s
            return x + self.shifts["a"]
    m = Model()
    assert list(m.state_dict()) == ["scales.0", "scales.1", "shifts.a"]
    assert isinstance(m.scales[1], dg.Parameter) and len(m.scales) == 2 and "a" in m.shifts
    opt = dg.optim.SGD(m.parameters(), lr=0.1)
    with dg.with_grad_tape():
        dg.sum(m(dg.ones(3))).backward()
    opt.step()
    np.testing.assert_allclose(m.shifts["a"].numpy(), np.full(3, -0.1), rtol=1e-6)
    np.testing.assert_allclose(m.scales[0].numpy(), np.full(3, 0.8), rtol=1e-6)
    with pytest.raises(dg.ArgumentTypeError, match=r"^ParameterList: argument 'values\[2\]'"):
        m.scales.append("x")
    with pytest.raises(dg.InvalidValueError, match=r"^ParameterDict: argument 'name'"):
        m.shifts["a.b"] = np.ones(1)


def test_shrinkages_threshold_and_their_layers(device):
    x = np.linspace(-2, 2, 17).astype(np.float32)
    t = dg.ag_tensor(x)
    np.testing.assert_array_equal(F.hardshrink(t, 0.5).numpy(), np.where(np.abs(x) > 0.5, x, 0))
    np.testing.assert_array_equal(
        dg.nn.Softshrink(0.5)(t).numpy(),
        np.where(x > 0.5, x - np.float32(0.5), np.where(x < -0.5, x + np.float32(0.5), 0)))
    np.testing.assert_allclose(dg.nn.Tanhshrink()(t).numpy(), x - np.tanh(x), atol=2e-7)
    np.testing.assert_array_equal(dg.nn.Threshold(0.25, -3.0)(t).numpy(),
                                  np.where(x > 0.25, x, -3.0))
    np.testing.assert_array_equal(dg.nn.Hardshrink(1.0)(t).numpy(), F.hardshrink(t, 1.0).numpy())
    np.testing.assert_array_equal(dg.nn.GLU(0)(dg.ag_tensor(X)).numpy(),
                                  F.glu(dg.ag_tensor(X), 0).numpy())
    with pytest.raises(dg.InvalidValueError, match=r"^threshold: argument 'inplace'"):
        F.threshold(t, 0.0, 0.0, True)


def test_bilinear_layer(device):
    dg.manual_seed(9)
    layer = dg.nn.Bilinear(4, 5, 3)
    a = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((2, 5)).astype(np.float32)
    w, bias = layer.weight.numpy().astype(np.float64), layer.bias.numpy()
    want = np.einsum("bi,oij,bj->bo", a, w, b) + bias
    np.testing.assert_allclose(layer(dg.ag_tensor(a), dg.ag_tensor(b)).numpy(), want,
                               atol=1e-5)
    assert np.abs(w).max() <= 0.5 and layer.weight.shape == (3, 4, 5)     # U(-1/2, 1/2)


def test_embedding_from_pretrained(device):
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    frozen = dg.nn.Embedding.from_pretrained(table)
    np.testing.assert_array_equal(frozen(np.array([2, 0])).numpy(), table[[2, 0]])
    assert frozen.weight.requires_grad is False
    trained = dg.nn.Embedding.from_pretrained(dg.ag_tensor(table), freeze=False)
    with dg.with_grad_tape():
        dg.sum(trained(np.array([1, 1]))).backward()
    np.testing.assert_array_equal(trained.weight.grad.numpy(), [[0, 0], [2, 2], [0, 0]])
    with pytest.raises(dg.ShapeError, match=r"^Embedding.from_pretrained: argument 'embed"):
        dg.nn.Embedding.from_pretrained(np.ones(3))
