"""dg.nn.init: PyTorch's initialisers, in place, seeded by manual_seed, on both backends."""
import math

import numpy as np
import pytest

import dualgrad as dg

init = dg.nn.init


def test_gains_are_pytorchs():
    assert init.calculate_gain("linear") == 1.0 and init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))


@pytest.mark.parametrize("fn, bound_or_std, uniform", [
    (lambda t: init.xavier_uniform_(t, gain=2.0), 2.0 * math.sqrt(6 / (300 + 200)), True),
    (lambda t: init.xavier_normal_(t), math.sqrt(2 / (300 + 200)), False),
    (lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)),
     math.sqrt(2 / 6) * math.sqrt(3 / 300), True),
    (lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
     math.sqrt(2) / math.sqrt(200), False),
    (lambda t: init.uniform_(t, -0.3, 0.3), 0.3, True),
    (lambda t: init.normal_(t, 0.0, 0.05), 0.05, False)])
def test_draws_have_the_documented_spread_and_repeat_with_the_seed(device, fn, bound_or_std,
                                                                   uniform):
    layer = dg.nn.Linear(300, 200)                  # weight (200, 300): fan_in 300, fan_out 200
    dg.manual_seed(7)
    assert fn(layer.weight) is layer.weight
    w = layer.weight.numpy()
    assert w.dtype == np.float32 and w.shape == (200, 300)
    if uniform:
        assert np.abs(w).max() <= bound_or_std and np.abs(w).max() > 0.99 * bound_or_std
        assert np.std(w) == pytest.approx(bound_or_std / math.sqrt(3), rel=0.02)
    else:
        assert np.std(w) == pytest.approx(bound_or_std, rel=0.02)
    assert abs(np.mean(w)) < 0.05 * bound_or_std
    dg.manual_seed(7)
    fn(layer.weight)
    np.testing.assert_array_equal(layer.weight.numpy(), w)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (3, 2, 2)])
def test_orthogonal_rows_or_columns_are_orthonormal(device, shape):
    t = dg.ag_param(np.zeros(shape, np.float32))
    init.orthogonal_(t, gain=1.5)
    q = t.numpy().astype(np.float64).reshape(shape[0], -1)
    small = min(q.shape)
    gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
    np.testing.assert_allclose(gram, 2.25 * np.eye(small), atol=1e-5)


def test_constants_fill_a_trained_parameter_in_place(device):
    layer = dg.nn.Linear(3, 2)
    init.zeros_(layer.bias)
    init.constant_(layer.weight, 0.5)
    np.testing.assert_array_equal(layer.bias.numpy(), np.zeros(2, np.float32))
    np.testing.assert_array_equal(layer(dg.ag_tensor(np.ones((1, 3), np.float32))).numpy(),
                                  [[1.5, 1.5]])
    init.ones_(layer.bias)
    np.testing.assert_array_equal(layer.bias.numpy(), np.ones(2, np.float32))


def truncated_cdf(x, mean, std, a, b):
    """The CDF of N(mean, std^2) restricted to [a, b], from upper tails (math.erfc, exact
    far out where differences of the CDF itself would cancel)."""
    def upper(v):                                  # P(Z > v) of a standard normal
        return math.erfc(v / math.sqrt(2.0)) / 2.0
    lo, hi = (a - mean) / std, (b - mean) / std
    z = (np.asarray(x, np.float64) - mean) / std
    if hi <= 0:                                    # (the left tail: by symmetry)
        return 1.0 - truncated_cdf(-np.asarray(x, np.float64), -mean, std, -b, -a)
    return (upper(lo) - np.vectorize(upper)(z)) / (upper(lo) - upper(hi))


@pytest.mark.parametrize("mean, std, a, b", [
    (0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (0.0, 1.0, -0.9, 0.05),
    (0.0, 1.0, 5.0, 6.0), (1.0, 1.0, -8.0, -6.0), (0.0, 1.0, 1.0, math.inf),
    (3.0, 2.0, -math.inf, 0.0), (0.0, 1.0, 2.0, 2.4)],
    ids=["default", "std 0.02", "narrow", "right tail", "left tail", "one-sided", "below mean",
         "narrow tail"])
def test_trunc_normal_draws_the_truncated_normal(device, mean, std, a, b):
    # every value in [a, b], and the values' distribution the truncated normal's: the
    # largest gap between their empirical CDF and its (Kolmogorov-Smirnov) below the 1%
    # critical value, 1.63 / sqrt(n)
    t = dg.ag_param(np.zeros((100, 200), np.float32))
    dg.manual_seed(3)
    assert init.trunc_normal_(t, mean, std, a, b) is t
    w = np.sort(t.numpy().ravel().astype(np.float64))
    assert a <= w[0] and w[-1] <= b
    n = w.size
    cdf = truncated_cdf(w, mean, std, a, b)
    gap = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    assert gap < 1.63 / math.sqrt(n)
    dg.manual_seed(3)
    init.trunc_normal_(t, mean, std, a, b)
    np.testing.assert_array_equal(np.sort(t.numpy().ravel()), w.astype(np.float32))


def test_eye_and_dirac_pass_the_input_through(device):
    w = dg.ag_param(np.full((3, 4), 5.0, np.float32))
    np.testing.assert_array_equal(init.eye_(w).numpy(), np.eye(3, 4))
    conv = dg.nn.Conv2d(4, 4, 3, padding=1, bias=False)
    init.dirac_(conv.weight)
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(conv(dg.ag_tensor(x)).numpy(), x)
    grouped = dg.ag_param(np.ones((6, 2, 3), np.float32))
    want = np.zeros((6, 2, 3), np.float32)
    for filt, channel in ((0, 0), (1, 1), (3, 0), (4, 1)):    # 3 filters a group, 2 inputs
        want[filt, channel, 1] = 1.0
    np.testing.assert_array_equal(init.dirac_(grouped, groups=2).numpy(), want)


def test_bad_arguments_are_named():
    with pytest.raises(dg.ShapeError, match="xavier_uniform_: argument 'tensor'"):
        init.xavier_uniform_(dg.ag_param(np.zeros(5, np.float32)))
    with pytest.raises(dg.InvalidValueError, match="'mode'"):
        init.kaiming_normal_(dg.ag_param(np.zeros((2, 2), np.float32)), mode="fan")
    with pytest.raises(dg.InvalidValueError, match="'nonlinearity'"):
        init.calculate_gain("swish")
    with pytest.raises(dg.ArgumentTypeError, match="'tensor'"):
        init.normal_(np.zeros(3))
    with pytest.raises(dg.InvalidValueError, match="'std'"):
        init.normal_(dg.ag_param(np.zeros(3, np.float32)), std=-1.0)
    w = dg.ag_param(np.ones((2, 2), np.float32))
    with pytest.raises(dg.InvalidValueError, match=r"^trunc_normal_: argument 'b'.*above a"):
        init.trunc_normal_(w, a=1.0, b=1.0)
    with pytest.raises(dg.ArgumentTypeError, match=r"^trunc_normal_: argument 'a'"):
        init.trunc_normal_(w, a=float("nan"))
    with pytest.raises(dg.ShapeError, match=r"^eye_: argument 'tensor'"):
        init.eye_(dg.ag_param(np.ones((2, 2, 2), np.float32)))
    with pytest.raises(dg.InvalidValueError, match=r"^dirac_: argument 'groups'"):
        init.dirac_(dg.ag_param(np.ones((3, 2, 3), np.float32)), groups=2)
    np.testing.assert_array_equal(w.numpy(), np.ones((2, 2)))      # (left as it was)
