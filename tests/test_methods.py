"""Tensor methods under PyTorch's names (dualgrad/api/methods.py): each gives what the
function of that name gives, gradients included, on both backends."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg

X = np.random.default_rng(11).standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("method, function", [
    (lambda t: t.exp(), lambda t: dg.exp(t)),
    (lambda t: t.abs().sqrt(), lambda t: dg.sqrt(dg.abs(t))),
    (lambda t: t.pow(2).add(1).mul(3), lambda t: (t ** 2 + 1) * 3),
    (lambda t: t.softmax(-1), lambda t: dg.softmax(t, dim=-1)),
    (lambda t: t.clamp(min=0.1), lambda t: dg.clamp(t, 0.1)),
    (lambda t: t.where(t > 0, 0.5), lambda t: dg.where(t > 0, t, 0.5)),
    (lambda t: t.amax(1, keepdim=True), lambda t: dg.amax(t, 1, True)),
    (lambda t: t.transpose(0, 2), lambda t: dg.transpose(t, (2, 1, 0))),
    (lambda t: t.permute(2, 0, 1), lambda t: dg.transpose(t, (2, 0, 1))),
    (lambda t: t.permute((1, 2, 0)), lambda t: dg.transpose(t, (1, 2, 0))),
    (lambda t: t.mT, lambda t: dg.transpose(t, (0, 2, 1))),
    (lambda t: t[0].t(), lambda t: t[0].T),
    (lambda t: t.narrow(2, 1, 2), lambda t: t[:, :, 1:3]),
    (lambda t: t.narrow(-1, -3, 3), lambda t: t[..., 1:]),
], ids=["exp", "abs sqrt", "pow add mul", "softmax", "clamp", "where", "amax", "transpose",
        "permute", "permute tuple", "mT", "t", "narrow", "narrow from the end"])
def test_a_method_is_its_function(device, method, function):
    got, want = [], []
    for call, into in ((method, got), (function, want)):
        t = dg.ag_tensor(X, requires_grad=True)
        with dg.with_grad_tape():
            y = call(t)
            dg.sum(y * y).backward()
        into += [y.numpy(), t.grad.numpy()]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_pythons_abs_round_and_plus_give_tensors(device):
    t = dg.ag_tensor(np.array([-1.25, 2.5, -3.75], np.float32))
    np.testing.assert_array_equal(abs(t).numpy(), [1.25, 2.5, 3.75])
    np.testing.assert_array_equal(round(t).numpy(), [-1.0, 2.0, -4.0])     # (half to even)
    np.testing.assert_array_equal(round(t, 1).numpy(), np.float32([-1.2, 2.5, -3.8]))
    assert +t is t


def test_size_is_the_count_and_called_gives_the_shape(device):
    t = dg.ag_tensor(X)
    assert t.size == 24 and isinstance(t.size, int) and t.numel() == 24
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.dim() == 3 and t.contiguous() is t
    assert t.tolist() == X.tolist()
    parts = t.unbind(1)
    assert len(parts) == 3 and all(p.shape == (2, 4) for p in parts)
    np.testing.assert_array_equal(parts[2].numpy(), X[:, 2])


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: t.size(3), dg.AxisOutOfRange, r"^size: argument 'dim'"),
    (lambda t: t.transpose(0, 3), dg.AxisOutOfRange, r"^transpose: argument 'dim1'"),
    (lambda t: t.t(), dg.ShapeError, r"^t: argument 'self'"),
    (lambda t: t.narrow(1, 2, 2), dg.InvalidValueError, r"^narrow: argument 'start'"),
    (lambda t: t.unbind(-4), dg.AxisOutOfRange, r"^unbind: argument 'dim'"),
])
def test_bad_arguments_name_themselves(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(X))


def test_detach_stops_the_gradient_and_clone_passes_it(device):
    """d/dp of sum((2p)^2) + sum(detach(2p) * p) is 8p + 2p: the clone's gradient flows
    back, the detached value is a constant (PyTorch's detach and clone)."""
    p = dg.ag_param(np.array([1.0, -2.0, 3.0], np.float32))
    with dg.with_grad_tape():
        y = p * 2
        constant, copy = y.detach(), y.clone()
        (dg.sum(copy * copy) + dg.sum(constant * p)).backward()
    assert not constant.requires_grad
    np.testing.assert_array_equal(constant.numpy(), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(copy.numpy(), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(p.grad.numpy(), [10.0, -20.0, 30.0])


def test_more_of_torchs_methods(device):
    t = dg.ag_tensor(X)
    np.testing.assert_array_equal(dg.add(t, t, alpha=2).numpy(), X + 2 * X)
    np.testing.assert_array_equal(t.sub(1.0, alpha=0.5).numpy(), X - np.float32(0.5))
    np.testing.assert_array_equal(t.clamp_min(0.0).numpy(), np.maximum(X, 0))
    np.testing.assert_array_equal(dg.clamp_max(t, 0.0).numpy(), np.minimum(X, 0))
    np.testing.assert_array_equal(dg.addcmul(t, t, t, value=2).numpy(),
                                  X + (np.float32(2) * X) * X)
    np.testing.assert_array_equal(t.addcdiv(t, t + 4.0).numpy(), X + X / (X + np.float32(4)))
    np.testing.assert_array_equal(t.scatter_add(0, np.zeros((1, 3, 4), np.int64),
                                                t[:1]).numpy()[0], 2 * X[0])
    assert t.new_zeros(2, 3).dtype == t.dtype and t.new_full((2,), 5).numpy().tolist() == [5, 5]
    assert t.new_ones(1).numpy().tolist() == [1] and t.new_empty(2).shape == (2,)
    assert t.new_tensor([1, 2]).dtype == dg.float32 and t.is_floating_point()
    assert not dg.tensor([1]).is_floating_point() and t.element_size() == 4
    assert t.nelement() == 24 and t.is_contiguous() and t.unflatten(2, (2, 2)).shape == (2, 3, 2, 2)
    assert (t > 0).logical_and(t > 1).dtype == np.bool_


def test_leaf_flags_as_torchs(device):
    x = dg.ag_tensor(X)
    assert x.is_leaf and x.grad_fn is None and x.requires_grad_() is x and x.requires_grad
    with dg.with_grad_tape():
        y = x * 2.0
        assert not y.is_leaf and y.grad_fn is not None
        with pytest.raises(dg.InvalidValueError, match=r"^requires_grad_: argument 'self'"):
            y.requires_grad_(False)
        assert y.detach_() is y and y.is_leaf and not y.requires_grad
    with pytest.raises(dg.InvalidValueError, match=r"^requires_grad_: argument 'requires_grad'"):
        dg.tensor([1, 2]).requires_grad_()
