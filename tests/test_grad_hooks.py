"""Tensor.register_hook and Tensor.retain_grad, as PyTorch's, on both backends."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import dualgrad as dg

RNG = np.random.default_rng(81)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 2)).astype(np.float32)


def test_retain_grad_and_hooks_see_the_gradient(device):
    w = dg.ag_param(W)
    x = dg.ag_tensor(X, requires_grad=True)
    seen = []
    with dg.with_grad_tape():
        h = dg.tanh(x @ w)
        h.retain_grad()
        h.register_hook(lambda g: seen.append(g.numpy().copy()))
        dg.sum(h * h).backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(seen[0], h.grad.numpy())


def test_a_hook_may_replace_the_gradient(device):
    plain = dg.ag_param(W)
    doubled = dg.ag_param(W)
    handle = doubled.register_hook(lambda g: g * 2.0)
    for p in (plain, doubled):
        with dg.with_grad_tape():
            dg.sum(dg.tanh(dg.ag_tensor(X) @ p) ** 2).backward()
    np.testing.assert_allclose(doubled.grad.numpy(), 2 * plain.grad.numpy(), rtol=1e-6)
    handle.remove()
    doubled.grad = None
    with dg.with_grad_tape():
        dg.sum(dg.tanh(dg.ag_tensor(X) @ doubled) ** 2).backward()
    np.testing.assert_array_equal(doubled.grad.numpy(), plain.grad.numpy())
    x = dg.ag_tensor(X, requires_grad=True)
    with dg.with_grad_tape():
        h = x * 3.0
        h.register_hook(lambda g: g * 0.0)                   # (cuts the flow to x)
        dg.sum(h).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(X))


def test_a_watch_goes_with_its_tensor(device):
    """A watch is keyed by its node's id: a later node with the same id is not watched."""
    calls = []
    x = dg.ag_tensor(X, requires_grad=True)
    for _ in range(20):
        with dg.with_grad_tape():
            h = x * 2.0
            h.register_hook(lambda g: calls.append(1))
            dg.sum(h).backward()
        del h
        gc.collect()
    assert len(calls) == 20
    with dg.with_grad_tape():
        dg.sum(x * 2.0).backward()                          # (no hook of the old ones)
    assert len(calls) == 20


def test_hook_errors():
    with pytest.raises(dg.InvalidValueError, match=r"^register_hook: the tensor does not"):
        dg.ones(2).register_hook(lambda g: g)
    with pytest.raises(dg.ArgumentTypeError, match=r"^register_hook: argument 'hook'"):
        dg.ag_param(np.ones(2)).register_hook(3)
