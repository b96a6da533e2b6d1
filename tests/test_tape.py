"""The gradient tape: recording, nesting, no_grad, accumulation, backward's forms, and the
residency helpers and device counters as they behave on the cpu backend.

Expected gradients are worked out by hand from the formulas (d/dx of x*x is 2x, ...), not
taken from the library.
"""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import dualgrad as dg
from dualgrad import residency
from dualgrad.backend import Epilogue

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], dtype=np.float32)


def _grad(t) -> np.ndarray:
    assert t.grad is not None, "no gradient reached the tensor"
    return t.grad.numpy()


# ---------------------------------------------------------------------------------------------
# Tapes

def test_tapes_do_not_nest_and_the_outer_tape_keeps_working(device):
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        before = dg.sum(x * x)
        with pytest.raises(dg.InvalidValueError, match="with_grad_tape: .*do not nest"):
            with dg.with_grad_tape():
                pass
        after = dg.sum(x * 3.0)         # still recorded by the outer tape
        assert after.requires_grad
        (before + after).backward()
    np.testing.assert_allclose(_grad(x), 2 * X + 3, rtol=1e-6)
    with dg.with_grad_tape():           # the failed inner tape left nothing open
        assert dg.sum(x).requires_grad


def test_a_tape_closes_when_its_block_raises(device):
    x = dg.ag_param(X)
    with pytest.raises(RuntimeError, match="boom"):
        with dg.with_grad_tape():
            dg.sum(x)
            raise RuntimeError("boom")
    assert not dg.sum(x).requires_grad   # no longer recording
    with dg.with_grad_tape():            # and a new tape can open
        loss = dg.sum(x * 2.0)
    loss.backward()
    np.testing.assert_array_equal(_grad(x), np.full_like(X, 2.0))


def test_backward_inside_and_after_the_tape_agree(device):
    w_in, w_out = dg.ag_param(X), dg.ag_param(X)
    with dg.with_grad_tape():
        dg.sum(dg.tanh(w_in) * w_in).backward()
    with dg.with_grad_tape():
        loss = dg.sum(dg.tanh(w_out) * w_out)
    loss.backward()                      # after the block: the graph is still usable
    t = np.tanh(X.astype(np.float64))
    expected = t + X * (1 - t * t)       # d/dx x*tanh(x)
    np.testing.assert_allclose(_grad(w_in), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_grad(w_in), _grad(w_out))


def test_ops_outside_a_tape_record_nothing(device):
    x = dg.ag_param(X)
    y = dg.sum(x * 2.0)
    assert not y.requires_grad
    with pytest.raises(dg.InvalidValueError, match="no recorded history"):
        y.backward()
    assert x.grad is None


# ---------------------------------------------------------------------------------------------
# Accumulation

def test_gradients_accumulate_across_backward_calls_through_a_kept_graph(device):
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        c = dg.ag_tensor(np.array([1.0, -2.0, 0.5]))
        loss = dg.sum(x * x * c)
    loss.backward(retain_graph=True)
    first = _grad(x)
    np.testing.assert_allclose(first, 2 * X * [1.0, -2.0, 0.5], rtol=1e-6)
    loss.backward()                      # the same graph again: added, not replaced
    np.testing.assert_allclose(_grad(x), 2 * first, rtol=1e-6)
    # ... and freed by that one, as PyTorch does: a third raises and changes nothing
    with pytest.raises(dg.GraphFreedError, match="retain_graph=True"):
        loss.backward()
    assert isinstance(dg.GraphFreedError("x"), RuntimeError)
    np.testing.assert_allclose(_grad(x), 2 * first, rtol=1e-6)


def test_a_second_backward_through_a_freed_part_of_a_graph_raises(device):
    # Two losses sharing a trunk: the first backward frees the trunk, so the second
    # raises before it adds anything (PyTorch: "Trying to backward through the graph a
    # second time"), on both backends.
    w = dg.ag_param(X)
    with dg.with_grad_tape():
        trunk = dg.tanh(w)
        first, second = dg.sum(trunk * 2.0), dg.sum(trunk * 3.0)
    first.backward()
    before = _grad(w)
    with pytest.raises(dg.GraphFreedError):
        second.backward()
    np.testing.assert_array_equal(_grad(w), before)


def test_gradients_accumulate_across_tapes_until_zero_grad(device):
    model = dg.nn.Linear(3, 2)
    opt = dg.optimizer_sgd(model.parameters(), lr=0.1)

    def run():
        with dg.with_grad_tape():
            dg.sum(model(dg.ag_tensor(X))).backward()

    run()
    # d sum(x @ W.T + b) / dW[o, i] = sum over rows of x[:, i]; / db[o] = rows
    expected_w = np.tile(X.sum(axis=0), (2, 1))
    np.testing.assert_allclose(_grad(model.weight), expected_w, rtol=1e-6)
    np.testing.assert_array_equal(_grad(model.bias), [2.0, 2.0])
    run()                                # a new tape does not clear parameter gradients
    np.testing.assert_allclose(_grad(model.weight), 2 * expected_w, rtol=1e-6)
    np.testing.assert_array_equal(_grad(model.bias), [4.0, 4.0])
    opt.zero_grad()
    assert model.weight.grad is None and model.bias.grad is None
    run()
    np.testing.assert_array_equal(_grad(model.bias), [2.0, 2.0])
    opt.zero_grad(set_to_none=False)     # zeros in place, then accumulation starts from 0
    np.testing.assert_array_equal(_grad(model.bias), [0.0, 0.0])
    run()
    np.testing.assert_array_equal(_grad(model.bias), [2.0, 2.0])


def test_a_tensor_used_twice_gets_the_summed_gradient(device):
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        loss = dg.sum(x * x) + dg.sum(x + x)
    loss.backward()
    np.testing.assert_allclose(_grad(x), 2 * X + 2, rtol=1e-6)

    y = dg.ag_param(X)
    with dg.with_grad_tape():
        h = y * 3.0                      # an intermediate used by two ops
        loss = dg.sum(h * h) + dg.sum(dg.exp(h * 0.0) * h)
    loss.backward()
    np.testing.assert_allclose(_grad(y), 18 * X + 3, rtol=1e-5)


@pytest.mark.parametrize("name", ["residual", "residual_reversed", "difference", "diamond",
                                  "two_paths_of_different_depth"])
def test_a_shared_intermediate_gets_every_consumers_gradient(device, name):
    # b = 2a feeds two consumers of different depth: its gradient is complete only once
    # both have run, so the walk must reach b after both (x + f(x) in a residual block)
    def f(a):
        b = dg.mul(a, 2.0)
        if name == "residual":
            return dg.add(b, dg.exp(b))
        if name == "residual_reversed":
            return dg.add(dg.exp(b), b)
        if name == "difference":
            return dg.sub(b, dg.tanh(b))
        if name == "diamond":
            return dg.mul(dg.sin(b), dg.cos(b))
        return dg.add(dg.mul(b, b), dg.exp(dg.tanh(dg.sigmoid(b))))
    x = np.array([0.3, -0.7, 1.1], np.float64 if device == "cpu" else np.float32)
    if device == "cpu":              # against finite differences, in float64
        dg.gradcheck(lambda t: dg.sum(f(t)), [x])
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        dg.sum(f(t)).backward()
    b = 2.0 * x.astype(np.float64)
    expected = {"residual": 2 + 2 * np.exp(b), "residual_reversed": 2 + 2 * np.exp(b),
                "difference": 2 - 2 / np.cosh(b) ** 2, "diamond": 2 * np.cos(2 * b),
                "two_paths_of_different_depth":
                    4 * b + 2 * np.exp(np.tanh(1 / (1 + np.exp(-b))))
                    / np.cosh(1 / (1 + np.exp(-b))) ** 2 * np.exp(-b) / (1 + np.exp(-b)) ** 2}
    np.testing.assert_allclose(t.grad.numpy(), expected[name], rtol=2e-6)


def test_a_leafs_first_gradient_is_written_where_it_is_kept(device, monkeypatch):
    # linear's weight and bias gradients and matmul's operand gradients are made in the
    # leaves' own storage: no copy into .grad; a rule without an output (mul) is copied;
    # a second backward adds into the gradient already there.
    backend = dg.api.device.active()
    copies = []
    real_copy = backend.copy
    monkeypatch.setattr(backend, "copy", lambda dst, src: (copies.append(dst.shape),
                                                           real_copy(dst, src)))
    rng = np.random.default_rng(3)
    w = dg.ag_param(rng.standard_normal((4, 3)).astype(np.float32))
    b = dg.ag_param(rng.standard_normal(4).astype(np.float32))
    m = dg.ag_param(rng.standard_normal((4, 2)).astype(np.float32))
    s = dg.ag_param(np.float32(2.0))
    x = X.astype(np.float32)

    def loss():
        with dg.with_grad_tape():
            y = dg.matmul(dg.linear(x, w, b), m)           # (2, 4) @ (4, 2)
            out = dg.sum(y * s)
        out.backward()
    loss()
    assert copies == [()]                                  # s's, from mul's rule
    h = x @ w.numpy().T + b.numpy()
    gy = np.full((2, 2), 2.0, np.float32)
    g_h = gy @ m.numpy().T
    np.testing.assert_allclose(_grad(m), h.T @ gy, rtol=1e-5)
    np.testing.assert_allclose(_grad(w), g_h.T @ x, rtol=1e-5)
    np.testing.assert_allclose(_grad(b), g_h.sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(_grad(s), (h @ m.numpy()).sum(), rtol=1e-5)
    loss()
    assert copies == [()]
    np.testing.assert_allclose(_grad(w), 2 * g_h.T @ x, rtol=1e-5)
    np.testing.assert_allclose(_grad(b), 2 * g_h.sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("op", ["matmul", "batched matmul", "reduce", "relu backward",
                                "relu backward in place"])
def test_a_kernel_given_an_output_writes_it_and_returns_it(device, op):
    # The backend contract's out= (what a backward rule uses to write into .grad): the
    # same values as without it, in the storage given, on either backend.
    backend = dg.api.device.active()
    rng = np.random.default_rng(4)
    a = backend.upload(rng.standard_normal((5, 3)).astype(np.float32))
    c = backend.upload(rng.standard_normal((5, 4)).astype(np.float32))
    if op == "matmul":
        def run(**out):
            return backend.matmul(a, c, True, False, **out)
    elif op == "batched matmul":
        batch = backend.upload(rng.standard_normal((2, 4, 5)).astype(np.float32))
        bias = backend.upload(rng.standard_normal(3).astype(np.float32))

        def run(**out):
            return backend.matmul(batch, a, False, False, epilogue=Epilogue(bias=bias), **out)
    elif op == "reduce":
        def run(**out):
            return backend.reduce("sum", a, (0,), **out)
    else:
        def run(**out):
            return backend.unary_backward("relu", c, c, grad, **out)
    grad = backend.upload(rng.standard_normal((5, 4)).astype(np.float32))
    plain = run()
    out = grad if op.endswith("in place") else backend.empty(plain.shape, np.float32)
    assert run(out=out) is out
    np.testing.assert_array_equal(backend.download(out), backend.download(plain))


def test_only_inputs_that_require_grad_get_one(device):
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        c = dg.ag_tensor(X * 2)
        leaf = dg.ag_tensor(np.ones(3), requires_grad=True)     # a leaf, not a Parameter
        loss = dg.sum(x * c + leaf * c)
        assert not (c * c).requires_grad          # constants alone record nothing
    loss.backward()
    assert c.grad is None
    np.testing.assert_allclose(_grad(x), X * 2, rtol=1e-6)
    np.testing.assert_allclose(_grad(leaf), (X * 2).sum(axis=0), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# backward's forms

def test_backward_on_a_leaf(device):
    scalar = dg.ag_param(np.array([2.5]))
    scalar.backward()
    np.testing.assert_array_equal(_grad(scalar), [1.0])
    scalar.backward()
    np.testing.assert_array_equal(_grad(scalar), [2.0])
    matrix = dg.ag_param(X)
    seed = np.arange(6, dtype=np.float32).reshape(2, 3)
    dg.backward(matrix, seed)
    np.testing.assert_array_equal(_grad(matrix), seed)


def test_backward_with_an_explicit_grad_for_a_non_scalar_output(device):
    x, w = dg.ag_param(X), dg.ag_param(X[::-1] + 1)
    g = np.array([[1.0, 0.0, -2.0], [0.5, 3.0, 1.0]], dtype=np.float32)
    with dg.with_grad_tape():
        y = x * w
    y.backward(g)
    np.testing.assert_allclose(_grad(x), g * (X[::-1] + 1), rtol=1e-6)
    np.testing.assert_allclose(_grad(w), g * X, rtol=1e-6)
    with dg.with_grad_tape():
        z = dg.matmul(x, dg.transpose(w))                 # (2, 2)
    x.grad = None
    dg.backward(z, dg.ag_tensor(np.eye(2)))               # a Tensor grad works too
    np.testing.assert_allclose(_grad(x), X[::-1] + 1, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# no_grad

def test_no_grad_outside_a_tape_records_nothing(device):
    x = dg.ag_param(X)
    with dg.no_grad():
        y = dg.sum(x * x)
    assert not y.requires_grad
    with pytest.raises(dg.InvalidValueError):
        y.backward()
    assert x.grad is None


def test_no_grad_inside_a_tape_only_pauses_recording(device):
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        a = x * 2.0
        with dg.no_grad():
            b = x * 3.0
        c = x * 4.0
        assert a.requires_grad and not b.requires_grad and c.requires_grad
        loss = dg.sum(a * b) + dg.sum(c)
    loss.backward()
    # b is a constant 3x: d/dx sum(2x * b) = 2b = 6x; if b were recorded it would be 12x
    np.testing.assert_allclose(_grad(x), 6 * X + 4, rtol=1e-6)


def test_no_grad_restores_recording_when_its_block_raises(device):
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        with pytest.raises(KeyError):
            with dg.no_grad():
                raise KeyError("inside no_grad")
        assert dg.sum(x).requires_grad


# ---------------------------------------------------------------------------------------------
# Deep graphs

def test_the_graph_holds_no_computed_tensor_and_backward_frees_as_it_goes(device):
    """A node links to its inputs' nodes, not to their tensors: an intermediate that no rule
    saved goes when the program drops it, as in PyTorch; each rule (and what it saved) goes
    once it has run."""
    x = dg.ag_param(X)
    with dg.with_grad_tape():
        h = x * 2.0                        # (a product by a number saves nothing)
        gone = weakref.ref(h)
        e = dg.exp(h)                      # exp's rule keeps its result, not h
        kept = weakref.ref(e)
        y = dg.sum(e)
        del h, e
        gc.collect()
        assert gone() is None
        assert kept() is None              # (its storage stays with the rule, not the tensor)
        exp_node = y._node.inputs[0]
        assert exp_node.backward is not None
        y.backward()
        assert y._node.backward is None and exp_node.backward is None
    np.testing.assert_allclose(_grad(x), 2 * np.exp(2 * X), rtol=1e-6)


def test_a_long_chain_backpropagates_without_recursion(device):
    n = max(3000, 2 * sys.getrecursionlimit())   # deeper than any recursive walk could go
    x = dg.ag_param(np.array([1.0, -2.0]))
    with dg.with_grad_tape():
        h = x
        for _ in range(n):
            h = h + x                    # h = (n + 1) x, built as a chain n deep
        loss = dg.sum(h)
    loss.backward()
    np.testing.assert_array_equal(_grad(x), [n + 1.0, n + 1.0])   # exact in float32
    del h, loss                          # freeing the chain must not recurse either


# ---------------------------------------------------------------------------------------------
# Residency helpers and counters on cpu

def test_a_cpu_parameter_is_untouched():
    values = np.array([[1.0, -0.5], [0.25, 4.0]], dtype=np.float32)
    w = dg.ag_param(values)
    with dg.with_grad_tape():            # a tape and a backward do not move it anywhere
        dg.sum(w * w).backward()
    assert residency.ptr_is_live(w) is False
    assert residency.tensor_scope(w) == "pass"
    assert w.ptr is None
    np.testing.assert_array_equal(dg.ag_data(w), values)
    assert dg.ag_data(w).dtype == np.float32


def test_device_counters_are_zero_on_cpu():
    model = dg.nn.Linear(3, 2)
    opt = dg.optimizer_adam(model.parameters())
    with dg.with_grad_tape():            # some real work first: cpu has nothing to count
        dg.sum(model(dg.ag_tensor(X))).backward()
    opt.step()
    mem, transfers = dg.tape_mem(), dg.transfer_stats()
    for key in ("buffer_bytes", "n_buffers", "p_buffer_bytes", "p_n_buffers"):
        assert mem[key] == 0, key
    for key in ("h2d_bytes", "h2d_calls", "d2h_bytes", "d2h_calls", "submits"):
        assert transfers[key] == 0, key
    dg.reset_transfer_stats()
    assert all(v == 0 for v in dg.transfer_stats().values())


@pytest.mark.parametrize("writer", [residency.store_weight, residency.set_host_data,
                                    residency.write_resident],
                         ids=lambda f: f.__name__)
def test_residency_writers_set_the_value_on_cpu(writer):
    w = dg.ag_param(np.zeros((2, 3)))
    new = np.arange(6, dtype=np.float64).reshape(2, 3) / 3.0
    writer(w, new)
    assert w.shape == (2, 3) and w.dtype == np.float32           # dtype kept, input converted
    np.testing.assert_array_equal(w.numpy(), new.astype(np.float32))
    assert w.ptr is None and not residency.ptr_is_live(w)
    new[...] = -1.0                      # the tensor holds its own copy
    assert w.numpy()[0, 1] == np.float32(1.0 / 3.0)
    with dg.with_grad_tape():            # and the new value is what ops and autograd see
        dg.sum(w * w).backward()
    np.testing.assert_allclose(_grad(w), 2 * w.numpy(), rtol=1e-6)
