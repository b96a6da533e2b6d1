"""Module hooks and lookups, dg.nn.utils and dg.optim.lr_scheduler under PyTorch's names."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg
import dualgrad.nn.utils as utils
from dualgrad.optim.lr_scheduler import StepLR


def _model():
    dg.manual_seed(2)
    return dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))


def test_forward_hooks_see_and_may_replace(device):
    m = _model()
    x = dg.ag_tensor(np.ones((4, 2), np.float32))
    plain = m(x).numpy()
    seen = []
    h = m[0].register_forward_hook(lambda mod, args, out: seen.append((mod, out.shape)))
    np.testing.assert_array_equal(m(x).numpy(), plain)   # (the fused Linear + ReLU step is
    assert seen == [(m[0], (4, 3))]                       # left for the hooked one's call)
    p = m[2].register_forward_pre_hook(lambda mod, args: args[0] * 0.0)
    np.testing.assert_array_equal(m(x).numpy(), np.broadcast_to(m[2].bias.numpy(), (4, 1)))
    q = m.register_forward_hook(lambda mod, args, out: out * 2.0)
    np.testing.assert_array_equal(m(x).numpy(), 2 * np.broadcast_to(m[2].bias.numpy(),
                                                                     (4, 1)))
    for handle in (h, p, q):
        handle.remove()
    handle.remove()                                       # (twice: nothing more happens)
    np.testing.assert_array_equal(m(x).numpy(), plain)
    assert len(seen) == 3
    with pytest.raises(dg.ArgumentTypeError, match=r"^register_forward_hook: argument 'hook'"):
        m.register_forward_hook(3)


def test_get_parameter_buffer_and_register_module():
    m = _model()
    m.register_module("norm", dg.nn.BatchNorm1d(1))
    assert m.get_parameter("0.weight") is m[0].weight
    assert m.get_buffer("norm.running_mean") is m.norm.running_mean
    with pytest.raises(dg.InvalidValueError, match=r"^get_parameter: Linear has no parameter"):
        m.get_parameter("2.scale")


def test_parameter_vectors_and_clipping(device):
    m = _model()
    v = utils.parameters_to_vector(m.parameters())
    assert v.shape == (13,)
    np.testing.assert_array_equal(v.numpy()[:6], m[0].weight.numpy().reshape(-1))
    utils.vector_to_parameters(dg.ag_tensor(np.arange(13, dtype=np.float32)), m.parameters())
    np.testing.assert_array_equal(m[2].bias.numpy(), [12.0])
    np.testing.assert_array_equal(m[0].bias.numpy(), [6.0, 7.0, 8.0])
    with dg.with_grad_tape():
        dg.sum(m(dg.ones(2, 2))).backward()
    norm = utils.clip_grad_norm_(m.parameters(), 1.0)
    assert norm.item() > 1.0
    total = np.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum() for p in m.parameters()))
    assert abs(total - 1.0) < 1e-5
    utils.clip_grad_value_(m.parameters(), 0.01)
    assert max(np.abs(p.grad.numpy()).max() for p in m.parameters()) <= 0.01
    with pytest.raises(dg.ShapeError, match=r"^vector_to_parameters: argument 'vec'"):
        utils.vector_to_parameters(dg.zeros(5), m.parameters())


def test_lr_scheduler_is_the_schedules_module():
    opt = dg.optim.SGD(_model().parameters(), lr=0.1)
    schedule = dg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    assert StepLR is dg.optim.StepLR
    schedule.step()
    assert schedule.get_last_lr() == [0.05]


def test_pad_sequence(device):
    from dualgrad.nn.utils.rnn import pad_sequence
    seqs = [np.full((n, 2), n, np.float32) for n in (2, 4, 3)]
    out = pad_sequence([dg.ag_tensor(s) for s in seqs], batch_first=True, padding_value=-1.0)
    assert out.shape == (3, 4, 2)
    np.testing.assert_array_equal(out.numpy()[0], [[2, 2], [2, 2], [-1, -1], [-1, -1]])
    left = pad_sequence([dg.ag_tensor(s) for s in seqs], padding_side="left")
    assert left.shape == (4, 3, 2)
    np.testing.assert_array_equal(left.numpy()[:, 2, 0], [0, 3, 3, 3])
    with pytest.raises(dg.ShapeError, match=r"^pad_sequence: sequences\[1\]"):
        pad_sequence([dg.ones(2, 2), dg.ones(3, 3)])


def test_module_zero_grad_to_none_or_zeros(device):
    m = _model()
    with dg.with_grad_tape():
        dg.sum(m(dg.ones(2, 2))).backward()
    kept = m[0].weight.grad
    m.zero_grad(set_to_none=False)
    assert m[0].weight.grad is kept
    np.testing.assert_array_equal(kept.numpy(), np.zeros((3, 2)))
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
