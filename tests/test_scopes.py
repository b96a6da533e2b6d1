"""How long tensors live, the same on both backends (dualgrad/api/scopes.py): values from the
host live on; a tensor computed in a tape lives until the next tape, one computed in an
evaluation (no_grad() outside a tape) until the next evaluation; a dead one raises the same
DeadTensorError on both backends, naming the block that freed it."""
import re

import numpy as np
import pytest

import dualgrad as dg

X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def model():
    dg.manual_seed(0)
    return dg.nn.Sequential(dg.nn.Linear(3, 5), dg.nn.ReLU(), dg.nn.Linear(5, 2))


def test_a_host_value_made_outside_a_tape_outlives_tapes_and_evaluations(device):
    m = model()
    x = dg.ag_tensor(X)
    with dg.no_grad():
        first = m(x).numpy()
    with dg.with_grad_tape():
        dg.sum(m(x)).backward()
    with dg.no_grad():
        again = m(x).numpy()
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(x.numpy(), X)


def test_a_host_value_made_inside_a_tape_outlives_it(device):
    # a batch made in step 1's tape, used again in later tapes and evaluations: on the gpu
    # it is copied out of the pass pool, on the device, before that pool is freed
    m = model()
    with dg.with_grad_tape():
        x = dg.ag_tensor(X)
        dg.sum(m(x)).backward()
    dg.reset_transfer_stats()
    for _ in range(3):
        with dg.with_grad_tape():
            dg.sum(m(x)).backward()
        with dg.no_grad():
            m(x)
    assert dg.transfer_stats()["h2d_bytes"] == 0          # never uploaded again
    np.testing.assert_array_equal(x.numpy(), X)


def test_an_input_that_requires_grad_keeps_its_gradient_across_tapes(device):
    x = dg.ag_tensor(X, requires_grad=True)
    for _ in range(2):
        with dg.with_grad_tape():
            dg.sum(x * x).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 * X, rtol=1e-6)   # accumulated
    with dg.no_grad():
        pass
    np.testing.assert_allclose(x.grad.numpy(), 4 * X, rtol=1e-6)


def test_the_loss_stays_readable_after_an_evaluation(device):
    m = model()
    opt = dg.optimizer_adam(m.parameters(), lr=1e-2)
    with dg.with_grad_tape():
        loss = dg.sum(m(dg.ag_tensor(X)))
        loss.backward()
    opt.step()
    opt.zero_grad()
    with dg.no_grad():
        val = m(dg.ag_tensor(X))
    assert np.isfinite(loss.item()) and np.isfinite(val.numpy()).all()


def test_a_validation_batch_is_reused_across_epochs(device):
    m = model()
    opt = dg.optimizer_sgd(m.parameters(), lr=0.1)
    xv = dg.ag_tensor(X)
    losses = []
    for _ in range(3):
        with dg.with_grad_tape():
            loss = dg.mse_loss(m(dg.ag_tensor(X)), np.zeros((4, 2), np.float32))
            loss.backward()
        opt.step()
        opt.zero_grad()
        with dg.no_grad():
            losses.append(dg.mse_loss(m(xv), np.zeros((4, 2), np.float32)).item())
    assert losses[2] < losses[0]


def _dead_message(trigger) -> str:
    with pytest.raises(dg.DeadTensorError) as info:
        trigger()
    return str(info.value)


def test_a_tensor_from_an_earlier_tape_is_dead_on_both_backends(device):
    m = model()
    with dg.with_grad_tape():
        y = m(dg.ag_tensor(X))
    with dg.with_grad_tape():
        pass
    here = r"test_scopes\.py:\d+"
    text = _dead_message(y.numpy)
    assert re.search(rf"computed in the with_grad_tape\(\) at {here} and freed when the "
                     rf"with_grad_tape\(\) at {here} began", text), text
    assert "t.numpy() or t.item() keep it" in text
    _dead_message(lambda: dg.relu(y))                     # using it fails alike


def test_an_evaluations_tensor_dies_at_the_next_evaluation_not_at_a_tape(device):
    m = model()
    with dg.no_grad():
        y = m(dg.ag_tensor(X))
    with dg.with_grad_tape():
        pass
    assert y.numpy().shape == (4, 2)                      # read: kept from now on
    with dg.no_grad():
        z = m(dg.ag_tensor(X))
    with dg.no_grad():
        pass
    assert "freed when the no_grad() at" in _dead_message(z.numpy)
    assert y.numpy().shape == (4, 2)                      # (kept since it was read)


def test_a_value_read_before_its_tape_ends_is_kept(device):
    with dg.with_grad_tape():
        y = dg.exp(dg.ag_param(np.zeros(3)))
        first = y.numpy()
    with dg.with_grad_tape():
        pass
    np.testing.assert_array_equal(y.numpy(), first)
    np.testing.assert_array_equal(dg.add(y, 1.0).numpy(), first + 1)


def test_nested_evaluations_free_only_at_the_outermost(device):
    m = model()
    with dg.no_grad():
        outer = m(dg.ag_tensor(X))
        with dg.no_grad():
            inner = m(dg.ag_tensor(X))
        np.testing.assert_array_equal(outer.numpy(), inner.numpy())


def test_a_tape_left_by_an_exception_frees_its_tensors(device):
    with pytest.raises(ZeroDivisionError):
        with dg.with_grad_tape():
            y = dg.exp(dg.ag_param(np.ones(3)))
            1 / 0
    assert "was left by an exception" in _dead_message(y.numpy)


@pytest.mark.gpu
def test_a_failed_steps_memory_is_free_again_at_once(gpu):
    # the pass pool holds nothing of a step that raised: what fits before it fits after
    before = dg.tape_mem()["buffer_bytes"]
    with pytest.raises(ZeroDivisionError):
        with dg.with_grad_tape():
            dg.add(np.zeros((256, 1), np.float32), np.zeros((1, 256), np.float32))
            1 / 0
    assert dg.tape_mem()["buffer_bytes"] <= before
