"""The lockstep harness: whole training runs on both backends agree after every step, for
every optimizer and schedule, and a wrong kernel makes the harness fail at the step it
first shows, naming the tensor."""
import numpy as np
import pytest

import dualgrad as dg
from dualgrad.gpu import GpuBackend
from dualgrad.testing import lockstep
from dualgrad.testing.models import MODELS, regression, regression_batches

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _device_present():
    from conftest import require_gpu
    require_gpu()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reference_models_agree_for_60_adam_steps(name):
    factory, batches = MODELS[name]
    result = lockstep(factory, lambda p: dg.optimizer_adam(p, lr=1e-2), batches(60))
    result.check()
    assert len(result.steps) == 61 and result.steps[0].step == 0
    # the initial weights are copied, so step 0 agrees exactly
    assert result.steps[0].worst[1] == 0.0
    # parameters and every state entry are compared
    names = result.steps[-1].tensors
    assert any(n.startswith("param ") for n in names)
    assert any(n.endswith(".exp_avg_sq") for n in names)
    assert any(n.endswith(".step") for n in names)


OPTIMIZERS = {
    "sgd": (lambda p: dg.optimizer_sgd(p, lr=0.05), None, None),
    "momentum": (lambda p: dg.optimizer_sgd(p, lr=0.05, momentum=0.9), None, None),
    "nesterov": (lambda p: dg.optimizer_sgd(p, lr=0.05, momentum=0.9, nesterov=True),
                 None, None),
    "sgd_weight_decay": (lambda p: dg.optimizer_sgd(p, lr=0.05, momentum=0.5,
                                                    weight_decay=0.01), None, None),
    "adam": (lambda p: dg.optimizer_adam(p, lr=1e-2), None, None),
    "adam_l2": (lambda p: dg.optimizer_adam(p, lr=1e-2, weight_decay=0.01), None, None),
    "adamw": (lambda p: dg.optimizer_adamw(p, lr=1e-2, weight_decay=0.1), None, None),
    "adam_clipped": (lambda p: dg.optimizer_adam(p, lr=1e-2), None, 0.5),
    "sgd_clipped": (lambda p: dg.optimizer_sgd(p, lr=0.1, momentum=0.9), None, 0.1),
    "step_lr": (lambda p: dg.optimizer_sgd(p, lr=0.1, momentum=0.9),
                lambda o: dg.optim.StepLR(o, step_size=5, gamma=0.5), None),
    "cosine": (lambda p: dg.optimizer_adam(p, lr=2e-2),
               lambda o: dg.optim.CosineAnnealingLR(o, T_max=20), None),
    "warmup_cosine": (lambda p: dg.optimizer_adamw(p, lr=2e-2),
                      lambda o: dg.optim.WarmupCosineLR(o, warmup_steps=5, total_steps=25),
                      None),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_every_optimizer_and_schedule_agrees_after_every_step(kind):
    make_opt, make_sched, max_norm = OPTIMIZERS[kind]
    result = lockstep(regression, make_opt, regression_batches(25),
                      scheduler_factory=make_sched, max_norm=max_norm)
    result.check()
    assert len(result.steps) == 26


class EdgeModel(dg.nn.Module):
    """A linear model with the parameters optimizer tests trip on: one frozen, one used only
    on some steps, one with no elements."""

    def __init__(self):
        super().__init__()
        self.body = dg.nn.Linear(13, 1)
        self.frozen = dg.ag_param(np.full((1,), 0.5, np.float32))
        self.frozen.requires_grad = False
        self.sometimes = dg.ag_param(np.zeros((1,), np.float32))
        self.empty = dg.ag_param(np.zeros((0, 3), np.float32))

    def forward(self, x, use_sometimes):
        out = self.body(x) * self.frozen + dg.sum(self.empty)
        return out + self.sometimes if use_sometimes else out


def _edge_loss(model, x, y, use_sometimes):
    return dg.mse_loss(model(dg.ag_tensor(x), use_sometimes), dg.ag_tensor(y))


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam", "adamw"])
def test_frozen_unused_and_empty_parameters(kind):
    batches = [(x, y, step % 3 == 1) for step, (x, y) in enumerate(regression_batches(12))]
    result = lockstep(EdgeModel, OPTIMIZERS[kind][0], batches, loss_fn=_edge_loss)
    result.check()
    last = result.steps[-1].tensors
    assert last["param frozen"] == 0.0          # never updated, identical on both
    assert "param empty" in last


def _perturbed_adam(monkeypatch, factor):
    original = GpuBackend.optim_steps           # (the optimizer's one update of them all)

    def optim_steps(self, rule, params, hyper):
        original(self, rule, params, {**hyper, "step_size": hyper["step_size"] * factor})
    monkeypatch.setattr(GpuBackend, "optim_steps", optim_steps)


def test_a_perturbed_optimizer_kernel_is_caught_at_its_first_step(monkeypatch):
    _perturbed_adam(monkeypatch, 1.01)            # a 1% larger step on the gpu
    result = lockstep(regression, lambda p: dg.optimizer_adam(p, lr=1e-2),
                      regression_batches(10))
    assert not result.ok
    assert result.diverged_at == 1
    assert result.tensor.startswith("param ")
    assert len(result.steps) == 2                 # it stopped there
    assert "diverge at step 1" in result.message and result.tensor in result.message
    with pytest.raises(AssertionError, match="diverge at step 1"):
        result.check()


def test_a_perturbed_forward_kernel_is_caught(monkeypatch):
    original = GpuBackend.unary

    def unary(self, op, x, a=0.0, b=0.0, out=None):
        y = original(self, op, x, a, b, out)
        if op == "tanh":                            # tanh off by 1e-3 relative
            self.unary("mul_scalar", y, 1.001, 0.0, out=y)
        return y
    monkeypatch.setattr(GpuBackend, "unary", unary)
    result = lockstep(regression, lambda p: dg.optimizer_sgd(p, lr=0.05),
                      regression_batches(5))
    assert not result.ok and result.diverged_at == 1


def test_a_bound_that_grows_with_the_step_is_applied_per_step(monkeypatch):
    _perturbed_adam(monkeypatch, 1.0001)
    strict = lockstep(regression, lambda p: dg.optimizer_adam(p, lr=1e-2),
                      regression_batches(8), tolerance=1e-7)
    loose = lockstep(regression, lambda p: dg.optimizer_adam(p, lr=1e-2),
                     regression_batches(8), tolerance=lambda step: 1.0)
    assert not strict.ok and loose.ok and len(loose.steps) == 9


def test_the_selected_device_is_restored():
    assert dg.ag_device() == "cpu"
    lockstep(regression, lambda p: dg.optimizer_sgd(p, lr=0.05), regression_batches(2))
    assert dg.ag_device() == "cpu"
    dg.ag_device("gpu")
    lockstep(regression, lambda p: dg.optimizer_sgd(p, lr=0.05), regression_batches(2))
    assert dg.ag_device() == "gpu"


@pytest.mark.parametrize("bad,error", [
    (dict(tolerance=0.0), dg.InvalidValueError), (dict(tolerance="1e-4"), dg.InvalidValueError),
    (dict(model_factory=3), dg.ArgumentTypeError),
    (dict(optimizer_factory=None), dg.ArgumentTypeError)])
def test_bad_arguments_are_named(bad, error):
    args = dict(model_factory=regression, optimizer_factory=lambda p: dg.optimizer_sgd(p, 0.1),
                batches=regression_batches(1))
    name = next(iter(bad))
    args.update(bad)
    with pytest.raises(error, match=name):
        lockstep(**args)
