"""Optimizers, gradient clipping and learning-rate schedules.

dualgrad's float32 optimizers are checked step by step, weights and every state entry,
against a plain NumPy float64 transcription of the update rules as the PyTorch
documentation states them (torch.optim.SGD, Adam, AdamW); schedules against the closed
forms in their docstrings.
"""
import json
import math

import numpy as np
import pytest

import dualgrad as dg

F32_EPS = float(np.finfo(np.float32).eps)
# dualgrad keeps weights and state in float32 and rounds every stored value once per step
# (its hyperparameters once too); the reference below runs in float64 and never rounds. One
# step may therefore move a value by a relative error of a few float32 ULP, and these
# errors add up over the steps: step k is allowed ULPS_PER_STEP * k ULP, relative to the
# largest magnitude in the array (so that an element that is near zero through
# cancellation, as a momentum average of alternating gradients can be, is judged on the
# scale of its neighbours). Any mistake in the rule itself is orders of magnitude larger.
ULPS_PER_STEP = 4
STEPS = 10


def assert_f32_close(actual, ref, step, what):
    tol = ULPS_PER_STEP * step * F32_EPS
    actual, ref = np.asarray(actual), np.asarray(ref)
    assert actual.shape == ref.shape, what
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    np.testing.assert_allclose(actual, ref, rtol=tol, atol=tol * scale, err_msg=what)


# ---------------------------------------------------------------------------------------------
# Float64 transcriptions of PyTorch's documented algorithms. Each takes float64 copies of the
# initial weights; step() takes one gradient (or None: the parameter is skipped) per weight.

class RefSGD:
    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        self.params = [np.array(p, np.float64) for p in params]
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        self.buf = [None] * len(self.params)

    def step(self, grads):
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if g is None:
                continue
            g = np.array(g, np.float64)
            if self.weight_decay != 0:
                g = g + self.weight_decay * p
            if self.momentum != 0:
                if self.buf[i] is None:          # t = 1: the buffer is the gradient
                    self.buf[i] = g.copy()
                else:
                    self.buf[i] = self.momentum * self.buf[i] + (1 - self.dampening) * g
                g = g + self.momentum * self.buf[i] if self.nesterov else self.buf[i]
            p -= self.lr * g

    def state(self, i):
        return {} if self.buf[i] is None else {"momentum_buffer": self.buf[i]}


class RefAdam:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled=False):
        self.params = [np.array(p, np.float64) for p in params]
        self.lr, self.betas, self.eps = lr, betas, eps
        self.weight_decay, self.decoupled = weight_decay, decoupled
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]
        self.t = [0] * len(self.params)

    def step(self, grads):
        b1, b2 = self.betas
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if g is None:
                continue
            g = np.array(g, np.float64)
            self.t[i] += 1
            t = self.t[i]
            if self.decoupled:                   # AdamW: shrink the weight first
                p *= 1 - self.lr * self.weight_decay
            elif self.weight_decay != 0:         # Adam: L2 term in the gradient
                g = g + self.weight_decay * p
            self.m[i] = b1 * self.m[i] + (1 - b1) * g
            self.v[i] = b2 * self.v[i] + (1 - b2) * g * g
            m_hat = self.m[i] / (1 - b1 ** t)
            v_hat = self.v[i] / (1 - b2 ** t)
            p -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

    def state(self, i):
        if self.t[i] == 0:
            return {}
        return {"step": self.t[i], "exp_avg": self.m[i], "exp_avg_sq": self.v[i]}


# Betas exactly representable in float32, so that a test about something else (skipped or
# frozen parameters, ...) does not depend on how the hyperparameters are rounded.
EXACT_BETAS = (0.75, 0.9375)

SGD_CASES = {
    "plain": dict(lr=0.1),
    "momentum": dict(lr=0.05, momentum=0.9),
    "dampening": dict(lr=0.05, momentum=0.8, dampening=0.3),
    "nesterov": dict(lr=0.05, momentum=0.9, nesterov=True),
    "weight_decay": dict(lr=0.1, weight_decay=0.05),
    "momentum_weight_decay": dict(lr=0.05, momentum=0.9, weight_decay=0.05),
}
# PyTorch's default betas (0.9, 0.999) are not float32 numbers, so the cases using them
# also check that 1 - beta reaches the update without a large relative error.
ADAM_CASES = {
    "adam_default": ("Adam", dict(lr=1e-2)),
    "adam_weight_decay": ("Adam", dict(lr=1e-2, weight_decay=0.1)),
    "adam_exact_betas": ("Adam", dict(lr=1e-2, betas=EXACT_BETAS, eps=1e-6)),
    "adam_exact_betas_wd": ("Adam", dict(lr=1e-2, betas=EXACT_BETAS, weight_decay=0.1)),
    "adamw_default": ("AdamW", dict(lr=1e-2)),
    "adamw": ("AdamW", dict(lr=1e-2, weight_decay=0.1)),
    "adamw_exact_betas": ("AdamW", dict(lr=1e-2, betas=EXACT_BETAS, weight_decay=0.5)),
}


def make_pair(kind, hyper, params):
    """(dualgrad optimizer, reference) over the same params (Parameters)."""
    init = [p.numpy() for p in params.values()] if isinstance(params, dict) else \
        [p.numpy() for p in params]
    if kind == "SGD":
        return dg.optim.SGD(params, **hyper), RefSGD(init, **hyper)
    if kind == "Adam":
        return dg.optim.Adam(params, **hyper), RefAdam(init, **hyper)
    ref_hyper = dict(hyper, weight_decay=hyper.get("weight_decay", 1e-2))  # AdamW's default
    return dg.optim.AdamW(params, **hyper), RefAdam(init, **ref_hyper, decoupled=True)


def make_params(rng, shapes):
    return [dg.ag_param(rng.standard_normal(s)) for s in shapes]


def grads_for(rng, params, step):
    """Gradients that vary from step to step in scale and sign (float32, as dualgrad's)."""
    scale = 0.5 + (step % 3)
    return [(scale * rng.standard_normal(p.shape)).astype(np.float32) for p in params]


def check_against_reference(opt, ref, params, step):
    state = opt.state_dict()["state"]
    for i, p in enumerate(params):
        assert_f32_close(p.numpy(), ref.params[i], step, f"weight {i} after step {step}")
        expected = ref.state(i)
        got = state.get(i, {})
        assert set(got) == set(expected), f"state keys of param {i} after step {step}"
        for k, v in expected.items():
            if k == "step":
                assert got[k] == v, f"step count of param {i}"
            else:
                assert_f32_close(got[k], v, step, f"state {i}/{k} after step {step}")


def run_steps(opt, ref, params, rng, steps=STEPS, skip=None):
    """Step both; skip maps step -> indices whose grad is None at that step."""
    skip = skip or {}
    for step in range(1, steps + 1):
        grads = grads_for(rng, params, step)
        grads = [None if i in skip.get(step, ()) else g for i, g in enumerate(grads)]
        before = [p.numpy() for p in params]
        state_before = opt.state_dict()["state"]
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        ref.step(grads)
        check_against_reference(opt, ref, params, step)
        for i in skip.get(step, ()):
            # skipped: the weight and its whole state are untouched, bit for bit
            np.testing.assert_array_equal(params[i].numpy(), before[i])
            after = opt.state_dict()["state"].get(i, {})
            old = state_before.get(i, {})
            assert set(after) == set(old)
            for k in old:
                np.testing.assert_array_equal(after[k], old[k])


SHAPES = [(5, 3), (7,), (2, 2, 3)]


@pytest.mark.parametrize("case", list(SGD_CASES))
def test_sgd_matches_pytorch_rule(device, rng, case):
    params = make_params(rng, SHAPES)
    opt, ref = make_pair("SGD", SGD_CASES[case], params)
    run_steps(opt, ref, params, rng)


@pytest.mark.parametrize("case", list(ADAM_CASES))
def test_adam_matches_pytorch_rule(device, rng, case):
    kind, hyper = ADAM_CASES[case]
    params = make_params(rng, SHAPES)
    opt, ref = make_pair(kind, hyper, params)
    run_steps(opt, ref, params, rng)


def test_adamw_default_weight_decay_is_0_01():
    p = dg.ag_param(np.ones(3))
    assert dg.optim.AdamW([p]).weight_decay == 0.01
    assert dg.optim.Adam([p]).weight_decay == 0.0


# The other rules (and Adam's amsgrad, every rule's maximize), transcribed the same way from
# PyTorch's documentation: each updates p (float64) and the state dict s in place at step t.
def _grad(g, p, h):
    g = -g if h.get("maximize") else g
    if h.get("weight_decay") and not h.get("decoupled_weight_decay"):
        g = g + h["weight_decay"] * p
    elif h.get("weight_decay"):
        p *= 1 - h["lr"] * h["weight_decay"]
    return g


def _zeros(s, name, p, value=0.0):
    return s.get(name, np.full_like(p, value))


def ref_adam(p, g, s, t, h):
    b1, b2 = h["betas"]
    g = _grad(g, p, h)
    s["exp_avg"] = b1 * _zeros(s, "exp_avg", p) + (1 - b1) * g
    s["exp_avg_sq"] = b2 * _zeros(s, "exp_avg_sq", p) + (1 - b2) * g * g
    v = s["exp_avg_sq"]
    if h["amsgrad"]:
        v = s["max_exp_avg_sq"] = np.maximum(_zeros(s, "max_exp_avg_sq", p), v)
    p -= h["lr"] / (1 - b1 ** t) * s["exp_avg"] / (np.sqrt(v) / math.sqrt(1 - b2 ** t)
                                                   + h["eps"])


def ref_rmsprop(p, g, s, t, h):
    g, a = _grad(g, p, h), h["alpha"]
    s["square_avg"] = a * _zeros(s, "square_avg", p) + (1 - a) * g * g
    var = s["square_avg"]
    if h["centered"]:
        s["grad_avg"] = a * _zeros(s, "grad_avg", p) + (1 - a) * g
        var = var - s["grad_avg"] ** 2
    avg = np.sqrt(var) + h["eps"]
    if h["momentum"] > 0:
        s["momentum_buffer"] = h["momentum"] * _zeros(s, "momentum_buffer", p) + g / avg
        p -= h["lr"] * s["momentum_buffer"]
    else:
        p -= h["lr"] * g / avg


def ref_adagrad(p, g, s, t, h):
    g = _grad(g, p, h)
    s["sum"] = _zeros(s, "sum", p, h["initial_accumulator_value"]) + g * g
    p -= h["lr"] / (1 + (t - 1) * h["lr_decay"]) * g / (np.sqrt(s["sum"]) + h["eps"])


def ref_adamax(p, g, s, t, h):
    b1, b2 = h["betas"]
    g = _grad(g, p, h)
    s["exp_avg"] = b1 * _zeros(s, "exp_avg", p) + (1 - b1) * g
    s["exp_inf"] = np.maximum(b2 * _zeros(s, "exp_inf", p), np.abs(g) + h["eps"])
    p -= h["lr"] / (1 - b1 ** t) * s["exp_avg"] / s["exp_inf"]


def ref_nadam(p, g, s, t, h):
    b1, b2 = h["betas"]
    g = _grad(g, p, h)

    def mu(k):
        return b1 * (1 - 0.5 * 0.96 ** (k * h["momentum_decay"]))
    s["mu_product"] = s.get("mu_product", 1.0) * mu(t)
    s["exp_avg"] = b1 * _zeros(s, "exp_avg", p) + (1 - b1) * g
    s["exp_avg_sq"] = b2 * _zeros(s, "exp_avg_sq", p) + (1 - b2) * g * g
    denom = np.sqrt(s["exp_avg_sq"] / (1 - b2 ** t)) + h["eps"]
    p -= h["lr"] * (1 - mu(t)) / (1 - s["mu_product"]) * g / denom
    p -= h["lr"] * mu(t + 1) / (1 - s["mu_product"] * mu(t + 1)) * s["exp_avg"] / denom


def ref_radam(p, g, s, t, h):
    b1, b2 = h["betas"]
    g = _grad(g, p, h)
    s["exp_avg"] = b1 * _zeros(s, "exp_avg", p) + (1 - b1) * g
    s["exp_avg_sq"] = b2 * _zeros(s, "exp_avg_sq", p) + (1 - b2) * g * g
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2 ** t / bc2
    if rho_t > 5:
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                         ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        p -= s["exp_avg"] / bc1 * h["lr"] * rect * math.sqrt(bc2) / (np.sqrt(s["exp_avg_sq"])
                                                                     + h["eps"])
    else:
        p -= s["exp_avg"] / bc1 * h["lr"]


def ref_sgd(p, g, s, t, h):
    g = _grad(g, p, h)
    if h["momentum"]:
        s["momentum_buffer"] = g.copy() if "momentum_buffer" not in s else \
            h["momentum"] * s["momentum_buffer"] + (1 - h["dampening"]) * g
        g = g + h["momentum"] * s["momentum_buffer"] if h["nesterov"] else s["momentum_buffer"]
    p -= h["lr"] * g


REF_RULES = {"SGD": ref_sgd, "Adam": ref_adam, "AdamW": ref_adam, "RMSprop": ref_rmsprop,
             "Adagrad": ref_adagrad, "Adamax": ref_adamax, "NAdam": ref_nadam,
             "RAdam": ref_radam}


class RefRule:
    """A float64 transcription of optimizer ``kind`` with the hyperparameters ``h`` (its
    defaults filled in from dualgrad's class, which the tests below check are PyTorch's)."""

    def __init__(self, kind, params, **h):
        self.rule = REF_RULES[kind]
        self.h = {**getattr(dg.optim, kind)._defaults, **h}
        if kind == "AdamW":
            self.h["decoupled_weight_decay"] = True
        self.params = [np.array(p, np.float64) for p in params]
        self.s = [dict() for _ in self.params]
        self.counts = kind != "SGD"

    def step(self, grads):
        for p, g, s in zip(self.params, grads, self.s):
            if g is not None:
                t = s["step"] = s.get("step", 0) + 1
                self.rule(p, np.array(g, np.float64), s, t, self.h)

    def state(self, i):
        s = dict(self.s[i])
        if not self.counts:
            s.pop("step", None)
        return s


RULE_CASES = {
    "adam_amsgrad": ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.1)),
    "adamw_amsgrad": ("AdamW", dict(lr=1e-2, amsgrad=True)),
    "adam_maximize": ("Adam", dict(lr=1e-2, maximize=True, weight_decay=0.1)),
    "sgd_maximize": ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True,
                                 weight_decay=0.05)),
    "rmsprop": ("RMSprop", dict()),
    "rmsprop_wd": ("RMSprop", dict(lr=1e-3, weight_decay=0.1, alpha=0.9)),
    "rmsprop_momentum": ("RMSprop", dict(momentum=0.9, maximize=True)),
    "rmsprop_centered": ("RMSprop", dict(centered=True, momentum=0.5, eps=1e-6)),
    "adagrad": ("Adagrad", dict(lr=0.1)),
    "adagrad_decay": ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                      initial_accumulator_value=0.25, maximize=True)),
    "adamax": ("Adamax", dict()),
    "adamax_wd": ("Adamax", dict(lr=1e-2, weight_decay=0.1, betas=EXACT_BETAS)),
    "nadam": ("NAdam", dict(lr=1e-2)),
    "nadam_l2": ("NAdam", dict(lr=1e-2, weight_decay=0.1, momentum_decay=0.05)),
    "nadam_decoupled": ("NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True,
                                      maximize=True)),
    "radam": ("RAdam", dict(lr=1e-2)),                 # rectified from step 6 on
    "radam_l2": ("RAdam", dict(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.99))),
    "radam_decoupled": ("RAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
}


@pytest.mark.parametrize("case", list(RULE_CASES))
def test_each_rule_matches_pytorch_rule(device, rng, case):
    kind, hyper = RULE_CASES[case]
    params = make_params(rng, SHAPES)
    opt = getattr(dg.optim, kind)(params, **hyper)
    run_steps(opt, RefRule(kind, [p.numpy() for p in params], **hyper), params, rng)


# PyTorch 2.13's defaults (torch.optim's signatures), so that a bare constructor behaves the
# same on both.
PYTORCH_DEFAULTS = {
    "SGD": dict(lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                maximize=False),
    "Adam": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
                 maximize=False, decoupled_weight_decay=False),
    "AdamW": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                  maximize=False, decoupled_weight_decay=True),
    "RMSprop": dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                    maximize=False),
    "Adagrad": dict(lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                    eps=1e-10, maximize=False),
    "Adamax": dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False),
    "NAdam": dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                  decoupled_weight_decay=False, maximize=False),
    "RAdam": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                  decoupled_weight_decay=False, maximize=False),
}


# torch.optim's positional arguments (torch 2.13), in order, before its own extras
PYTORCH_POSITIONAL = {
    "SGD": ["lr", "momentum", "dampening", "weight_decay", "nesterov"],
    "Adam": ["lr", "betas", "eps", "weight_decay", "amsgrad"],
    "AdamW": ["lr", "betas", "eps", "weight_decay", "amsgrad"],
    "RMSprop": ["lr", "alpha", "eps", "weight_decay", "momentum", "centered"],
    "Adagrad": ["lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"],
    "Adamax": ["lr", "betas", "eps", "weight_decay"],
    "NAdam": ["lr", "betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay"],
    "RAdam": ["lr", "betas", "eps", "weight_decay", "decoupled_weight_decay"],
}


@pytest.mark.parametrize("kind", list(PYTORCH_POSITIONAL))
def test_positional_arguments_bind_in_pytorchs_order(kind):
    import inspect
    params = inspect.signature(getattr(dg.optim, kind)).parameters.values()
    positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == ["params"] + PYTORCH_POSITIONAL[kind]
    if kind == "SGD":       # SGD(params, lr, momentum, dampening): the fourth is dampening
        assert dg.optim.SGD([dg.ag_param(np.ones(3))], 0.1, 0.9, 0.5).defaults["dampening"] \
            == 0.5


@pytest.mark.parametrize("kind", list(PYTORCH_DEFAULTS))
def test_defaults_are_pytorchs(kind):
    opt = getattr(dg.optim, kind)([dg.ag_param(np.ones(3))])
    assert opt.defaults == PYTORCH_DEFAULTS[kind]
    group = opt.param_groups[0]
    assert {k: v for k, v in group.items() if k != "params"} == PYTORCH_DEFAULTS[kind]


@pytest.mark.parametrize("kind,bad,match", [
    ("RMSprop", dict(alpha=1.5), "alpha"), ("RMSprop", dict(momentum=-0.1), "momentum"),
    ("Adagrad", dict(lr_decay=-1.0), "lr_decay"),
    ("Adagrad", dict(initial_accumulator_value=-1.0), "initial_accumulator_value"),
    ("Adamax", dict(betas=(0.9, 1.0)), r"betas\[1\]"),
    ("NAdam", dict(momentum_decay=-1), "momentum_decay"),
    ("RAdam", dict(decoupled_weight_decay=1), "decoupled_weight_decay"),
    ("Adam", dict(amsgrad="yes"), "amsgrad"), ("SGD", dict(maximize=None), "maximize")])
def test_bad_hyperparameters_are_named(kind, bad, match):
    with pytest.raises((dg.InvalidValueError, dg.ArgumentTypeError),
                       match=rf"^{kind}: argument '{match}'"):
        getattr(dg.optim, kind)([dg.ag_param(np.ones(3))], **bad)


# ---------------------------------------------------------------------------------------------
# Parameter groups, as torch.optim's: each group updated by its own hyperparameters.

def test_each_group_is_updated_by_its_own_hyperparameters(device, rng):
    params = make_params(rng, SHAPES)
    opt = dg.optim.SGD([{"params": params[:2], "lr": 0.1, "weight_decay": 0.05},
                        {"params": params[2:], "nesterov": True}], lr=0.02, momentum=0.9)
    assert [len(g["params"]) for g in opt.param_groups] == [2, 1]
    assert opt.param_groups[1]["lr"] == 0.02 and opt.param_groups[1]["weight_decay"] == 0.0
    first = RefRule("SGD", [p.numpy() for p in params[:2]], lr=0.1, weight_decay=0.05,
                    momentum=0.9)
    second = RefRule("SGD", [params[2].numpy()], lr=0.02, momentum=0.9, nesterov=True)
    for step in range(1, 6):
        grads = grads_for(rng, params, step)
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        first.step(grads[:2])
        second.step(grads[2:])
        for p, ref in zip(params, first.params + second.params):
            assert_f32_close(p.numpy(), ref, step, "weight")


def test_a_hyperparameter_attribute_reads_the_shared_value_and_sets_every_group(rng):
    params = make_params(rng, SHAPES)
    opt = dg.optim.Adam([{"params": params[:1], "lr": 0.1}, {"params": params[1:]}])
    assert opt.eps == 1e-8                                   # shared: read
    with pytest.raises(dg.InvalidValueError, match=r"param_groups\[k\]\['lr'\]"):
        opt.lr                                               # not shared: which one?
    opt.lr = 0.5
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.5] and opt.lr == 0.5


def test_add_param_group_checks_before_adding(rng):
    a, b, c = make_params(rng, SHAPES)
    opt = dg.optim.Adam([a], lr=0.1)
    for bad, match in (({"params": [b, a]}, "appears twice"), ({"params": [b], "lr": -1.0},
                                                                r"param_groups\[1\]\['lr'\]"),
                       ({"params": [b], "momentum": 0.9}, "hyperparameters of Adam"),
                       ([b], '"params" entry')):
        with pytest.raises((dg.InvalidValueError, dg.ArgumentTypeError), match=match):
            opt.add_param_group(bad)
        assert len(opt.param_groups) == 1 and opt.params == [a]
    opt.add_param_group({"params": {"late": b}, "lr": 0.01})
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    assert opt.param_names == ["0", "late"]
    b.grad = np.ones(b.shape, np.float32)
    before = b.numpy()
    opt.step()
    np.testing.assert_allclose(b.numpy(), before - 0.01, rtol=1e-6)   # Adam's first step: lr


def test_a_state_dict_of_groups_round_trips_and_a_mismatch_changes_nothing(device, rng):
    params = make_params(rng, SHAPES)
    opt = dg.optim.RMSprop([{"params": params[:2], "centered": True},
                            {"params": params[2:], "lr": 0.1, "momentum": 0.5}])
    for step in range(1, 4):
        for p, g in zip(params, grads_for(rng, params, step)):
            p.grad = g
        opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["momentum"] == 0.5
    assert set(sd["state"][0]) == {"step", "square_avg", "grad_avg"}
    assert set(sd["state"][2]) == {"step", "square_avg", "momentum_buffer"}
    twin = [dg.ag_param(p.numpy()) for p in params]
    other = dg.optim.RMSprop([{"params": twin[:2]}, {"params": twin[2:]}])
    other.load_state_dict(sd)
    assert other.hyperparameters() == opt.hyperparameters()
    one_group = dg.optim.RMSprop(twin)
    with pytest.raises(dg.InvalidValueError, match="parameter groups"):
        one_group.load_state_dict(sd)
    assert one_group.state == [{}, {}, {}] and one_group.param_groups[0]["lr"] == 1e-2
    split_differently = dg.optim.RMSprop([{"params": twin[:1]}, {"params": twin[1:]}])
    with pytest.raises(dg.InvalidValueError, match="group 0"):
        split_differently.load_state_dict(sd)


def test_a_state_dict_in_pytorchs_form_loads(device, rng):
    """PyTorch's layout: no parameter names, the groups' "params" indices, the step count
    a 0-d tensor (here an array), the moments by the same names: the step after it is the
    one after our own state_dict of the same values."""
    params = make_params(rng, [(3, 2), (2,)])
    ours = dg.optim.Adam(params, lr=0.01, weight_decay=0.1)
    for k in range(3):
        for p in params:
            p.grad = np.full(p.shape, k + 1.0, np.float32)
        ours.step()
    saved = ours.state_dict()
    theirs = {"state": {i: {"step": np.array(3.0, np.float32),
                            "exp_avg": ours.state[i]["exp_avg"].numpy(),
                            "exp_avg_sq": ours.state[i]["exp_avg_sq"].numpy()}
                        for i in range(2)},
              "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8,
                                "weight_decay": 0.1, "amsgrad": False, "maximize": False,
                                "foreach": None, "capturable": False, "differentiable": False,
                                "fused": None, "decoupled_weight_decay": False,
                                "params": [0, 1]}]}
    runs = []
    for state in (saved, theirs):
        copies = [dg.ag_param(p.numpy()) for p in params]
        opt = dg.optim.Adam(copies, lr=0.5)
        opt.load_state_dict(state)
        assert opt.state[0]["step"] == 3 and type(opt.state[0]["step"]) is int
        for p in copies:
            p.grad = np.full(p.shape, 4.0, np.float32)
        opt.step()
        runs.append([p.numpy() for p in copies])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_a_state_dict_of_one_hyper_dict_still_loads(rng):
    # (the earlier format: one "hyper" dict for the only group)
    params = make_params(rng, SHAPES)
    opt = dg.optim.Adam(params)
    opt.load_state_dict({"state": {}, "hyper": {"lr": 0.25, "betas": [0.5, 0.75]},
                         "param_names": ["0", "1", "2"]})
    assert opt.lr == 0.25 and opt.betas == (0.5, 0.75)


def test_a_schedule_sets_each_group_from_its_own_base_rate():
    a, b = dg.ag_param(np.ones(2)), dg.ag_param(np.ones(2))
    opt = dg.optim.Adam([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.01}])
    sched = dg.optim.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(4):
        sched.step()
    assert sched.get_last_lr() == pytest.approx([0.025, 0.0025])
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.01]
    plateau = dg.optim.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    plateau.step(1.0)
    plateau.step(2.0)
    assert plateau.get_last_lr() == pytest.approx([0.0125, 0.00125])
    cyc = dg.optim.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    assert [g["betas"][0] for g in opt.param_groups] == [0.95, 0.95]    # max_momentum
    assert cyc.get_last_lr() == pytest.approx([0.04, 0.04])


OPT_KINDS = {
    "sgd_momentum": ("SGD", dict(lr=0.05, momentum=0.9)),
    "adam": ("Adam", dict(lr=1e-2, betas=EXACT_BETAS)),
    "adamw": ("AdamW", dict(lr=1e-2, betas=EXACT_BETAS, weight_decay=0.1)),
}


@pytest.mark.parametrize("kind", list(OPT_KINDS))
def test_param_without_grad_is_skipped(device, rng, kind):
    # Parameter 1 has no gradient at steps 1, 4 and 5 (so it starts late, too): its weight
    # and state must not move and its step count must not advance.
    name, hyper = OPT_KINDS[kind]
    params = make_params(rng, SHAPES)
    opt, ref = make_pair(name, hyper, params)
    run_steps(opt, ref, params, rng, steps=8, skip={1: (1,), 4: (1,), 5: (1, 2)})
    if name != "SGD":
        state = opt.state_dict()["state"]
        assert [state[i]["step"] for i in range(3)] == [8, 5, 7]


@pytest.mark.parametrize("kind", list(OPT_KINDS))
def test_frozen_param_untouched(device, rng, kind):
    name, hyper = OPT_KINDS[kind]
    params = make_params(rng, SHAPES)
    frozen = dg.ag_param(rng.standard_normal((4, 2)))
    frozen_value = frozen.numpy()
    frozen_grad = rng.standard_normal((4, 2)).astype(np.float32)
    opt, ref = make_pair(name, hyper, params)
    for step in range(1, 4):
        grads = grads_for(rng, params, step)
        for p, g in zip(params, grads):
            p.grad = g
        frozen.grad = frozen_grad
        opt.step()
        ref.step(grads)
        check_against_reference(opt, ref, params, step)
        np.testing.assert_array_equal(frozen.numpy(), frozen_value)
    opt.zero_grad()
    # zero_grad clears only the optimizer's own parameters
    np.testing.assert_array_equal(frozen.grad.numpy(), frozen_grad)
    assert len(opt.state_dict()["state"]) == len(params)


@pytest.mark.parametrize("kind", list(OPT_KINDS))
def test_zero_element_param(device, rng, kind):
    name, hyper = OPT_KINDS[kind]
    params = [dg.ag_param(np.zeros((0, 3))), dg.ag_param(rng.standard_normal(4))]
    opt, ref = make_pair(name, hyper, params)
    run_steps(opt, ref, params, rng, steps=3)
    assert params[0].shape == (0, 3)


@pytest.mark.parametrize("kind", list(OPT_KINDS))
def test_params_as_dict(device, rng, kind):
    name, hyper = OPT_KINDS[kind]
    plist = make_params(rng, SHAPES)
    named = {"enc.weight": plist[0], "enc.bias": plist[1], "head": plist[2]}
    opt, ref = make_pair(name, hyper, named)
    assert opt.state_dict()["param_names"] == ["enc.weight", "enc.bias", "head"]
    run_steps(opt, ref, plist, rng, steps=4)


def test_param_given_twice_rejected():
    p = dg.ag_param(np.ones(2))
    with pytest.raises(dg.InvalidValueError):
        dg.optim.SGD([p, p], lr=0.1)


@pytest.mark.parametrize("name,bad", [("lr", True), ("lr", float("nan")),
                                      ("eps", -1e-8), ("betas", "a list")])
def test_a_hyperparameter_made_bad_between_steps_is_refused_by_the_next(device, rng, name,
                                                                        bad):
    # A step checks only the hyperparameters that are not the objects it last found good:
    # a new one is checked, however equal in value (True == 1), and a list each time (it
    # may change in place). Refused before anything changes.
    w = dg.ag_param(rng.standard_normal(6).astype(np.float32))
    opt = dg.optim.Adam([w], lr=1.0)
    w.grad = np.ones(6, np.float32)
    opt.step()
    if name == "betas":
        opt.betas = [0.9, 0.999]
        opt.step()                          # a good list is taken ...
        opt.betas[1] = 1.0                  # ... and made bad in place
    else:
        setattr(opt, name, bad)
    before, state = w.numpy(), opt.state_dict()
    with pytest.raises(dg.ArgumentTypeError if bad is True else dg.InvalidValueError,
                       match=name):
        opt.step()
    np.testing.assert_array_equal(w.numpy(), before)
    after = opt.state_dict()
    assert after["state"][0]["step"] == state["state"][0]["step"]
    np.testing.assert_array_equal(after["state"][0]["exp_avg"], state["state"][0]["exp_avg"])


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(device, rng, set_to_none):
    params = make_params(rng, SHAPES)
    opt = dg.optim.SGD(params, lr=0.1)
    for p in params[:2]:
        p.grad = rng.standard_normal(p.shape)
    old = [p.grad for p in params]
    opt.zero_grad(set_to_none=set_to_none)
    assert params[2].grad is None                    # had none: stays None
    for p, g in zip(params[:2], old):
        if set_to_none:
            assert p.grad is None
        else:                                        # zeroed in place, same tensor
            assert p.grad is g
            np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape, np.float32))


def test_zero_grad_default_sets_none(device):
    p = dg.ag_param(np.ones(3))
    p.grad = np.ones(3)
    dg.optim.Adam([p]).zero_grad()
    assert p.grad is None


STATE_KINDS = {
    "sgd_nesterov": ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "adam": ("Adam", dict(lr=1e-2, weight_decay=0.01)),
    "adamw": ("AdamW", dict(lr=1e-2, weight_decay=0.1)),
}
OPT_CLASSES = {"SGD": dg.optim.SGD, "Adam": dg.optim.Adam, "AdamW": dg.optim.AdamW}


@pytest.mark.parametrize("kind", list(STATE_KINDS))
def test_state_dict_round_trip_continues_exactly(device, rng, kind):
    name, hyper = STATE_KINDS[kind]
    params_a = make_params(rng, SHAPES)
    opt_a = OPT_CLASSES[name](params_a, **hyper)
    for step in range(1, 5):
        for p, g in zip(params_a, grads_for(rng, params_a, step)):
            p.grad = g
        opt_a.step()
    sd = opt_a.state_dict()
    # the state dict holds copies: scribbling on it does not reach the optimizer
    first = next(k for k in sd["state"][0] if k != "step")
    keep = sd["state"][0][first].copy()
    sd["state"][0][first][...] = 123.0
    np.testing.assert_array_equal(opt_a.state_dict()["state"][0][first], keep)
    sd["state"][0][first][...] = keep

    params_b = [dg.ag_param(p.numpy()) for p in params_a]
    other = dict(hyper, lr=hyper["lr"] * 7)          # hyperparameters come from the state
    opt_b = OPT_CLASSES[name](params_b, **other)
    opt_b.load_state_dict(sd)
    assert opt_b.hyperparameters() == opt_a.hyperparameters()
    for step in range(5, 10):
        grads = grads_for(rng, params_a, step)
        for pa, pb, g in zip(params_a, params_b, grads):
            pa.grad, pb.grad = g, g
        opt_a.step()
        opt_b.step()
    sa, sb = opt_a.state_dict()["state"], opt_b.state_dict()["state"]
    assert set(sa) == set(sb)
    for pa, pb in zip(params_a, params_b):
        if device == "cpu":
            np.testing.assert_array_equal(pa.numpy(), pb.numpy())
        else:
            assert_f32_close(pb.numpy(), pa.numpy().astype(np.float64), 1, "weight")
    for i in sa:
        assert set(sa[i]) == set(sb[i])
        for k in sa[i]:
            if device == "cpu" or k == "step":
                np.testing.assert_array_equal(sb[i][k], sa[i][k])
            else:
                assert_f32_close(sb[i][k], sa[i][k].astype(np.float64), 1, k)


def test_load_state_dict_rejects_other_optimizer_size(rng):
    a = dg.optim.Adam(make_params(rng, SHAPES))
    b = dg.optim.Adam(make_params(rng, SHAPES[:2]))
    with pytest.raises(dg.InvalidValueError):
        b.load_state_dict(a.state_dict())


# ---------------------------------------------------------------------------------------------
# Gradient clipping: torch.nn.utils.clip_grad_norm_ with the L2 norm.

CLIP_RTOL = 1e-6     # float32 sum of squares over ~50 elements, then one sqrt and a product


def ref_clip(grads, max_norm):
    total = math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads))
    coef = min(max_norm / (total + 1e-6), 1.0)
    return total, [g.astype(np.float64) * coef for g in grads]


@pytest.mark.parametrize("max_norm", [0.5, 3.0, 1e3])
def test_clip_grad_norm(device, rng, max_norm):
    params = make_params(rng, SHAPES) + [dg.ag_param(np.ones(3))]   # the last has no grad
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params[:3]]
    for p, g in zip(params, grads):
        p.grad = g
    total, expected = ref_clip(grads, max_norm)
    assert (max_norm < total) == (max_norm != 1e3)          # both regimes are exercised
    norm = dg.clip_grad_norm(params, max_norm)
    assert norm.shape == ()
    assert norm.item() == pytest.approx(total, rel=CLIP_RTOL)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.grad.numpy(), e, rtol=CLIP_RTOL, atol=0)
    assert params[3].grad is None
    if max_norm < total:
        clipped = math.sqrt(sum(float(np.sum(p.grad.numpy().astype(np.float64) ** 2))
                                for p in params[:3]))
        assert clipped == pytest.approx(max_norm, rel=1e-5)
    else:                                    # coefficient capped at exactly 1: untouched
        for p, g in zip(params, grads):
            np.testing.assert_array_equal(p.grad.numpy(), g)


@pytest.mark.parametrize("norm_type", [1.0, 3.0, 0.5, math.inf, "inf"])
def test_clip_grad_norm_of_other_norms(device, rng, norm_type):
    """PyTorch's norm_type: (sum |g|^p)^(1/p) over every gradient, or the largest |g|."""
    params = make_params(rng, SHAPES)
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    for p, g in zip(params, grads):
        p.grad = g
    flat = np.abs(np.concatenate([g.reshape(-1) for g in grads]).astype(np.float64))
    p_ = math.inf if norm_type == "inf" else norm_type
    total = flat.max() if math.isinf(p_) else (flat ** p_).sum() ** (1 / p_)
    norm = dg.clip_grad_norm(params, 0.5, norm_type=norm_type)
    assert norm.item() == pytest.approx(total, rel=1e-5)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * (0.5 / (total + 1e-6)), rtol=1e-5)
    with pytest.raises(dg.InvalidValueError, match="clip_grad_norm: argument 'norm_type'"):
        dg.clip_grad_norm(params, 0.5, norm_type=0.0)


def test_adam_with_decoupled_weight_decay_is_adamw(device, rng):
    init = rng.standard_normal((3, 4)).astype(np.float32)
    runs = []
    for make in (lambda p: dg.optim.Adam(p, lr=0.1, weight_decay=0.1,
                                         decoupled_weight_decay=True),
                 lambda p: dg.optim.AdamW(p, lr=0.1, weight_decay=0.1)):
        param = dg.ag_param(init)
        opt = make([param])
        for step in range(3):
            param.grad = np.full((3, 4), 0.5 * (step + 1), np.float32)
            opt.step()
        runs.append(param.numpy())
    np.testing.assert_array_equal(runs[0], runs[1])


def test_clip_grad_value_clamps_each_gradient_in_place(device, rng):
    params = make_params(rng, SHAPES) + [dg.ag_param(np.ones(3))]   # the last has no grad
    grads = [(3 * rng.standard_normal(p.shape)).astype(np.float32) for p in params[:3]]
    grads[0].reshape(-1)[0] = np.nan
    for p, g in zip(params, grads):
        p.grad = g
    assert dg.clip_grad_value(params, 1.5) is None
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -1.5, 1.5))   # NaN stays
    assert params[3].grad is None
    dg.optim.clip_grad_value({"a": params[1]}, 0.0)
    np.testing.assert_array_equal(params[1].grad.numpy(),
                                  np.zeros(params[1].shape, np.float32))


def test_clip_grad_norm_accepts_dict(device, rng):
    params = make_params(rng, SHAPES)
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    for p, g in zip(params, grads):
        p.grad = g
    total, expected = ref_clip(grads, 1.0)
    norm = dg.optim.clip_grad_norm({str(i): p for i, p in enumerate(params)}, 1.0)
    assert norm.item() == pytest.approx(total, rel=CLIP_RTOL)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.grad.numpy(), e, rtol=CLIP_RTOL)


# ---------------------------------------------------------------------------------------------
# Learning-rate schedules: closed forms from the docstrings.

BASE_LR = 0.2


def step_lr(s, step_size=3, gamma=0.5):
    return BASE_LR * gamma ** (s // step_size)


def cosine_lr(s, t_max=8, eta_min=0.01):
    return eta_min + (BASE_LR - eta_min) * (1 + math.cos(math.pi * s / t_max)) / 2


def warmup_cosine_lr(s, warmup=3, total=10, min_lr=1e-3):
    if s < warmup:
        return BASE_LR * (s + 1) / warmup
    frac = min(s - warmup, total - warmup) / (total - warmup)
    return min_lr + (BASE_LR - min_lr) * (1 + math.cos(math.pi * frac)) / 2


def multistep_lr(s):
    return BASE_LR * 0.5 ** sum(s >= m for m in (2, 5, 5, 9))


def linear_lr(s, start=0.25, end=0.75, total=6):
    return BASE_LR * (start + (end - start) * min(s, total) / total)


def polynomial_lr(s, total=7, power=2.0):
    return BASE_LR * (1 - min(s, total) / total) ** power


def one_cycle_lr(s, peak=1.0, total=14, pct=0.3):
    """PyTorch's two phases, cosine: max_lr/25 up to max_lr at step pct*total - 1, then
    down to max_lr/25/1e4 at total - 1."""
    start, low, top = peak / 25, peak / 25 / 1e4, pct * total - 1
    if s <= top:
        return peak + (start - peak) * (1 + math.cos(math.pi * s / top)) / 2
    frac = (s - top) / (total - 1 - top)
    return low + (peak - low) * (1 + math.cos(math.pi * frac)) / 2


def cyclic_lr(s, low=0.01, high=0.5, up=3, down=5):
    """Triangular: a straight rise over `up` steps and fall over `down`, repeating."""
    t = s % (up + down)
    return low + (high - low) * (t / up if t <= up else (up + down - t) / down)


def warm_restarts_lr(s, period=2, mult=2, low=0.01):
    """PyTorch's step-by-step rule: T_cur counts up; at the period's end it restarts at 0
    and the period grows mult times."""
    t_cur, t_i = 0, period
    for _ in range(s):
        t_cur += 1
        if t_cur >= t_i:
            t_cur, t_i = t_cur - t_i, t_i * mult
    return low + (BASE_LR - low) * (1 + math.cos(math.pi * t_cur / t_i)) / 2


def sequential_lr(s):
    """LinearLR(0.5 -> 1 over 2 steps) until step 4, then ExponentialLR(0.5) from its own
    step 0."""
    return BASE_LR * (0.5 + 0.5 * min(s, 2) / 2) if s < 4 else BASE_LR * 0.5 ** (s - 4)


def halves_then_tenths(s):
    """MultiplicativeLR's factor at step s >= 1: 0.5 on odd steps, 0.9 on even ones."""
    return 0.5 if s % 2 else 0.9


SCHEDULES = {
    "lambda": (lambda o: dg.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / 4)),
               lambda s: BASE_LR * min(1.0, (s + 1) / 4)),
    "multiplicative": (lambda o: dg.optim.lr_scheduler.MultiplicativeLR(o, halves_then_tenths),
                       lambda s: BASE_LR * math.prod(halves_then_tenths(k)
                                                     for k in range(1, s + 1))),
    "step": (lambda o: dg.optim.StepLR(o, step_size=3, gamma=0.5), step_lr),
    "multistep": (lambda o: dg.optim.MultiStepLR(o, [9, 5, 2, 5], gamma=0.5), multistep_lr),
    "exponential": (lambda o: dg.optim.ExponentialLR(o, gamma=0.8),
                    lambda s: BASE_LR * 0.8 ** s),
    "constant": (lambda o: dg.optim.ConstantLR(o, factor=0.25, total_iters=4),
                 lambda s: BASE_LR * (0.25 if s < 4 else 1.0)),
    "linear": (lambda o: dg.optim.LinearLR(o, 0.25, 0.75, total_iters=6), linear_lr),
    "polynomial": (lambda o: dg.optim.PolynomialLR(o, total_iters=7, power=2.0),
                   polynomial_lr),
    "cosine": (lambda o: dg.optim.CosineAnnealingLR(o, T_max=8, eta_min=0.01), cosine_lr),
    "warm_restarts": (lambda o: dg.optim.CosineAnnealingWarmRestarts(o, 2, 2, eta_min=0.01),
                      warm_restarts_lr),
    "warm_restarts_1": (lambda o: dg.optim.CosineAnnealingWarmRestarts(o, 3, eta_min=0.01),
                        lambda s: warm_restarts_lr(s, 3, 1)),
    "warmup_cosine": (lambda o: dg.optim.WarmupCosineLR(o, 3, 10, min_lr=1e-3),
                      warmup_cosine_lr),
    "one_cycle": (lambda o: dg.optim.OneCycleLR(o, max_lr=1.0, total_steps=14), one_cycle_lr),
    "cyclic": (lambda o: dg.optim.CyclicLR(o, 0.01, 0.5, step_size_up=3, step_size_down=5),
               cyclic_lr),
    "sequential": (lambda o: dg.optim.SequentialLR(
        o, [dg.optim.LinearLR(o, 0.5, 1.0, total_iters=2), dg.optim.ExponentialLR(o, 0.5)],
        milestones=[4]), sequential_lr),
}


def _two_groups():
    params = [dg.ag_param(np.ones(2)), dg.ag_param(np.ones(3))]
    return dg.optim.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.01}],
                        lr=BASE_LR, momentum=0.9)


@pytest.mark.parametrize("make, formulas", [
    (lambda o: dg.optim.OneCycleLR(o, [1.0, 0.5], total_steps=14),
     (one_cycle_lr, lambda s: one_cycle_lr(s, peak=0.5))),
    (lambda o: dg.optim.CyclicLR(o, [0.01, 0.001], [0.5, 0.1], step_size_up=3,
                                 step_size_down=5),
     (cyclic_lr, lambda s: cyclic_lr(s, low=0.001, high=0.1))),
], ids=["one_cycle", "cyclic"])
def test_schedules_take_a_value_per_parameter_group(make, formulas):
    """PyTorch's lists: max_lr (and CyclicLR's base_lr) one per parameter group."""
    opt = _two_groups()
    sched = make(opt)
    for s in range(14):
        assert sched.get_last_lr() == pytest.approx([f(s) for f in formulas], rel=1e-12)
        if s < 13:
            sched.step()
    with pytest.raises(dg.InvalidValueError, match=r"max_lr.*one per parameter group"):
        dg.optim.OneCycleLR(_two_groups(), [1.0, 0.5, 0.2], total_steps=14)


def test_lambda_schedules_take_a_function_per_parameter_group():
    opt = _two_groups()
    sched = dg.optim.LambdaLR(opt, [lambda s: 0.5 ** s, lambda s: s + 1])
    mult = dg.optim.MultiplicativeLR(_two_groups(), [lambda s: 0.5, lambda s: 2.0])
    for s in range(1, 4):
        sched.step()
        mult.step()
        assert sched.get_last_lr() == pytest.approx([BASE_LR * 0.5 ** s, 0.01 * (s + 1)])
        assert mult.get_last_lr() == pytest.approx([BASE_LR * 0.5 ** s, 0.01 * 2.0 ** s])
    with pytest.raises(dg.InvalidValueError, match=r"^LambdaLR: argument 'lr_lambda'.*one "
                                                   r"per parameter group"):
        dg.optim.LambdaLR(_two_groups(), [lambda s: 1.0])
    with pytest.raises(dg.ArgumentTypeError, match=r"^MultiplicativeLR: argument "
                                                   r"'lr_lambda\[1\]'"):
        dg.optim.MultiplicativeLR(_two_groups(), [lambda s: 1.0, 0.5])
    with pytest.raises(dg.ArgumentTypeError, match=r"^LambdaLR: argument 'lr_lambda'"):
        dg.optim.LambdaLR(_two_groups(), 0.5)
    opt = _two_groups()
    with pytest.raises(dg.ArgumentTypeError, match=r"^LambdaLR: argument 'lr_lambda\(0\)'"):
        dg.optim.LambdaLR(opt, lambda s: "fast")
    assert [g["lr"] for g in opt.param_groups] == [BASE_LR, 0.01]       # (left as it was)


def test_reduce_on_plateau_takes_a_min_lr_per_group():
    opt = _two_groups()
    sched = dg.optim.ReduceLROnPlateau(opt, patience=0, factor=0.5, min_lr=[0.03, 0.004])
    for _ in range(4):
        sched.step(1.0)                   # no improvement after the first: halved each time
    assert sched.get_last_lr() == [0.03, 0.004]


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_closed_form(name):
    make, formula = SCHEDULES[name]
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=BASE_LR)
    sched = make(opt)
    assert opt.lr == pytest.approx(formula(0), rel=1e-12)   # construction applies step 0
    for s in range(1, 15):          # past the end of each schedule (one cycle: to its end)
        sched.step()
        assert opt.lr == pytest.approx(formula(s), rel=1e-12), f"step {s}"
        assert sched.get_last_lr() == [opt.lr]


def test_schedule_endpoints():
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=BASE_LR)
    sched = dg.optim.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
    assert opt.lr == pytest.approx(BASE_LR)
    for _ in range(4):
        sched.step()
    assert opt.lr == pytest.approx(0.01)
    for _ in range(4):            # past T_max the cosine goes on, as PyTorch's: back up
        sched.step()
    assert opt.lr == pytest.approx(BASE_LR)
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=BASE_LR)
    sched = dg.optim.WarmupCosineLR(opt, warmup_steps=2, total_steps=6, min_lr=0.0)
    lrs = [opt.lr]
    for _ in range(7):
        sched.step()
        lrs.append(opt.lr)
    assert lrs[0] == pytest.approx(BASE_LR / 2) and lrs[2] == pytest.approx(BASE_LR)
    assert lrs[6] == pytest.approx(0.0, abs=1e-15) and lrs[7] == pytest.approx(0.0, abs=1e-15)


def test_schedule_drives_the_update(device):
    # the optimizer reads the lr the schedule set: plain SGD moves by exactly -lr * g
    p = dg.ag_param(np.zeros(4))
    opt = dg.optim.SGD([p], lr=1.0)
    sched = dg.optim.StepLR(opt, step_size=1, gamma=0.5)
    expected = np.zeros(4)
    for s in range(4):
        p.grad = np.ones(4)
        opt.step()
        expected -= 0.5 ** s
        sched.step()
        np.testing.assert_allclose(p.numpy(), expected, rtol=1e-7)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_state_dict_round_trip(name):
    make, formula = SCHEDULES[name]
    opt_a = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=BASE_LR)
    sched_a = make(opt_a)
    for _ in range(5):
        sched_a.step()
    state = sched_a.state_dict()
    opt_b = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=0.9)   # another base lr
    sched_b = make(opt_b)
    sched_b.load_state_dict(state)
    assert opt_b.lr == opt_a.lr == pytest.approx(formula(5), rel=1e-12)
    for s in range(6, 12):
        sched_a.step()
        sched_b.step()
        assert opt_b.lr == opt_a.lr == pytest.approx(formula(s), rel=1e-12)


def test_one_cycle_refuses_to_step_past_its_end():
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=BASE_LR, momentum=0.9)
    sched = dg.optim.OneCycleLR(opt, max_lr=1.0, total_steps=5)
    for _ in range(5):
        sched.step()
    lr, momentum = opt.lr, opt.momentum
    with pytest.raises(dg.InvalidValueError, match=r"^OneCycleLR.step: stepped 6 times; "
                                                   r"total_steps is 5"):
        sched.step()
    assert (opt.lr, opt.momentum, sched.last_step) == (lr, momentum, 5)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_cycled_momentum_moves_against_the_rate(kind):
    # SGD's momentum or Adam's beta1 goes down while the rate goes up, and back
    p = dg.ag_param(np.ones(2))
    opt = dg.optim.SGD([p], lr=BASE_LR, momentum=0.5) if kind == "sgd" else \
        dg.optim.Adam([p], lr=BASE_LR, betas=(0.5, 0.99))
    sched = dg.optim.CyclicLR(opt, 0.01, 0.5, step_size_up=2, base_momentum=0.8,
                              max_momentum=0.9)

    def momentum():
        return opt.momentum if kind == "sgd" else opt.betas[0]
    seen = [(opt.lr, momentum())]
    for _ in range(4):
        sched.step()
        seen.append((opt.lr, momentum()))
    expected = [(0.01, 0.9), (0.255, 0.85), (0.5, 0.8), (0.255, 0.85), (0.01, 0.9)]
    np.testing.assert_allclose(seen, expected, rtol=1e-12)
    if kind == "adam":
        assert opt.betas[1] == 0.99


def test_cycled_momentum_needs_a_momentum():
    opt = dg.optim.Adagrad([dg.ag_param(np.ones(2))], lr=0.1)     # neither momentum nor betas
    with pytest.raises(dg.InvalidValueError, match=r"^CyclicLR: argument 'cycle_momentum'"):
        dg.optim.CyclicLR(opt, 0.01, 0.1)
    dg.optim.CyclicLR(opt, 0.01, 0.1, cycle_momentum=False)


def test_a_second_schedule_starts_from_the_first_rate():
    # as PyTorch's initial_lr: the second schedule does not start from the first's step 0
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=BASE_LR)
    dg.optim.ConstantLR(opt, factor=0.5)
    assert opt.lr == pytest.approx(BASE_LR / 2)
    second = dg.optim.ExponentialLR(opt, gamma=0.5)
    assert second.base_lrs == [BASE_LR] and opt.lr == pytest.approx(BASE_LR)


def test_reduce_on_plateau_rule():
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=1.0)
    sched = dg.optim.ReduceLROnPlateau(opt, factor=0.5, patience=2, cooldown=1, min_lr=0.2)
    assert opt.lr == 1.0                                # construction changes nothing
    # 5.0 improves; the next three do not (4.9996 is within the relative threshold 1e-4)
    lrs = []
    for metric in (5.0, 5.0, 4.9996, 6.0, 6.0, 6.0, 6.0, 6.0, 4.0, 7.0, 7.0, 7.0, 7.0,
                   7.0, 7.0, 7.0, 7.0):
        sched.step(metric)
        lrs.append(opt.lr)
    # the third bad evaluation in a row halves the rate; the cooldown's one evaluation
    # counts for nothing; 4.0 is a new best; then the rate stops at min_lr
    assert lrs[:4] == [1.0, 1.0, 1.0, 0.5]
    assert lrs[4:9] == [0.5, 0.5, 0.5, 0.25, 0.25]
    assert lrs[9:] == [0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
    assert sched.get_last_lr() == [0.2]


def test_reduce_on_plateau_max_mode_and_tensor_metric(device):
    opt = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=1.0)
    sched = dg.optim.ReduceLROnPlateau(opt, mode="max", patience=0, threshold=0.1,
                                       threshold_mode="abs")
    for metric in (0.5, 0.65, 0.7):
        sched.step(dg.ag_tensor(np.float32(metric)))
    assert opt.lr == pytest.approx(0.1)                 # 0.7 is not 0.1 above 0.65


def test_reduce_on_plateau_state_round_trip():
    opt_a = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=1.0)
    a = dg.optim.ReduceLROnPlateau(opt_a, patience=1)
    for metric in (3.0, 3.0, 3.0, 2.0, 2.5):
        a.step(metric)
    opt_b = dg.optim.SGD([dg.ag_param(np.ones(2))], lr=1.0)
    b = dg.optim.ReduceLROnPlateau(opt_b, patience=1)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))     # as checkpoints store it
    assert opt_b.lr == opt_a.lr == pytest.approx(0.1)
    for metric in (2.5, 2.5, 1.0):
        a.step(metric)
        b.step(metric)
        assert opt_b.lr == opt_a.lr
    assert opt_a.lr == pytest.approx(0.01)


# ---------------------------------------------------------------------------------------------
# Training end to end

TRAIN_KINDS = {
    "sgd": lambda ps: dg.optim.SGD(ps, lr=0.3),
    "sgd_nesterov": lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda ps: dg.optim.Adam(ps, lr=0.02),
    "adamw": lambda ps: dg.optim.AdamW(ps, lr=0.02, weight_decay=0.01),
}


@pytest.mark.parametrize("kind", list(TRAIN_KINDS))
def test_training_reduces_loss(device, kind):
    data = np.random.default_rng(3)
    x = data.standard_normal((64, 4)).astype(np.float32)
    y = np.sin(x @ np.array([[1.0], [-2.0], [0.5], [1.5]], np.float32))
    model = dg.nn.Sequential(dg.nn.Linear(4, 16), dg.nn.Tanh(), dg.nn.Linear(16, 1))
    opt = TRAIN_KINDS[kind](model.parameters())
    losses = []
    for _ in range(60):
        with dg.with_grad_tape():
            loss = dg.mse_loss(model(dg.ag_tensor(x)), y)
            loss.backward()
        losses.append(loss.item())
        opt.step()
        opt.zero_grad()
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("split_min", [None, 64])
def test_cpu_updates_of_many_tensors_are_each_ones_update(monkeypatch, rng, split_min):
    """The cpu's optim_steps shares parameters too small to be cut on their own across the
    cores (consecutive ones a part) and cuts the big ones: each tensor gets the bits of its
    own update, its state too; empty tensors are left alone."""
    from dualgrad.api.optimizers import adam_hyper
    from dualgrad.cpu import CpuBackend
    from dualgrad.cpu import split as cpu_split
    if split_min is not None:
        monkeypatch.setattr(cpu_split, "SPLIT_MIN", split_min)
    monkeypatch.setattr(cpu_split, "cores", lambda: 2)
    be = CpuBackend()
    hyper = dict(adam_hyper(1e-2, (0.9, 0.999), 1e-8, 0.01, 3, True), amsgrad=True)
    sizes = [3000, 1, 0, 1024, 40, 5000, 7, 7, 300000]
    arrays = [[rng.standard_normal(n).astype(np.float32) for _ in range(2)] +
              [np.abs(rng.standard_normal(n)).astype(np.float32) for _ in range(3)]
              for n in sizes]
    one = [[a.copy() for a in group] for group in arrays]
    for w, g, *state in one:
        be.optim_step("adam", w, g, tuple(state), hyper)
    many = [[a.copy() for a in group] for group in arrays]
    be.optim_steps("adam", [(w, g, tuple(state)) for w, g, *state in many], hyper)
    for a, b in zip(one, many):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(arrays[0], many[0]))


def test_cpu_updates_shared_out_leave_blas_threads_free(monkeypatch, rng):
    """Parameters shared out among the cores do not make the pool busy (a small model keeps
    BLAS's threads for its products); one big enough to be cut as a flat op does."""
    from dualgrad.api.optimizers import adam_hyper
    from dualgrad.cpu import CpuBackend, optim
    from dualgrad.cpu import split as cpu_split
    monkeypatch.setattr(cpu_split, "cores", lambda: 2)
    monkeypatch.setattr(cpu_split, "_last_on_every_core", -float("inf"))
    hyper = adam_hyper(1e-2, (0.9, 0.999), 1e-8, 0.01, 3, True)

    def params(n, count):
        return [(rng.standard_normal(n).astype(np.float32),
                 rng.standard_normal(n).astype(np.float32),
                 (np.zeros(n, np.float32), np.zeros(n, np.float32), None))
                for _ in range(count)]
    parts = []
    monkeypatch.setattr(cpu_split, "run_ranges", lambda fn, ranges, busy=True:
                        parts.append(busy) or [fn(*r) for r in ranges])
    small = cpu_split.SPLIT_MIN // optim.WORK - 1
    CpuBackend().optim_steps("adam", params(small, 3), hyper)
    assert parts and not any(parts)                   # shared out, and not busy
    monkeypatch.undo()
    monkeypatch.setattr(cpu_split, "cores", lambda: 2)
    monkeypatch.setattr(cpu_split, "_last_on_every_core", -float("inf"))
    CpuBackend().optim_steps("adam", params(cpu_split.SPLIT_MIN, 1), hyper)
    assert cpu_split.busy()
