"""dg.autograd.grad (torch.autograd.grad's first-order form) on both backends: the same
gradients backward() accumulates, returned instead, for leaves and computed tensors, with
nothing added to any .grad."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg

RNG = np.random.default_rng(71)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 2)).astype(np.float32)


def _forward(x, w):
    h = dg.tanh(x @ w)
    return h, dg.sum(h * h)


def test_grad_returns_what_backward_accumulates(device):
    w = dg.ag_param(W)
    x = dg.ag_tensor(X, requires_grad=True)
    with dg.with_grad_tape():
        h, loss = _forward(x, w)
        gw, gh, gx = dg.autograd.grad(loss, [w, h, x], retain_graph=True)
        assert w.grad is None and x.grad is None          # (nothing accumulated)
        loss.backward()
    np.testing.assert_array_equal(gw.numpy(), w.grad.numpy())
    np.testing.assert_array_equal(gx.numpy(), x.grad.numpy())
    np.testing.assert_allclose(gh.numpy(), 2 * h.numpy(), rtol=1e-6)   # d sum(h^2) / dh


def test_several_outputs_and_given_output_gradients(device):
    w = dg.ag_param(W)
    x = dg.ag_tensor(X)
    with dg.with_grad_tape():
        h, loss = _forward(x, w)
        both, = dg.autograd.grad([loss, dg.sum(h)], w, retain_graph=True)
        one, = dg.autograd.grad(loss, w, retain_graph=True)
        other, = dg.autograd.grad(h, w, grad_outputs=dg.ones(3, 2))
    np.testing.assert_allclose(both.numpy(), one.numpy() + other.numpy(), rtol=1e-5,
                               atol=1e-6)


def test_unused_inputs_and_errors(device):
    w = dg.ag_param(W)
    spare = dg.ag_param(np.ones(2, np.float32))
    x = dg.ag_tensor(X)
    with dg.with_grad_tape():
        _, loss = _forward(x, w)
        with pytest.raises(dg.InvalidValueError, match=r"^grad: argument 'inputs\[1\]'"):
            dg.autograd.grad(loss, [w, spare], retain_graph=True)
        gw, gs = dg.autograd.grad(loss, [w, spare], allow_unused=True, retain_graph=True)
        assert gs is None
        _, zeros = dg.autograd.grad(loss, [w, spare], materialize_grads=True,
                                    retain_graph=True)
        np.testing.assert_array_equal(zeros.numpy(), [0.0, 0.0])
        with pytest.raises(dg.InvalidValueError, match=r"^grad: argument 'create_graph'"):
            dg.autograd.grad(loss, w, create_graph=True)
        with pytest.raises(dg.InvalidValueError, match=r"^grad: argument 'inputs\[0\]'"):
            dg.autograd.grad(loss, x)                      # (x does not require grad)
        dg.autograd.grad(loss, w)
        with pytest.raises(dg.GraphFreedError):
            dg.autograd.grad(loss, w)                      # (freed: retain_graph False)


def test_a_fused_relus_output_says_its_gradient_is_not_kept(device):
    model = dg.nn.Sequential(dg.nn.Linear(4, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))
    with dg.with_grad_tape():
        hidden = dg.linear(dg.ag_tensor(X), model[0].weight, model[0].bias,
                           activation="relu")
        out = dg.sum(model[2](hidden))
        with pytest.raises(dg.InvalidValueError, match=r"^grad: the gradient of this tensor"):
            dg.autograd.grad(out, hidden)
