"""dg.checkpoint: a checkpointed function gives the same values and gradients (its
parameters' too, dropout included) as the plain call, keeps less in the tape's memory on
the gpu, replays in a captured step, and refuses what it cannot do."""
import numpy as np
import pytest

import dualgrad as dg
from dualgrad import nn
from conftest import loss_step, peak_during

X = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)


def blocks():
    dg.manual_seed(0)
    return nn.ModuleList(nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Dropout(0.25),
                                       nn.Linear(128, 32)) for _ in range(3))


def run(layers, checkpointed: bool, x_grad: bool = True, inputs=X):
    x = dg.ag_tensor(inputs, requires_grad=x_grad)
    with dg.with_grad_tape():
        h = x
        for block in layers:
            h = h + (dg.checkpoint(block, h) if checkpointed else block(h))
        loss = dg.sum(h * h)
        loss.backward()
    grads = [p.grad.numpy() for p in layers.parameters()]
    if x_grad:
        grads.append(x.grad.numpy())
    layers.zero_grad()
    return loss.item(), grads


@pytest.mark.parametrize("x_grad", [True, False])
def test_the_same_values_and_gradients_as_the_plain_call(device, x_grad):
    plain, again = blocks(), blocks()
    loss, grads = run(plain, False, x_grad)
    loss2, grads2 = run(again, True, x_grad)
    assert loss2 == loss
    assert len(grads2) == len(grads)
    for a, b in zip(grads2, grads):
        np.testing.assert_array_equal(a, b)
    # the dropout modules moved on by one call each, as in the plain run
    assert [m.step for _, m in again.named_modules() if isinstance(m, nn.Dropout)] == \
        [1, 1, 1]


@pytest.mark.gpu
def test_the_tape_keeps_less(gpu):
    rows = np.tile(X, (16, 1))                   # activations well past the parameters
    plain = peak_during(lambda: run(blocks(), False, inputs=rows))
    kept = peak_during(lambda: run(blocks(), True, inputs=rows))
    # each block's hidden activations (1024 x 128 floats: the first product's, which gelu
    # saves, and gelu's, which the second product saves) are not kept; the backward pass
    # has one block's again at a time: two blocks' worth are saved at the peak
    assert kept + 2 * 2 * 1024 * 128 * 4 <= plain, (kept, plain)


def test_outside_a_tape_it_is_a_plain_call(device):
    layer = nn.Linear(32, 4)
    got = dg.checkpoint(layer, dg.ag_tensor(X)).numpy()
    np.testing.assert_array_equal(got, layer(dg.ag_tensor(X)).numpy())


@pytest.mark.gpu
def test_a_captured_step_with_a_checkpoint_replays_as_eager_steps(gpu):
    def make():
        layers = blocks()
        return layers, dg.optimizer_adam(layers.parameters(), lr=1e-2)

    def step_of(layers, opt):
        def loss_of(x):
            h = dg.ag_tensor(x)
            for block in layers:
                h = h + dg.checkpoint(block, h)
            return dg.sum(h * h)
        return loss_step(opt, loss_of)
    (a, oa), (b, ob) = make(), make()
    eager, captured = step_of(a, oa), dg.capture_step(step_of(b, ob))
    for k in range(4):
        x = np.random.default_rng(k).standard_normal((64, 32)).astype(np.float32)
        assert captured(x).item() == eager(x).item(), k
    assert captured.replays >= 1 and captured.reason == ""


def test_bad_arguments_name_themselves(device):
    x = dg.ag_tensor(X, requires_grad=True)
    with dg.with_grad_tape():
        with pytest.raises(dg.ArgumentTypeError, match="^checkpoint: argument 'fn'"):
            dg.checkpoint("block", x)
        with pytest.raises(dg.ArgumentTypeError, match="^checkpoint: fn returned tuple"):
            dg.checkpoint(lambda t: (t, t), x)
