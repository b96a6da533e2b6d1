"""The error contract: bad input raises a typed, well-worded error before any state changes.

Every case of the catalogue runs against a small world (an MLP with an Adam optimizer that has
taken one step, so parameters, gradients and optimizer state all exist) and checks that the
error is a ``dg.DualgradError`` and the fitting built-in, that its message names the function
and the argument, and that nothing in the world changed. The tests at the end cover input the
library accepts: dtype conversion, non-contiguous layouts and empty tensors.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

import numpy as np
import pytest

import dualgrad as dg
from dualgrad.api import random as dg_random

# The built-in each error class must also be, so ``except ValueError`` / ``except TypeError``
# callers catch it.
BUILTIN = {dg.ShapeError: ValueError, dg.InvalidValueError: ValueError,
           dg.CheckpointError: ValueError, dg.ArgumentTypeError: TypeError,
           dg.DeadTensorError: RuntimeError, dg.CheckpointNotFoundError: FileNotFoundError}


# ---------------------------------------------------------------------------------------------
# The world each case runs against

class World:
    """Sequential(Linear(4, 8), ReLU(), Linear(8, 3)) and an Adam optimizer after one step.
    The gradients of that step are kept, so the snapshot covers them as well."""

    def __init__(self, tmp_path):
        self.model = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.ReLU(), dg.nn.Linear(8, 3))
        self.opt = dg.optimizer_adam(self.model.parameters(), lr=1e-2)
        rng = np.random.default_rng(7)
        self.x = rng.standard_normal((5, 4)).astype(np.float32)
        self.y = np.array([0, 1, 2, 1, 0])
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(self.model(dg.ag_tensor(self.x)), self.y)
            loss.backward()
        self.opt.step()
        # The rate a schedule records when one is made (a case's arguments may make one
        # before the call under test fails): recorded here, so the snapshot sees no change.
        self.opt.param_groups[0]["initial_lr"] = self.opt.lr
        self.tmp = tmp_path

    def params(self) -> list:
        return self.model.parameters()


@pytest.fixture
def world(device, tmp_path):
    return World(tmp_path)


def _snapshot(w: World) -> dict:
    params = w.params()
    return {
        "param_ids": [id(p) for p in params],
        "params": [p.numpy() for p in params],
        "grads": [None if p.grad is None else p.grad.numpy() for p in params],
        "optim_ids": [id(p) for p in w.opt.params],
        "optim": w.opt.state_dict(),
        "generator": dg_random.get_state(),   # a failed constructor must not draw from it
        "device": dg.ag_device(),
    }


def _assert_same(before, after, where="world") -> None:
    """Equal, with arrays compared bit for bit (so -0.0 vs 0.0 or a NaN payload counts)."""
    if isinstance(before, np.ndarray):
        assert isinstance(after, np.ndarray), f"{where}: no longer an array"
        assert (before.dtype, before.shape) == (after.dtype, after.shape), where
        assert before.tobytes() == after.tobytes(), f"{where}: values changed"
    elif isinstance(before, dict):
        assert isinstance(after, dict) and set(before) == set(after), f"{where}: keys changed"
        for k in before:
            _assert_same(before[k], after[k], f"{where}[{k!r}]")
    elif isinstance(before, (list, tuple)):
        assert type(before) is type(after) and len(before) == len(after), where
        for i, (b, a) in enumerate(zip(before, after)):
            _assert_same(b, a, f"{where}[{i}]")
    else:
        assert before == after, f"{where}: {before!r} became {after!r}"


# ---------------------------------------------------------------------------------------------
# Helpers the cases use

def _t(*shape, dtype=None) -> dg.Tensor:
    """A constant tensor with distinct values."""
    n = int(np.prod(shape, dtype=np.int64))
    return dg.ag_tensor((np.arange(n) * 0.25 - 1.0).reshape(shape), dtype=dtype)


class _Fixed(dg.nn.Module):
    """A module holding given parameter values: builds a foreign model without drawing
    from dualgrad's generator (which the snapshot watches)."""

    def __init__(self, **arrays):
        super().__init__()
        for name, value in arrays.items():
            setattr(self, name, dg.ag_param(value))


def _recorded_output(w: World) -> dg.Tensor:
    with dg.with_grad_tape():
        return w.model(dg.ag_tensor(w.x))


def _read_dead_tensor(w: World):
    out = _recorded_output(w)
    with dg.with_grad_tape():      # frees the pass pool the output lived in
        pass
    out.numpy()


def _backward_outside_tape(w: World):
    out = dg.sum(w.model(dg.ag_tensor(w.x)))
    out.backward()


def _model_state_missing(w: World):
    state = w.model.state_dict()
    state["0.weight"] = state["0.weight"] + 1.0   # a partial load would show in the snapshot
    del state["2.bias"]
    w.model.load_state_dict(state)


def _model_state_unexpected(w: World):
    state = w.model.state_dict()
    state["0.weight"] = state["0.weight"] + 1.0
    state["3.weight"] = np.zeros((3, 3), np.float32)
    w.model.load_state_dict(state)


def _model_state_wrong_shape(w: World):
    state = w.model.state_dict()
    state["0.weight"] = state["0.weight"] + 1.0
    state["2.bias"] = np.zeros(4, np.float32)     # the last entry: the others come first
    w.model.load_state_dict(state)


def _optim_state_wrong_shape(w: World):
    state = w.opt.state_dict()
    state["state"][0]["exp_avg"] = state["state"][0]["exp_avg"] + 1.0
    state["state"][3]["exp_avg_sq"] = np.zeros((2, 2), np.float32)
    w.opt.load_state_dict(state)


def _optim_state_wrong_count(w: World):
    state = w.opt.state_dict()
    state["param_names"] = state["param_names"][:3]
    del state["state"][3]
    w.opt.load_state_dict(state)


def _optim_state_bad_key(w: World):
    state = w.opt.state_dict()
    state["state"] = {"first": state["state"][0]}
    w.opt.load_state_dict(state)


def _optim_state_bad_hyper(w: World):
    state = w.opt.state_dict()
    state["state"][0]["exp_avg"] = state["state"][0]["exp_avg"] + 1.0
    state["param_groups"][0]["lr"] = -1.0
    w.opt.load_state_dict(state)


def _step_with_negative_lr(w: World):
    lr = w.opt.lr
    w.opt.lr = -1.0
    try:
        w.opt.step()
    finally:
        w.opt.lr = lr    # put back what the case itself changed; the snapshot checks the rest


def _set_wrong_grad(w: World):
    w.model[0].weight.grad = np.zeros((2, 2), np.float32)


def _load_missing_checkpoint(w: World):
    dg.load_checkpoint(w.tmp / "missing.ckpt", w.model, w.opt)


def _load_garbage_checkpoint(w: World):
    path = w.tmp / "garbage.ckpt"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    dg.load_checkpoint(path, w.model)


def _load_foreign_checkpoint(w: World):
    path = w.tmp / "foreign.ckpt"
    dg.save_checkpoint(path, _Fixed(weight=np.zeros((2, 2))))
    dg.load_checkpoint(path, w.model)


def _load_wrong_shape_checkpoint(w: World):
    path = w.tmp / "wide.ckpt"
    other = dg.nn.Sequential(_Fixed(weight=np.zeros((8, 4)), bias=np.zeros(8)), dg.nn.ReLU(),
                             _Fixed(weight=np.zeros((5, 8)), bias=np.zeros(5)))
    dg.save_checkpoint(path, other)
    dg.load_checkpoint(path, w.model)


def _load_checkpoint_into_other_optimizer(w: World):
    path = w.tmp / "adam.ckpt"
    dg.save_checkpoint(path, w.model, w.opt)
    dg.load_checkpoint(path, w.model, dg.optimizer_sgd(w.params(), lr=0.1))


# ---------------------------------------------------------------------------------------------
# The catalogue

class Case(NamedTuple):
    id: str
    trigger: Callable[[World], object]
    exc: type
    match: str               # regex the message must match: the function and the argument
    cpu_only: bool = False   # float64 lives on the cpu backend only
    gpu_only: bool = False   # float64 is refused on the gpu backend only


Shape, Value, Type = dg.ShapeError, dg.InvalidValueError, dg.ArgumentTypeError
NAN, INF = float("nan"), float("inf")

CASES = [
    # matmul
    Case("matmul-inner-mismatch", lambda w: dg.matmul(_t(2, 3), _t(4, 5)), Shape,
         r"^matmul: inner dimensions differ"),
    Case("matmul-0d-b", lambda w: dg.matmul(_t(3), dg.ag_tensor(1.0)), Shape,
         r"^matmul: argument 'b'"),
    Case("matmul-4d-batch-mismatch", lambda w: dg.matmul(_t(2, 2, 3, 4), _t(3, 2, 4, 5)),
         Shape, r"^matmul: batch sizes differ"),
    Case("matmul-vector-lengths", lambda w: dg.matmul(_t(3), _t(4)), Shape,
         r"^matmul: inner dimensions differ"),
    Case("matmul-0d-operand", lambda w: dg.matmul(dg.ag_tensor(1.0), _t(2, 2)), Shape,
         r"^matmul: argument 'a'"),
    Case("matmul-batch-mismatch", lambda w: dg.matmul(_t(2, 3, 4), _t(3, 4, 5)), Shape,
         r"^matmul: batch sizes differ"),
    Case("matmul-mixed-dtypes", lambda w: dg.matmul(_t(2, 3), _t(3, 2, dtype="float64")),
         Type, r"^matmul: operands have dtypes", cpu_only=True),
    Case("operator-matmul-mismatch", lambda w: _t(2, 3) @ _t(2, 3), Shape,
         r"^matmul: inner dimensions"),
    # elementwise binary ops
    Case("add-not-broadcastable", lambda w: dg.add(_t(2, 3), _t(4, 3)), Shape,
         r"^add: shapes \(2, 3\) and \(4, 3\) cannot be broadcast"),
    Case("sub-operator-not-broadcastable", lambda w: _t(2, 3) - _t(2, 2), Shape,
         r"^sub: shapes"),
    Case("maximum-not-broadcastable", lambda w: dg.maximum(_t(3), _t(4)), Shape,
         r"^maximum: shapes"),
    Case("add-broadcast-past-6d", lambda w: dg.add(_t(2, 1, 1, 3),
                                                  np.ones((2, 1, 1, 1, 1, 1, 3))),
         Shape, r"^add: .*'b'"),
    Case("add-mixed-dtypes", lambda w: dg.add(_t(2, 3), _t(2, 3, dtype="float64")), Type,
         r"^add: operands have dtypes", cpu_only=True),
    Case("mul-bool-operand", lambda w: dg.mul(_t(2), True), Type, r"^mul: argument 'b'"),
    Case("add-complex-operand", lambda w: dg.add(_t(2), np.array([1j, 2j])), Type,
         r"^add: argument 'b' has dtype complex128"),
    Case("mul-string-operand", lambda w: dg.mul(_t(2), "2"), Type, r"^mul: argument 'b'"),
    Case("layer_norm-complex-input",
         lambda w: dg.layer_norm(np.ones((2, 4)) * 1j, _t(4), _t(4)), Type,
         r"^layer_norm: argument 'x'"),
    Case("mse-string-target", lambda w: dg.mse_loss(_t(2), np.array(["a", "b"])), Type,
         r"^mse_loss: argument 'target'"),
    # ag_tensor
    Case("ag_tensor-7d", lambda w: dg.ag_tensor(np.zeros((1, 1, 1, 1, 1, 1, 2))), Shape,
         r"^ag_tensor: argument 'array'"),
    Case("ag_tensor-object-array",
         lambda w: dg.ag_tensor(np.array([1.0, "a"], dtype=object)), Type,
         r"^ag_tensor: argument 'array'"),
    Case("ag_tensor-complex-array", lambda w: dg.ag_tensor(np.array([1 + 2j])), Type,
         r"^ag_tensor: argument 'array'"),
    Case("ag_tensor-string-array", lambda w: dg.ag_tensor(np.array(["1", "2"])), Type,
         r"^ag_tensor: argument 'array'"),
    Case("ag_tensor-string", lambda w: dg.ag_tensor("1.0"), Type,
         r"^ag_tensor: argument 'array'"),
    Case("ag_tensor-none", lambda w: dg.ag_tensor(None), Type,
         r"^ag_tensor: argument 'array'"),
    Case("ag_tensor-ragged-list", lambda w: dg.ag_tensor([[1.0, 2.0], [3.0]]), Type,
         r"^ag_tensor: argument 'array'"),
    Case("ag_param-complex-array", lambda w: dg.ag_param(np.array([1j])), Type,
         r"^ag_param: argument 'array'"),
    Case("ag_tensor-float64-on-gpu", lambda w: dg.ag_tensor([1.0], dtype="float64"), Type,
         r"^ag_tensor: dtype float64 is not supported by the gpu backend", gpu_only=True),
    Case("ag_tensor-int64-past-int32", lambda w: dg.ag_tensor([2.0 ** 40], dtype="int64"),
         Value, r"^ag_tensor: argument 'array'.*int32"),
    Case("ag_tensor-dtype-complex64", lambda w: dg.ag_tensor([1.0], dtype="complex64"),
         Type, r"^ag_tensor: argument 'dtype'"),
    Case("ag_tensor-requires_grad-int32",
         lambda w: dg.ag_tensor([1], requires_grad=True, dtype="int32"), Value,
         r"^ag_tensor: argument 'requires_grad'"),
    Case("ag_tensor-dtype-unknown", lambda w: dg.ag_tensor([1.0], dtype="bogus"), Type,
         r"^ag_tensor: argument 'dtype'"),
    Case("ag_tensor-requires_grad-int", lambda w: dg.ag_tensor([1.0], requires_grad=1), Type,
         r"^ag_tensor: argument 'requires_grad'"),
    Case("ag_tensor-requires_grad-str", lambda w: dg.ag_tensor([1.0], requires_grad="yes"),
         Type, r"^ag_tensor: argument 'requires_grad'"),
    # reductions
    Case("sum-axis-out-of-range", lambda w: dg.sum(_t(2, 3), axis=2), Value,
         r"^sum: argument 'axis'"),
    Case("mean-negative-axis-out-of-range", lambda w: dg.mean(_t(2, 3), axis=-3), Value,
         r"^mean: argument 'axis'"),
    Case("sum-duplicated-axis", lambda w: dg.sum(_t(2, 3), axis=(0, -2)), Value,
         r"^sum: argument 'axis'"),
    Case("max-float-axis", lambda w: dg.max(_t(2, 3), axis=1.5), Type,
         r"^max: argument 'axis'"),
    Case("sum-string-axis", lambda w: dg.sum(_t(2, 3), axis="0"), Type,
         r"^sum: argument 'axis'"),
    Case("max-zero-length-axis", lambda w: dg.max(_t(0, 3), axis=0), Shape,
         r"^max: argument 'x'"),
    Case("max-empty-tensor", lambda w: dg.max(dg.ag_tensor(np.zeros(0))), Shape,
         r"^max: argument 'x'"),
    Case("sum-keepdims-not-bool", lambda w: dg.sum(_t(2, 3), keepdims="yes"), Type,
         r"^sum: argument 'keepdims'"),
    Case("softmax-axis-out-of-range", lambda w: dg.softmax(_t(2, 3), axis=2), Value,
         r"^softmax: argument 'axis'"),
    # reshape and transpose
    Case("reshape-wrong-size", lambda w: dg.reshape(_t(2, 3), (4, 2)), Value,
         r"^reshape: argument 'shape'"),
    Case("reshape-past-6d", lambda w: dg.reshape(_t(2, 2), (1, 1, 1, 1, 1, 2, 2)), Value,
         r"^reshape: argument 'shape'"),
    Case("reshape-two-unknowns", lambda w: _t(2, 3).reshape(-1, -1), Value,
         r"^reshape: argument 'shape'"),
    Case("reshape-negative-size", lambda w: dg.reshape(_t(2, 3), (-2, -3)), Value,
         r"^reshape: argument 'shape'"),
    Case("reshape-float-size", lambda w: dg.reshape(_t(2, 3), (2.0, 3)), Type,
         r"^reshape: argument 'shape'"),
    Case("transpose-repeated-axis", lambda w: dg.transpose(_t(2, 3), (0, 0)), Value,
         r"^transpose: argument 'axes'"),
    Case("transpose-axis-out-of-range", lambda w: dg.transpose(_t(2, 3), (1, 2)), Value,
         r"^transpose: argument 'axes'"),
    Case("transpose-too-many-axes", lambda w: dg.transpose(_t(2, 3), (0, 1, 2)), Value,
         r"^transpose: argument 'axes'"),
    # softmax_cross_entropy, mse_loss
    Case("sce-1d-logits-batch-targets", lambda w: dg.softmax_cross_entropy(_t(3),
                                                                            np.array([0])),
         Shape, r"^softmax_cross_entropy: argument 'targets' has shape \(1,\); expected \(\)"),
    Case("sce-0d-logits", lambda w: dg.softmax_cross_entropy(_t(), np.array(0)), Shape,
         r"^softmax_cross_entropy: argument 'logits'"),
    Case("sce-zero-rows",
         lambda w: dg.softmax_cross_entropy(_t(0, 3), np.zeros(0, np.int64)), Shape,
         r"^softmax_cross_entropy: argument 'logits'"),
    # (float targets are class probabilities, so they need the logits' shape)
    Case("sce-float-targets",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([0.0, 1.0])), Shape,
         r"^softmax_cross_entropy: argument 'targets' has shape \(2,\); expected logits' "
         r"shape \(2, 3\) \(class probabilities\), or \(2,\) integer class indices"),
    Case("sce-3d-logits-row-targets",
         lambda w: dg.softmax_cross_entropy(_t(2, 3, 4), np.array([0, 1])), Shape,
         r"^softmax_cross_entropy: argument 'targets' has shape \(2,\); expected \(2, 4\)"),
    Case("sce-fractional-targets",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([0.5, 1.0])), Shape,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-object-targets",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([0, None], dtype=object)), Type,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-bool-targets",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([True, False])), Type,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-targets-wrong-length",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([0, 1, 2])), Shape,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-negative-target",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([0, -1])), Value,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-target-equal-to-classes",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), np.array([3, 0])), Value,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-targets-as-tensor",
         lambda w: dg.softmax_cross_entropy(_t(2, 3), dg.ag_tensor([0, 1])), Shape,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("sce-model-output-bad-targets",
         lambda w: dg.softmax_cross_entropy(w.model(dg.ag_tensor(w.x)), w.y[:4]), Shape,
         r"^softmax_cross_entropy: argument 'targets'"),
    Case("mse-shape-mismatch", lambda w: dg.mse_loss(_t(2, 3), _t(3, 2)), Shape,
         r"^mse_loss: argument 'target'"),
    # layer kernels
    Case("embedding-index-out-of-range", lambda w: dg.embedding(_t(5, 2), np.array([0, 5])),
         Value, r"^embedding: argument 'indices'"),
    Case("embedding-negative-index", lambda w: dg.embedding(_t(5, 2), np.array([-1])),
         Value, r"^embedding: argument 'indices'"),
    Case("embedding-float-indices", lambda w: dg.embedding(_t(5, 2), np.array([0.0, 1.0])),
         Type, r"^embedding: argument 'indices'"),
    Case("embedding-string-indices", lambda w: dg.embedding(_t(5, 2), np.array(["a"])), Type,
         r"^embedding: argument 'indices'"),
    Case("embedding-empty-table",
         lambda w: dg.embedding(dg.ag_tensor(np.zeros((0, 2))), np.array([0])), Value,
         r"^embedding: argument 'indices'"),
    Case("embedding-1d-table", lambda w: dg.embedding(_t(5), np.array([0, 1])), Shape,
         r"^embedding: argument 'table'"),
    Case("layer_norm-weight-mismatch",
         lambda w: dg.layer_norm(_t(2, 4), _t(3), _t(4)), Shape,
         r"^layer_norm: argument 'weight'"),
    Case("layer_norm-bias-mismatch",
         lambda w: dg.layer_norm(_t(2, 4), _t(4), _t(4, 1)), Shape,
         r"^layer_norm: argument 'bias'"),
    Case("layer_norm-eps-zero", lambda w: dg.layer_norm(_t(2, 4), _t(4), _t(4), eps=0.0),
         Value, r"^layer_norm: argument 'eps'"),
    Case("layer_norm-eps-negative",
         lambda w: dg.layer_norm(_t(2, 4), _t(4), _t(4), eps=-1e-5), Value,
         r"^layer_norm: argument 'eps'"),
    Case("linear-weight-mismatch", lambda w: dg.linear(_t(2, 4), _t(3, 5)), Shape,
         r"^linear: argument 'weight'"),
    Case("linear-bias-mismatch", lambda w: dg.linear(_t(2, 4), _t(3, 4), _t(4)), Shape,
         r"^linear: argument 'bias'"),
    Case("model-wrong-feature-count", lambda w: w.model(_t(5, 5)), Shape,
         r"^linear: argument '(x|weight)'"),
    Case("dropout-p-above-one", lambda w: dg.dropout(_t(4), 1.5, 0, 0), Value,
         r"^dropout: argument 'p'"),
    Case("dropout-p-negative", lambda w: dg.dropout(_t(4), -0.1, 0, 0), Value,
         r"^dropout: argument 'p'"),
    Case("dropout-p-nan", lambda w: dg.dropout(_t(4), NAN, 0, 0), Value,
         r"^dropout: argument 'p'"),
    Case("dropout-negative-seed", lambda w: dg.dropout(_t(4), 0.5, -1, 0), Value,
         r"^dropout: argument 'seed'"),
    Case("dropout-p-string", lambda w: dg.dropout(_t(4), "0.5", 0, 0), Type,
         r"^dropout: argument 'p'"),
    Case("clamp-no-bound", lambda w: dg.clamp(_t(4)), Value, r"^clamp: .*'min'.*'max'"),
    Case("clamp-string-bound", lambda w: dg.clamp(_t(4), max="1"), Type,
         r"^clamp: argument 'max'"),
    Case("leaky-relu-string-slope", lambda w: dg.leaky_relu(_t(4), "0.1"), Type,
         r"^leaky_relu: argument 'negative_slope'"),
    Case("elu-nan-alpha", lambda w: dg.elu(_t(4), NAN), Value, r"^elu: argument 'alpha'"),
    Case("celu-zero-alpha", lambda w: dg.celu(_t(4), 0.0), Value, r"^celu: argument 'alpha'"),
    Case("gelu-unknown-approximate", lambda w: dg.gelu(_t(4), approximate="fast"), Value,
         r"^gelu: argument 'approximate'"),
    # optimizers
    Case("adam-negative-lr", lambda w: dg.optimizer_adam(w.params(), lr=-1e-3), Value,
         r"^Adam: argument 'lr'"),
    Case("sgd-nan-lr", lambda w: dg.optimizer_sgd(w.params(), lr=NAN), Value,
         r"^SGD: argument 'lr'"),
    Case("adamw-inf-lr", lambda w: dg.optimizer_adamw(w.params(), lr=INF), Value,
         r"^AdamW: argument 'lr'"),
    Case("sgd-string-lr", lambda w: dg.optimizer_sgd(w.params(), lr="0.1"), Type,
         r"^SGD: argument 'lr'"),
    Case("adam-beta2-one", lambda w: dg.optimizer_adam(w.params(), betas=(0.9, 1.0)), Value,
         r"^Adam: argument 'betas\[1\]'"),
    Case("adam-beta1-negative",
         lambda w: dg.optimizer_adam(w.params(), betas=(-0.1, 0.999)), Value,
         r"^Adam: argument 'betas\[0\]'"),
    Case("adam-betas-wrong-length",
         lambda w: dg.optimizer_adam(w.params(), betas=(0.9, 0.99, 0.999)), Value,
         r"^Adam: argument 'betas'"),
    Case("adam-nan-beta1",
         lambda w: dg.optimizer_adam(w.params(), betas=(NAN, 0.999)), Value,
         r"^Adam: argument 'betas\[0\]'"),
    Case("adam-inf-eps", lambda w: dg.optimizer_adam(w.params(), eps=INF), Value,
         r"^Adam: argument 'eps'"),
    Case("adam-bool-lr", lambda w: dg.optimizer_adam(w.params(), lr=True), Type,
         r"^Adam: argument 'lr'"),
    Case("sgd-negative-weight-decay",
         lambda w: dg.optimizer_sgd(w.params(), lr=0.1, weight_decay=-1.0), Value,
         r"^SGD: argument 'weight_decay'"),
    Case("sgd-empty-param-dict", lambda w: dg.optimizer_sgd({}, lr=0.1), Value,
         r"^SGD: argument 'params'"),
    Case("adam-negative-eps", lambda w: dg.optimizer_adam(w.params(), eps=-1e-8), Value,
         r"^Adam: argument 'eps'"),
    Case("adamw-negative-weight-decay",
         lambda w: dg.optimizer_adamw(w.params(), weight_decay=-0.01), Value,
         r"^AdamW: argument 'weight_decay'"),
    Case("sgd-negative-momentum",
         lambda w: dg.optimizer_sgd(w.params(), lr=0.1, momentum=-0.9), Value,
         r"^SGD: argument 'momentum'"),
    Case("sgd-nesterov-without-momentum",
         lambda w: dg.optimizer_sgd(w.params(), lr=0.1, nesterov=True), Value,
         r"^SGD: nesterov"),
    Case("sgd-nesterov-not-bool",
         lambda w: dg.optimizer_sgd(w.params(), lr=0.1, momentum=0.9, nesterov="yes"), Type,
         r"^SGD: argument 'nesterov'"),
    Case("adam-empty-params", lambda w: dg.optimizer_adam([]), Value,
         r"^Adam: argument 'params'"),
    Case("sgd-duplicated-param",
         lambda w: dg.optimizer_sgd(w.params() + w.params()[:1], lr=0.1), Value,
         r"^SGD: argument 'params'"),
    Case("adam-plain-tensor-param", lambda w: dg.optimizer_adam(w.params() + [_t(3)]), Type,
         r"^Adam: argument 'params\[4\]'"),
    Case("sgd-single-tensor-params", lambda w: dg.optimizer_sgd(w.model[0].weight, lr=0.1),
         Type, r"^SGD: argument 'params'"),
    Case("grad-wrong-shape", _set_wrong_grad, Shape, r"^grad: argument 'grad'"),
    Case("grad-tensor-wrong-shape",
         lambda w: setattr(w.model[0].weight, "grad", dg.ag_tensor(np.ones(3))), Shape,
         r"^grad: argument 'grad'"),
    Case("step-after-negative-lr", _step_with_negative_lr, Value, r"^Adam: argument 'lr'"),
    Case("clip-zero-max-norm", lambda w: dg.clip_grad_norm(w.params(), 0.0), Value,
         r"^clip_grad_norm: argument 'max_norm'"),
    Case("clip-negative-max-norm", lambda w: dg.clip_grad_norm(w.params(), -1.0), Value,
         r"^clip_grad_norm: argument 'max_norm'"),
    Case("clip-nan-max-norm", lambda w: dg.clip_grad_norm(w.params(), NAN), Value,
         r"^clip_grad_norm: argument 'max_norm'"),
    Case("clip-value-negative", lambda w: dg.clip_grad_value(w.params(), -1.0), Value,
         r"^clip_grad_value: argument 'clip_value'"),
    Case("clip-value-not-params", lambda w: dg.clip_grad_value(3, 1.0), Type,
         r"^clip_grad_value: argument 'params'"),
    Case("clip-inf-max-norm", lambda w: dg.clip_grad_norm(w.params(), INF), Value,
         r"^clip_grad_norm: argument 'max_norm'"),
    Case("clip-string-max-norm", lambda w: dg.clip_grad_norm(w.params(), "1"), Type,
         r"^clip_grad_norm: argument 'max_norm'"),
    Case("clip-non-tensor-param",
         lambda w: dg.clip_grad_norm([w.model[0].weight, "bias"], 1.0), Type,
         r"^clip_grad_norm: argument 'params\[1\]'"),
    # backward
    Case("backward-non-scalar-without-grad", lambda w: _recorded_output(w).backward(), Shape,
         r"^backward: argument 'tensor'"),
    Case("backward-grad-wrong-shape",
         lambda w: _recorded_output(w).backward(np.ones((5, 4))), Shape,
         r"^backward: argument 'grad'"),
    Case("backward-outside-tape", _backward_outside_tape, Value,
         r"^backward: the tensor has no recorded history"),
    Case("backward-of-array", lambda w: dg.backward(np.ones(1)), Type,
         r"^backward: argument 'tensor'"),
    # state dicts
    Case("model-state-missing-entry", _model_state_missing, Value,
         r"^load_state_dict: .*missing \['2\.bias'\]"),
    Case("model-state-unexpected-entry", _model_state_unexpected, Value,
         r"^load_state_dict: .*unexpected \['3\.weight'\]"),
    Case("model-state-wrong-shape", _model_state_wrong_shape, Shape,
         r"^load_state_dict: argument '2\.bias'"),
    Case("model-state-not-a-dict", lambda w: w.model.load_state_dict([1, 2]), Type,
         r"^load_state_dict: argument 'state'"),
    Case("optim-state-wrong-shape", _optim_state_wrong_shape, Shape,
         r"^load_state_dict: argument 'state\[3\]\[exp_avg_sq\]'"),
    Case("optim-state-wrong-param-count", _optim_state_wrong_count, Value,
         r"^load_state_dict: the state is for 3 parameters"),
    Case("optim-state-non-integer-key", _optim_state_bad_key, Value,
         r"^load_state_dict: argument 'state'"),
    Case("optim-state-bad-hyperparameter", _optim_state_bad_hyper, Value,
         r"^Adam: argument 'lr'"),
    # layers
    Case("linear-zero-in-features", lambda w: dg.nn.Linear(0, 3), Value,
         r"^Linear: argument 'in_features'"),
    Case("linear-float-in-features", lambda w: dg.nn.Linear(4.5, 3), Type,
         r"^Linear: argument 'in_features'"),
    Case("linear-negative-out-features", lambda w: dg.nn.Linear(4, -1), Value,
         r"^Linear: argument 'out_features'"),
    Case("layernorm-zero-shape", lambda w: dg.nn.LayerNorm(0), Value,
         r"^LayerNorm: argument 'normalized_shape'"),
    Case("gelu-layer-unknown-approximate", lambda w: dg.nn.GELU("erf"), Value,
         r"^GELU: argument 'approximate'"),
    Case("celu-layer-zero-alpha", lambda w: dg.nn.CELU(0), Value, r"^CELU: argument 'alpha'"),
    Case("leaky-relu-layer-inf-slope", lambda w: dg.nn.LeakyReLU(INF), Value,
         r"^LeakyReLU: argument 'negative_slope'"),
    Case("dropout-layer-p-above-one", lambda w: dg.nn.Dropout(1.5), Value,
         r"^Dropout: argument 'p'"),
    Case("sequential-non-module", lambda w: dg.nn.Sequential(dg.nn.ReLU(), len), Type,
         r"^Sequential: argument 'modules\[1\]'"),
    # device and generator
    Case("device-unknown-name", lambda w: dg.ag_device("tpu"), Value,
         r"^ag_device: argument 'name' is 'tpu'"),
    Case("device-int", lambda w: dg.ag_device(3), Type, r"^ag_device: argument 'name'"),
    Case("device-bad-gpu-index", lambda w: dg.ag_device("gpu:x"), Value,
         r"^ag_device: argument 'name'"),
    Case("manual_seed-negative", lambda w: dg.manual_seed(-1), Value,
         r"^manual_seed: argument 'seed'"),
    Case("manual_seed-float", lambda w: dg.manual_seed(1.5), Type,
         r"^manual_seed: argument 'seed'"),
    # residency and reading
    Case("write_resident-shape-change",
         lambda w: dg.residency.write_resident(w.model[0].bias, np.zeros(9)), Shape,
         r"^write_resident: cannot change a tensor's shape"),
    Case("set_host_data-shape-change",
         lambda w: dg.residency.set_host_data(w.model[0].bias, np.zeros((2, 4))), Shape,
         r"^set_host_data: cannot change a tensor's shape"),
    Case("store_weight-shape-change",
         lambda w: dg.residency.store_weight(w.model[0].bias, np.zeros(9)), Shape,
         r"^store_weight: cannot change a tensor's shape"),
    Case("store_weight-non-tensor", lambda w: dg.residency.store_weight(np.zeros(8), 0.0),
         Type, r"^store_weight: argument 't'"),
    # a tensor computed in a tape dies with it on both backends, naming both tapes
    Case("read-dead-tensor", _read_dead_tensor, dg.DeadTensorError,
         r"^this tensor of shape \(5, 3\) was computed in the with_grad_tape\(\) at "
         r"test_errors\.py:\d+ and freed when the with_grad_tape\(\) at test_errors\.py:"
         r"\d+ began"),
    Case("item-multi-element", lambda w: _t(2, 3).item(), Shape, r"^item: argument 'self'"),
    # schedules
    Case("steplr-zero-step-size", lambda w: dg.optim.StepLR(w.opt, step_size=0), Value,
         r"^StepLR: argument 'step_size'"),
    Case("steplr-zero-gamma", lambda w: dg.optim.StepLR(w.opt, step_size=2, gamma=0.0),
         Value, r"^StepLR: argument 'gamma'"),
    Case("steplr-non-optimizer", lambda w: dg.optim.StepLR(w.model, step_size=2), Type,
         r"^StepLR: argument 'optimizer'"),
    Case("cosine-zero-t-max", lambda w: dg.optim.CosineAnnealingLR(w.opt, T_max=0), Value,
         r"^CosineAnnealingLR: argument 'T_max'"),
    Case("warmup-total-equal-warmup",
         lambda w: dg.optim.WarmupCosineLR(w.opt, warmup_steps=10, total_steps=10), Value,
         r"^WarmupCosineLR: argument 'total_steps'"),
    Case("warmup-total-below-warmup",
         lambda w: dg.optim.WarmupCosineLR(w.opt, warmup_steps=10, total_steps=5), Value,
         r"^WarmupCosineLR: argument 'total_steps'"),
    Case("multistep-negative-milestone",
         lambda w: dg.optim.MultiStepLR(w.opt, milestones=[2, -1]), Value,
         r"^MultiStepLR: argument 'milestones\[1\]'"),
    Case("exponential-negative-gamma", lambda w: dg.optim.ExponentialLR(w.opt, gamma=-0.5),
         Value, r"^ExponentialLR: argument 'gamma'"),
    Case("constant-factor-above-one", lambda w: dg.optim.ConstantLR(w.opt, factor=1.5), Value,
         r"^ConstantLR: argument 'factor'"),
    Case("linear-zero-start", lambda w: dg.optim.LinearLR(w.opt, start_factor=0.0), Value,
         r"^LinearLR: argument 'start_factor'"),
    Case("polynomial-zero-iters", lambda w: dg.optim.PolynomialLR(w.opt, total_iters=0),
         Value, r"^PolynomialLR: argument 'total_iters'"),
    Case("onecycle-no-length", lambda w: dg.optim.OneCycleLR(w.opt, max_lr=0.1), Value,
         r"^OneCycleLR: argument 'total_steps'"),
    Case("onecycle-bad-anneal",
         lambda w: dg.optim.OneCycleLR(w.opt, 0.1, 10, anneal_strategy="cosine"), Value,
         r"^OneCycleLR: argument 'anneal_strategy'"),
    Case("onecycle-empty-phase",
         lambda w: dg.optim.OneCycleLR(w.opt, 0.1, total_steps=10, pct_start=0.1), Value,
         r"^OneCycleLR: argument 'pct_start'"),
    Case("cyclic-bad-mode", lambda w: dg.optim.CyclicLR(w.opt, 0.01, 0.1, mode="sine"), Value,
         r"^CyclicLR: argument 'mode'"),
    Case("sequential-milestone-count",
         lambda w: dg.optim.SequentialLR(w.opt, [dg.optim.ExponentialLR(w.opt, 0.9)], [3]),
         Value, r"^SequentialLR: argument 'milestones'"),
    Case("sequential-plateau-part",
         lambda w: dg.optim.SequentialLR(w.opt, [dg.optim.ReduceLROnPlateau(w.opt)], []),
         Type, r"^SequentialLR: argument 'schedulers\[0\]'"),
    Case("plateau-factor-one", lambda w: dg.optim.ReduceLROnPlateau(w.opt, factor=1.0),
         Value, r"^ReduceLROnPlateau: argument 'factor'"),
    Case("plateau-bad-mode", lambda w: dg.optim.ReduceLROnPlateau(w.opt, mode="lowest"),
         Value, r"^ReduceLROnPlateau: argument 'mode'"),
    Case("plateau-step-string", lambda w: dg.optim.ReduceLROnPlateau(w.opt).step("0.5"),
         Type, r"^ReduceLROnPlateau.step: argument 'metrics'"),
    # checkpoints
    Case("load-missing-checkpoint", _load_missing_checkpoint, dg.CheckpointNotFoundError,
         r"load_checkpoint: argument 'path' names no file: .*missing\.ckpt"),
    Case("load-garbage-checkpoint", _load_garbage_checkpoint, dg.CheckpointError,
         r"^load_checkpoint: .*garbage\.ckpt"),
    Case("load-foreign-checkpoint", _load_foreign_checkpoint, dg.CheckpointError,
         r"^load_checkpoint: .*another model"),
    Case("load-wrong-shape-checkpoint", _load_wrong_shape_checkpoint, dg.CheckpointError,
         r"^load_checkpoint: parameter '2\.(weight|bias)'"),
    Case("load-checkpoint-other-optimizer", _load_checkpoint_into_other_optimizer,
         dg.CheckpointError, r"^load_checkpoint: .*Adam.*SGD"),
    Case("load-checkpoint-non-module", lambda w: dg.load_checkpoint(w.tmp / "x", [1]), Type,
         r"^load_checkpoint: argument 'model'"),
    Case("save-checkpoint-non-module",
         lambda w: dg.save_checkpoint(w.tmp / "x.ckpt", w.params()), Type,
         r"^save_checkpoint: argument 'model'"),
    Case("save-checkpoint-non-optimizer",
         lambda w: dg.save_checkpoint(w.tmp / "x.ckpt", w.model, optimizer={}), Type,
         r"^save_checkpoint: argument 'optimizer'"),
]


def test_catalogue_is_large_and_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) >= 50
    assert len(set(ids)) == len(ids), "duplicate case ids"
    assert all(c.exc in BUILTIN for c in CASES)


BOTH = [c for c in CASES if not c.cpu_only and not c.gpu_only]
CPU_ONLY = [c for c in CASES if c.cpu_only]
GPU_ONLY = [c for c in CASES if c.gpu_only]


@pytest.mark.parametrize("case", BOTH, ids=[c.id for c in BOTH])
def test_bad_input_raises_typed_error_before_any_change(device, world, case):
    _check_case(world, case)


@pytest.mark.parametrize("case", CPU_ONLY, ids=[c.id for c in CPU_ONLY])
def test_bad_float64_input_raises_on_cpu(tmp_path, case):
    # float64 tensors exist only on the cpu backend, so these cases have no gpu form
    _check_case(World(tmp_path), case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_ONLY, ids=[c.id for c in GPU_ONLY])
def test_bad_input_raises_on_gpu(gpu, tmp_path, case):
    _check_case(World(tmp_path), case)


def _check_case(world, case):
    before = _snapshot(world)
    try:
        case.trigger(world)
    except Exception as exc:  # noqa: BLE001 - the type is what is under test
        err = exc
    else:
        pytest.fail(f"{case.id}: the bad input was accepted without an error")
    assert isinstance(err, dg.DualgradError), f"{type(err).__name__}: {err}"
    assert isinstance(err, case.exc), f"{type(err).__name__} is not {case.exc.__name__}: {err}"
    assert isinstance(err, BUILTIN[case.exc])
    assert re.search(case.match, str(err)), f"message {str(err)!r} !~ {case.match!r}"
    _assert_same(before, _snapshot(world))
    if (world.tmp / "x.ckpt").exists():
        pytest.fail("a save that raised left a file behind")


def test_the_world_changes_are_visible_to_the_snapshot(device, world):
    """The no-change check is only as good as the snapshot: a real step must show in it."""
    before = _snapshot(world)
    world.opt.step()
    with pytest.raises(AssertionError):
        _assert_same(before, _snapshot(world))


# ---------------------------------------------------------------------------------------------
# Input that is accepted

def test_float64_and_integer_input_become_float32_by_default(device):
    values = np.array([[0.1, -2.5, 1e-3]], dtype=np.float64)
    t = dg.ag_tensor(values)
    assert t.dtype == np.float32
    assert t.numpy().dtype == np.float32
    np.testing.assert_array_equal(t.numpy(), values.astype(np.float32))
    ints = dg.ag_tensor(np.array([1, -2, 3], dtype=np.int64))
    assert ints.dtype == np.float32
    np.testing.assert_array_equal(ints.numpy(), [1.0, -2.0, 3.0])
    assert dg.ag_param(values).dtype == np.float32


def test_float64_is_kept_when_asked_for_on_cpu():
    values = np.array([0.1, 1.0 / 3.0])
    t = dg.ag_tensor(values, dtype="float64")
    assert t.dtype == np.float64
    np.testing.assert_array_equal(t.numpy(), values)     # no float32 rounding on the way


def test_non_contiguous_and_fortran_arrays_are_read_correctly(device, rng):
    base = rng.standard_normal((4, 6)).astype(np.float32)
    views = {"strided": base[:, ::2], "transposed": base.T, "fortran": np.asfortranarray(base),
             "reversed": base[::-1, ::-1]}
    for name, view in views.items():
        assert not view.flags.c_contiguous, name     # each one needs a real conversion
        np.testing.assert_array_equal(dg.ag_tensor(view).numpy(), view, err_msg=name)
    # through ops: a wrong stride would scramble the product, not just its layout
    product = dg.matmul(dg.ag_tensor(np.asfortranarray(base)), dg.ag_tensor(base.T)).numpy()
    np.testing.assert_allclose(product, base @ base.T, rtol=1e-5, atol=1e-5)
    summed = (dg.ag_tensor(base[:, ::2]) + base[:, 1::2]).numpy()   # an array operand too
    np.testing.assert_array_equal(summed, base[:, ::2] + base[:, 1::2])


def test_zero_element_tensors_flow_through_ops(device):
    empty = dg.ag_tensor(np.zeros((0, 3)))
    assert (empty + empty).shape == (0, 3)
    total = dg.sum(empty)
    assert total.shape == () and total.item() == 0.0
    np.testing.assert_array_equal(dg.sum(empty, axis=0).numpy(), np.zeros(3))
    assert np.isnan(dg.mean(empty).item())                     # documented: mean of nothing
    k0 = dg.matmul(dg.ag_tensor(np.ones((2, 0))), dg.ag_tensor(np.ones((0, 3)))).numpy()
    assert k0.shape == (2, 3)
    np.testing.assert_array_equal(k0, np.zeros((2, 3)))
    assert dg.matmul(dg.ag_tensor(np.ones((0, 4))), dg.ag_tensor(np.ones((4, 3)))).shape \
        == (0, 3)


def test_zero_element_parameters_get_empty_gradients(device):
    a, b = dg.ag_param(np.ones((2, 0))), dg.ag_param(np.ones((0, 3)))
    with dg.with_grad_tape():
        loss = dg.sum(dg.matmul(a, b))
        loss.backward()
    assert loss.item() == 0.0
    assert a.grad.shape == (2, 0) and b.grad.shape == (0, 3)
