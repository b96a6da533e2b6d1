"""In-place tensor methods under PyTorch's names (dualgrad/api/inplace.py) on both
backends: each writes what the op of its name computes into the tensor's own storage,
which views of that storage see; refused inside a tape, and a failing call changes
nothing."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg

A = np.random.default_rng(31).standard_normal((2, 3)).astype(np.float32)
B = np.random.default_rng(32).standard_normal((2, 3)).astype(np.float32)


@pytest.mark.parametrize("inplace, outofplace", [
    (lambda t: t.add_(dg.ag_tensor(B)), lambda t: t + dg.ag_tensor(B)),
    (lambda t: t.add_(dg.ag_tensor(B), alpha=-0.5), lambda t: t + dg.ag_tensor(B) * -0.5),
    (lambda t: t.sub_(1.5), lambda t: t - 1.5),
    (lambda t: t.mul_(dg.ag_tensor(B[0])), lambda t: t * dg.ag_tensor(B[0])),
    (lambda t: t.div_(4.0), lambda t: t / 4.0),
    (lambda t: t.pow_(2), lambda t: t ** 2),
    (lambda t: t.clamp_(-0.5, 0.5), lambda t: dg.clamp(t, -0.5, 0.5)),
    (lambda t: t.clip_(min=0.0), lambda t: dg.clamp(t, 0.0)),
    (lambda t: t.neg_(), lambda t: -t),
    (lambda t: t.abs_(), dg.abs),
    (lambda t: t.exp_(), dg.exp),
    (lambda t: t.abs_().log_(), lambda t: dg.log(dg.abs(t))),
    (lambda t: t.abs_().sqrt_(), lambda t: dg.sqrt(dg.abs(t))),
    (lambda t: t.sigmoid_(), dg.sigmoid),
    (lambda t: t.tanh_(), dg.tanh),
    (lambda t: t.relu_(), dg.relu),
    (lambda t: t.lerp_(dg.ag_tensor(B), 0.25), lambda t: dg.lerp(t, dg.ag_tensor(B), 0.25)),
    (lambda t: t.addcmul_(dg.ag_tensor(B), dg.ag_tensor(B), value=0.5),
     lambda t: t + dg.ag_tensor(B) * 0.5 * dg.ag_tensor(B)),
    (lambda t: t.addcdiv_(dg.ag_tensor(A), dg.ag_tensor(B)), lambda t: t + dg.ag_tensor(A) /
     dg.ag_tensor(B)),
    (lambda t: t.masked_fill_(dg.ag_tensor(A) > 0, 9.0),
     lambda t: dg.masked_fill(t, dg.ag_tensor(A) > 0, 9.0)),
    (lambda t: t.mul_(3).add_(1), lambda t: t * 3 + 1),
], ids=["add_", "add_ alpha", "sub_", "mul_ broadcast", "div_", "pow_", "clamp_", "clip_",
        "neg_", "abs_", "exp_", "log_", "sqrt_", "sigmoid_", "tanh_", "relu_", "lerp_",
        "addcmul_", "addcdiv_", "masked_fill_", "chained"])
def test_an_inplace_method_writes_its_op(device, inplace, outofplace):
    want = outofplace(dg.ag_tensor(A)).numpy()
    t = dg.ag_tensor(A)
    assert inplace(t) is t
    np.testing.assert_array_equal(t.numpy(), want)


def test_fill_zero_copy_and_random(device):
    t = dg.ag_tensor(A)
    np.testing.assert_array_equal(t.fill_(2.5).numpy(), np.full((2, 3), 2.5))
    np.testing.assert_array_equal(t.zero_().numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(t.copy_(B).numpy(), B)
    np.testing.assert_array_equal(t.copy_(dg.ag_tensor(A[1])).numpy(), np.stack([A[1]] * 2))
    np.testing.assert_array_equal(t.fill_(dg.ones(1) * 3).numpy(), np.full((2, 3), 3.0))
    i = dg.tensor([1, 2, 3])
    np.testing.assert_array_equal(i.copy_(dg.tensor([1.7, -2.2, 3.9])).numpy(), [1, -2, 3])
    np.testing.assert_array_equal(i.add_(2).numpy(), [3, 0, 5])
    dg.manual_seed(3)
    u = t.uniform_(-1, 1).numpy()
    dg.manual_seed(3)
    np.testing.assert_array_equal(dg.zeros(2, 3).uniform_(-1, 1).numpy(), u)
    assert -1 <= u.min() and u.max() < 1
    assert t.normal_(5.0, 0.1).numpy().mean() > 4


def test_a_parameter_written_in_place_stays_resident_and_trains(device):
    w = dg.ag_param(np.ones((2, 3), np.float32))
    w.mul_(2.0).add_(dg.ones(3), alpha=0.5)            # 2.5 everywhere
    opt = dg.optim.SGD([w], lr=0.1)
    with dg.with_grad_tape():
        dg.sum(w * 2.0).backward()
    w.grad.mul_(0.5)                                   # gradient scaled in place: 1.0
    opt.step()
    np.testing.assert_allclose(w.numpy(), np.full((2, 3), 2.4), rtol=1e-6)
    ema = dg.zeros(2, 3)
    ema.mul_(0.9).add_(w, alpha=0.1)
    np.testing.assert_allclose(ema.numpy(), np.full((2, 3), 0.24), rtol=1e-6)


def test_views_of_the_storage_see_writes(device):
    w = dg.ag_param(np.ones(3, np.float32))
    view = w.detach()
    np.testing.assert_array_equal(view.numpy(), np.ones(3))    # (read: cached on the host)
    opt = dg.optim.SGD([w], lr=0.5)
    with dg.with_grad_tape():
        dg.sum(w * 2.0).backward()
    opt.step()                                  # written by the optimizer's kernel ...
    np.testing.assert_array_equal(view.numpy(), np.zeros(3))   # ... seen through the view
    view.fill_(7.0)
    np.testing.assert_array_equal(w.numpy(), np.full(3, 7.0))
    flat = w.reshape(3, 1)
    flat.zero_()
    np.testing.assert_array_equal(w.numpy(), np.zeros(3))


def test_data_is_the_storage_without_history_as_pytorchs(device):
    """p.data: what PyTorch code writes through (init, EMA, clipping by hand) reaches the
    parameter on both backends, and a view taken before an optimizer step sees the step."""
    lin = dg.nn.Linear(3, 2)
    d = lin.weight.data
    assert d.shape == (2, 3) and not d.requires_grad and d.is_leaf and lin.weight.requires_grad
    dg.manual_seed(0)
    lin.weight.data.normal_(mean=0.0, std=0.02)          # (nanoGPT's initialisation)
    dg.manual_seed(0)
    want = dg.zeros(2, 3).normal_(mean=0.0, std=0.02).numpy()
    np.testing.assert_array_equal(lin.weight.numpy(), want)
    lin.bias.data.zero_()
    lin.weight.data.mul_(0.5)
    np.testing.assert_array_equal(lin.weight.numpy(), want * np.float32(0.5))
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)
    with dg.with_grad_tape():
        dg.sum(lin(dg.ones(4, 3))).backward()
    opt.step()
    np.testing.assert_array_equal(d.numpy(), lin.weight.numpy())
    np.testing.assert_array_equal(lin.bias.numpy(), np.full(2, -0.4, np.float32))
    lin.weight.data = np.ones((2, 3))                      # written in, converted
    np.testing.assert_array_equal(d.numpy(), np.ones((2, 3)))


def test_assigning_data_of_another_shape_is_refused_and_changes_nothing(device):
    w = dg.ag_param(A)
    with pytest.raises(dg.ShapeError, match=r"^data: argument 'value' has shape \(3,\)"):
        w.data = np.ones(3, np.float32)
    with dg.with_grad_tape():
        with pytest.raises(dg.CallOrderError, match=r"^data: in-place ops run outside"):
            w.data = np.zeros_like(A)
    np.testing.assert_array_equal(w.numpy(), A)


def test_inplace_inside_a_tape_is_refused_and_changes_nothing(device):
    w = dg.ag_param(A)
    with dg.with_grad_tape():
        y = dg.sum(w * w)
        with pytest.raises(dg.CallOrderError, match=r"^add_: in-place ops run outside"):
            w.add_(1.0)
        with pytest.raises(RuntimeError):               # (a RuntimeError, as PyTorch's)
            w.zero_()
        y.backward()
    np.testing.assert_array_equal(w.numpy(), A)
    np.testing.assert_array_equal(w.grad.numpy(), 2 * A)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: t.add_(dg.ones(4, 2, 3)), dg.ShapeError, r"^add_: the result's shape"),
    (lambda t: dg.tensor([1, 2, 3, 4, 5, 6]).reshape(2, 3).mul_(t), dg.ArgumentTypeError,
     r"^mul_: the result is float32"),
    (lambda t: t.fill_("x"), dg.ArgumentTypeError, r"^fill_: argument 'value'"),
    (lambda t: t.fill_(dg.ones(2)), dg.ShapeError, r"^fill_: argument 'value'"),
    (lambda t: dg.tensor([1, 2]).uniform_(), dg.ArgumentTypeError, r"^uniform_: the tensor"),
    (lambda t: t.clamp_(), dg.InvalidValueError, r"^clamp: at least one"),
])
def test_a_failing_inplace_call_changes_nothing(device, call, error, pattern):
    t = dg.ag_tensor(A)
    with pytest.raises(error, match=pattern):
        call(t)
    np.testing.assert_array_equal(t.numpy(), A)


def test_inplace_writes_replay_in_a_captured_step(device):
    w = dg.ag_param(np.ones(4, np.float32))
    opt = dg.optim.SGD([w], lr=0.25)

    def step(x):
        with dg.with_grad_tape():
            dg.sum(dg.ag_tensor(x) * w).backward()
        w.grad.clamp_(max=1.0)
        opt.step()
        opt.zero_grad()
        w.mul_(0.5)
    captured = dg.capture_step(step)
    want = np.ones(4, np.float32)
    for _ in range(4):
        captured(np.full(4, 3.0, np.float32))
        want = (want - np.float32(0.25)) * np.float32(0.5)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-6)
    if device == "gpu":                       # (the cpu backend runs each step again)
        assert captured.replayable and captured.replays >= 2, captured.reason


# -- t[key] = value -----------------------------------------------------------------------

M = (np.arange(24).reshape(2, 3, 4) % 7).astype(np.float32)


def _numpy_set(key, value):
    want = M.copy()
    want[key] = value
    return want


@pytest.mark.parametrize("key, value", [
    ((0,), 5.0),                                            # an int: a whole block
    ((slice(None), 1), np.arange(8, dtype=np.float32).reshape(2, 4)),
    ((Ellipsis, slice(1, None, 2)), -1.0),                  # ... and a step
    ((slice(None, None, -1), 0, slice(3, 0, -2)), np.array([1.0, 2.0], np.float32)),
    ((None, 1, 2), np.array([[9.0]], np.float32)),          # None adds an axis of 1
    ((np.array([1, 0, 1]), np.array([0, 2, 1])), np.arange(12, dtype=np.float32)
     .reshape(3, 4)),                                       # index arrays
    ((slice(None), [2, 0]), 3.0),                           # a list beside a slice
    ((M > 3,), 0.0),                                        # a mask with a number
    ((np.array([True, False]),), np.arange(12, dtype=np.float32).reshape(3, 4)),
    ((np.array([[True, False, True], [False, False, True]]),),
     np.array([1.0, 2.0, 3.0], np.float32)[:, None]),       # a mask with values
])
def test_setitem_writes_the_selection_as_numpy_and_pytorch(device, key, value):
    t = dg.ag_tensor(M)
    view = t.detach()                                       # (the same storage)
    t[key] = value
    np.testing.assert_array_equal(t.numpy(), _numpy_set(key, value))
    np.testing.assert_array_equal(view.numpy(), _numpy_set(key, value))


def test_setitem_takes_tensors_as_keys_and_values(device):
    t = dg.ag_tensor(M)
    t[t > 3] = dg.tensor(-2.0)                              # a bool tensor, a 0-d value
    t[dg.tensor([1]), 0] = dg.ones(4) * 7
    want = np.where(M > 3, -2, M).astype(np.float32)
    want[1, 0] = 7
    np.testing.assert_array_equal(t.numpy(), want)


def test_setitem_places_broadcast_axes_as_pytorch(device):
    # PyTorch takes the int first, so the index array's axis stays where it stands:
    # t[:, [0, 2], :, 1] has shape (2, 2, 4); NumPy would put it first (the int counted as
    # a second, separated, index array), the same shape with the first two axes swapped
    t = dg.ag_tensor(np.zeros((2, 3, 4, 5), np.float32))
    value = np.arange(16, dtype=np.float32).reshape(2, 2, 4)
    t[:, [0, 2], :, 1] = value
    want = np.zeros((2, 3, 4, 5), np.float32)
    for a in range(2):
        for j, row in enumerate([0, 2]):
            want[a, row, :, 1] = value[a, j]
    np.testing.assert_array_equal(t.numpy(), want)


def test_setitem_repeated_positions_take_the_last_value(device):
    t = dg.ag_tensor(np.zeros(5, np.float32))
    t[np.array([1, 3, 1, 1])] = np.array([7.0, 8.0, 9.0, 4.0], np.float32)
    np.testing.assert_array_equal(t.numpy(), [0, 4, 0, 8, 0])


def test_setitem_converts_values_to_the_tensors_dtype(device):
    i = dg.tensor([0, 0, 0, 0])
    i[1] = 2.7                                              # truncated, as PyTorch
    i[2:] = np.array([1.9, -1.9])
    i[np.array([True, False, False, False])] = -3.9           # (a mask with a number)
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i.numpy(), [-3, 2, 1, -1])
    with pytest.raises(dg.InvalidValueError, match=r"^setitem: argument 'value' is nan"):
        i[0] = float("nan")
    np.testing.assert_array_equal(i.numpy(), [-3, 2, 1, -1])
    b = dg.zeros(2, 3, dtype="bool")
    b[:, 1] = True
    b[np.array([0]), np.array([2])] = 1
    np.testing.assert_array_equal(b.numpy(), [[False, True, True], [False, True, False]])
    h = dg.ag_tensor(np.zeros((2, 3), np.float32), dtype="bfloat16")
    h[0] = 1.5
    h[h > 1] = 3.0
    h[np.array([1]), np.array([2])] = -0.25
    assert h.dtype == "bfloat16"
    np.testing.assert_array_equal(h.to("float32").numpy(), [[3, 3, 3], [0, 0, -0.25]])
    z = dg.tensor(3.0)
    z[()] = 5.0
    z[...] = z * 2
    assert float(z) == 10.0


def test_setitem_reads_the_value_before_writing(device):
    t = dg.ag_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    t[1:] = t[:-1] * 10                                     # (overlapping parts)
    t[:, np.array([2, 0])] = t[:, np.array([0, 2])]
    np.testing.assert_array_equal(t.numpy(), [[2, 1, 0], [20, 10, 0]])


@pytest.mark.parametrize("key, value, error, pattern", [
    ((5,), 1.0, dg.IndexOutOfRange, r"^setitem: index 5 is out of range for axis 0"),
    ((np.array([0, 7]),), 1.0, dg.IndexOutOfRange, r"^setitem: index 7 is out of range"),
    ((0,), np.ones(4, np.float32), dg.ShapeError,
     r"^setitem: argument 'value' has shape \(4,\); expected a shape that broadcasts to "
     r"the selection's \(3,\)"),
    ((np.array([True, False, True]),), 1.0, dg.IndexShapeError, r"^setitem: argument 'mask'"),
    (("a",), 1.0, dg.ArgumentTypeError, r"^setitem: argument 'key' has type str"),
    ((0,), "x", dg.ArgumentTypeError, r"^setitem: argument 'value' has type str"),
])
def test_a_failing_setitem_changes_nothing(device, key, value, error, pattern):
    t = dg.ag_tensor(A)
    with pytest.raises(error, match=pattern):
        t[key] = value
    np.testing.assert_array_equal(t.numpy(), A)


def test_setitem_inside_a_tape_is_refused(device):
    w = dg.ag_param(A)
    with dg.with_grad_tape():
        with pytest.raises(dg.CallOrderError, match=r"^setitem: in-place ops run outside"):
            w[0] = 1.0
    np.testing.assert_array_equal(w.numpy(), A)


def test_a_parameter_written_by_setitem_stays_resident_and_trains(device):
    w = dg.ag_param(np.ones(4, np.float32))
    opt = dg.optim.SGD([w], lr=0.5)
    w[1:3] = 0.0                                            # (a mask of frozen weights, say)
    w[np.array([3])] = 2.0
    with dg.with_grad_tape():
        dg.sum(w * 2.0).backward()
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [0, -1, -1, 1])


def test_setitem_replays_in_a_captured_step(device):
    w = dg.ag_param(np.ones(4, np.float32))
    opt = dg.optim.SGD([w], lr=0.25)

    def step(x):
        with dg.with_grad_tape():
            dg.sum(dg.ag_tensor(x) * w).backward()
        opt.step()
        opt.zero_grad()
        w[0] = 1.0                                          # (a weight held fixed)
    captured = dg.capture_step(step)
    for _ in range(4):
        captured(np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(w.numpy(), [1.0, -1.0, -1.0, -1.0])
    if device == "gpu":
        assert captured.replayable and captured.replays >= 2, captured.reason
