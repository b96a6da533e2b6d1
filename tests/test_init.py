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
