"""Learning-rate schedules (``dg.optim``): PyTorch's rules, as its documentation states them.

Every schedule but ReduceLROnPlateau is a closed form of the step count (``lr_at``), so a
schedule's whole state is its position and SequentialLR can run its parts from any step.
The price, against PyTorch's chainable schedules (which multiply the rate the optimizer
holds): two schedules stepped on one optimizer do not compose (the last one sets the rate),
and a rate set by hand lasts until the next step.
OneCycleLR and CyclicLR also cycle the momentum (SGD's ``momentum``, Adam's ``betas[0]``) as
PyTorch's do by default.
"""
from __future__ import annotations

import bisect
import math

from . import checks
from .optim import Optimizer
from .tensor import Tensor
from ..errors import InvalidValueError, bad_type, bad_value


def _choice(fn: str, name: str, value, allowed: tuple) -> str:
    if value not in allowed:
        raise bad_value(fn, name, value, "one of " + ", ".join(repr(a) for a in allowed))
    return value


def _one_per_group(fn: str, name: str, value, optimizer, check, what: str) -> list:
    """``value`` (``what``), or a list or tuple of one per parameter group (PyTorch's form),
    as a list of one per group, each item through ``check(its name, item)``."""
    groups = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 1
    if isinstance(value, (list, tuple)):
        if len(value) != groups:
            raise bad_value(fn, name, value, f"{what}, or {groups} of them (one per "
                                             "parameter group)")
        return [check(f"{name}[{k}]", v) for k, v in enumerate(value)]
    return [check(name, value)] * groups


def _per_group(fn: str, name: str, value, optimizer, lo: float = 0.0,
               lo_open: bool = False) -> list:
    """A number, or one per parameter group, as a list of one per group."""
    return _one_per_group(fn, name, value, optimizer,
                          lambda n, v: checks.number(fn, n, v, lo, lo_open=lo_open), "a number")


def _set_momentum(optimizer: Optimizer, momentum: float) -> None:
    """Every group's momentum: beta1 where the optimizer has betas, else its momentum."""
    for group in optimizer.param_groups:
        if "betas" in group:
            group["betas"] = (momentum, group["betas"][1])
        else:
            group["momentum"] = momentum


def _check_cycles_momentum(fn: str, optimizer) -> None:
    if "betas" not in optimizer.defaults and "momentum" not in optimizer.defaults:
        raise bad_value(fn, "cycle_momentum", True,
                        "False for an optimizer without momentum or betas")


class LRScheduler:
    """Sets each parameter group's lr from a closed form of the step count and the group's
    base rate. Call ``step()`` once per optimizer step (after it); construction applies
    step 0's rate.

    As in PyTorch, the first schedule made for an optimizer records each group's learning
    rate as its ``"initial_lr"``, and every schedule starts from that (``base_lrs``): a
    second schedule made for the same optimizer (SequentialLR's parts) starts from the same
    rates, not from the first one's step 0."""

    def __init__(self, optimizer: Optimizer):
        if not isinstance(optimizer, Optimizer):
            raise bad_type(type(self).__name__, "optimizer", optimizer, "a dualgrad optimizer")
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_step = 0
        self._apply(0)

    def lr_at(self, step: int, base_lr: float) -> float:
        """The learning rate at ``step`` (0 at construction) of a group whose base rate is
        ``base_lr``."""
        raise NotImplementedError

    def momentum_at(self, step: int) -> float | None:
        """The momentum at ``step``, for schedules that set it (None: left alone)."""
        return None

    def lrs_at(self, step: int) -> list:
        """Each group's learning rate at ``step``."""
        return [self.lr_at(step, base) for base in self.base_lrs]

    def _apply(self, step: int) -> None:
        lrs = self.lrs_at(step)                                      # (may refuse the step)
        momentum = self.momentum_at(step)
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        if momentum is not None:
            _set_momentum(self.optimizer, momentum)
        self.last_step = step

    def step(self) -> None:
        """Advance one step and set the optimizer's learning rate."""
        self._apply(self.last_step + 1)

    def get_last_lr(self) -> list:
        """The learning rate the schedule last set, one entry per parameter group."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The schedule's position, for checkpoints."""
        return {"base_lrs": list(self.base_lrs), "last_step": self.last_step}

    def load_state_dict(self, state: dict) -> None:
        """Restore the position saved by ``state_dict()`` and set the learning rates."""
        self.base_lrs = _base_lrs(self, state)
        self._apply(int(state["last_step"]))


def _base_lrs(schedule: LRScheduler, state: dict) -> list:
    """The base rates a schedule's state holds, one per group (a state of one "base_lr"
    gives it to every group)."""
    groups = len(schedule.optimizer.param_groups)
    lrs = state["base_lrs"] if "base_lrs" in state else [state["base_lr"]] * groups
    if len(lrs) != groups:
        raise bad_value(f"{type(schedule).__name__}.load_state_dict", "state", state,
                        f"the base rates of {groups} parameter groups")
    return [float(lr) for lr in lrs]


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (step // step_size)."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1):
        self.step_size = checks.integer("StepLR", "step_size", step_size, 1)
        self.gamma = checks.number("StepLR", "gamma", gamma, 0.0, lo_open=True)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (the number of milestones <= step); a milestone listed
    twice counts twice, as in PyTorch."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1):
        try:
            items = list(milestones)
        except TypeError:
            raise bad_type("MultiStepLR", "milestones", milestones,
                           "a list of step counts") from None
        self.milestones = sorted(checks.integer("MultiStepLR", f"milestones[{k}]", m, 0)
                                 for k, m in enumerate(items))
        self.gamma = checks.number("MultiStepLR", "gamma", gamma, 0.0, lo_open=True)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * self.gamma ** bisect.bisect_right(self.milestones, step)


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** step."""

    def __init__(self, optimizer, gamma: float):
        self.gamma = checks.number("ExponentialLR", "gamma", gamma, 0.0, lo_open=True)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * self.gamma ** step


class ConstantLR(LRScheduler):
    """lr = base_lr * factor before ``total_iters`` steps, base_lr from then on."""

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5):
        self.factor = checks.number("ConstantLR", "factor", factor, 0.0, 1.0)
        self.total_iters = checks.integer("ConstantLR", "total_iters", total_iters, 0)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * (1.0 if step >= self.total_iters else self.factor)


class LinearLR(LRScheduler):
    """The factor of base_lr goes linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then stays."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5):
        self.start_factor = checks.number("LinearLR", "start_factor", start_factor, 0.0, 1.0,
                                          lo_open=True)
        self.end_factor = checks.number("LinearLR", "end_factor", end_factor, 0.0, 1.0)
        self.total_iters = checks.integer("LinearLR", "total_iters", total_iters, 1)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        t = min(step, self.total_iters) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t)


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(step, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0):
        self.total_iters = checks.integer("PolynomialLR", "total_iters", total_iters, 1)
        self.power = checks.number("PolynomialLR", "power", power, 0.0)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * (1.0 - min(step, self.total_iters) / self.total_iters) ** self.power


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2: eta_min at
    T_max, and past it the cosine goes on (back to base_lr at 2 T_max), as PyTorch's."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0):  # noqa: N803
        self.T_max = checks.integer("CosineAnnealingLR", "T_max", T_max, 1)
        self.eta_min = checks.number("CosineAnnealingLR", "eta_min", eta_min, 0.0)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        t = step / self.T_max
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * t)) / 2


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from base_lr to ``eta_min`` over T_0 steps, then restarting at
    base_lr, each period ``T_mult`` times the last, as
    ``torch.optim.lr_scheduler.CosineAnnealingWarmRestarts``: lr = eta_min + (base_lr -
    eta_min) (1 + cos(pi T_cur / T_i)) / 2, T_cur the steps since the last restart and T_i
    the period."""

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0):  # noqa: N803
        fn = "CosineAnnealingWarmRestarts"
        self.T_0 = checks.integer(fn, "T_0", T_0, 1)
        self.T_mult = checks.integer(fn, "T_mult", T_mult, 1)
        self.eta_min = checks.number(fn, "eta_min", eta_min, 0.0)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        t_cur, t_i = step, self.T_0
        if self.T_mult == 1:
            t_cur %= t_i
        while t_cur >= t_i:                 # (periods that grow: logarithmically many)
            t_cur -= t_i
            t_i *= self.T_mult
        cosine = (1 + math.cos(math.pi * t_cur / t_i)) / 2
        return self.eta_min + (base_lr - self.eta_min) * cosine


class WarmupCosineLR(LRScheduler):
    """Linear warmup to base_lr over ``warmup_steps`` (step s gets base_lr * (s+1) /
    warmup_steps), then cosine decay to ``min_lr`` at ``total_steps``, where it stays."""

    def __init__(self, optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0):
        self.warmup_steps = checks.integer("WarmupCosineLR", "warmup_steps", warmup_steps, 0)
        self.total_steps = checks.integer("WarmupCosineLR", "total_steps", total_steps, 1)
        if self.total_steps <= self.warmup_steps:
            raise bad_value("WarmupCosineLR", "total_steps", total_steps,
                            f"more than warmup_steps ({warmup_steps})")
        self.min_lr = checks.number("WarmupCosineLR", "min_lr", min_lr, 0.0)
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        if step < self.warmup_steps:
            return base_lr * (step + 1) / self.warmup_steps
        t = min(step - self.warmup_steps, self.total_steps - self.warmup_steps)
        frac = t / (self.total_steps - self.warmup_steps)
        return self.min_lr + (base_lr - self.min_lr) * (1 + math.cos(math.pi * frac)) / 2


def _anneal(strategy: str, start: float, end: float, pct: float) -> float:
    if strategy == "cos":
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
    return (end - start) * pct + start


class OneCycleLR(LRScheduler):
    """The 1cycle policy, as ``torch.optim.lr_scheduler.OneCycleLR``: from max_lr /
    div_factor up to ``max_lr`` over the first ``pct_start`` of ``total_steps``, then down to
    max_lr / div_factor / final_div_factor (``three_phase``: back to the start first), each
    phase annealed by ``anneal_strategy`` ("cos" or "linear"). With ``cycle_momentum`` the
    momentum moves the other way between ``max_momentum`` and ``base_momentum``. The
    optimizer's own learning rate is not used; ``max_lr`` may be a list, one per parameter
    group; stepping past ``total_steps`` raises."""

    def __init__(self, optimizer, max_lr: float, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum: float = 0.85,
                 max_momentum: float = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False):
        fn = "OneCycleLR"
        self.max_lrs = _per_group(fn, "max_lr", max_lr, optimizer, lo_open=True)
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise bad_value(fn, "total_steps", None,
                                "a step count, or epochs and steps_per_epoch")
            total_steps = checks.integer(fn, "epochs", epochs, 1) * \
                checks.integer(fn, "steps_per_epoch", steps_per_epoch, 1)
        self.total_steps = checks.integer(fn, "total_steps", total_steps, 1)
        pct_start = checks.number(fn, "pct_start", pct_start, 0.0, 1.0)
        self.anneal_strategy = _choice(fn, "anneal_strategy", anneal_strategy,
                                       ("cos", "linear"))
        self.cycle_momentum = checks.flag(fn, "cycle_momentum", cycle_momentum)
        base_m = checks.number(fn, "base_momentum", base_momentum, 0.0)
        max_m = checks.number(fn, "max_momentum", max_momentum, 0.0)
        div = checks.number(fn, "div_factor", div_factor, 0.0, lo_open=True)
        final_div = checks.number(fn, "final_div_factor", final_div_factor, 0.0, lo_open=True)
        checks.flag(fn, "three_phase", three_phase)
        t = self.total_steps
        # (end step, momentum from, momentum to) per phase, PyTorch's table, and each
        # group's (lr from, lr to) per phase
        if three_phase:
            self.phases = ((pct_start * t - 1, max_m, base_m),
                           (2 * pct_start * t - 2, base_m, max_m), (t - 1, max_m, max_m))
        else:
            self.phases = ((pct_start * t - 1, max_m, base_m), (t - 1, base_m, max_m))
        self.lr_points = []
        for top in self.max_lrs:
            initial = top / div
            low = initial / final_div
            self.lr_points.append(((initial, top), (top, initial), (initial, low))
                                  if three_phase else ((initial, top), (top, low)))
        ends = [0.0] + [p[0] for p in self.phases]
        if any(b <= a for a, b in zip(ends, ends[1:])):
            raise bad_value(fn, "pct_start", pct_start,
                            f"a value giving each phase at least one step of the "
                            f"{self.total_steps}")
        if self.cycle_momentum:
            _check_cycles_momentum(fn, optimizer)
        super().__init__(optimizer)

    def _phase_point(self, step: int) -> tuple:
        """(the phase's index, how far into it) at ``step``."""
        if step > self.total_steps:
            raise InvalidValueError(
                f"OneCycleLR.step: stepped {step} times; total_steps is {self.total_steps}")
        start = 0.0
        for k, phase in enumerate(self.phases):
            if step <= phase[0] or k == len(self.phases) - 1:
                return k, (step - start) / (phase[0] - start)
            start = phase[0]

    def lrs_at(self, step: int) -> list:
        k, pct = self._phase_point(step)
        return [_anneal(self.anneal_strategy, *points[k], pct) for points in self.lr_points]

    def momentum_at(self, step: int) -> float | None:
        if not self.cycle_momentum:
            return None
        k, pct = self._phase_point(step)
        return _anneal(self.anneal_strategy, *self.phases[k][1:], pct)


class CyclicLR(LRScheduler):
    """The cyclical learning rate, as ``torch.optim.lr_scheduler.CyclicLR``: up from
    ``base_lr`` to ``max_lr`` over ``step_size_up`` steps and down over ``step_size_down``
    (default: the same), the height scaled per ``mode``: "triangular" (constant),
    "triangular2" (halved each cycle) or "exp_range" (``gamma ** step``); or by
    ``scale_fn(cycle or step)`` with ``scale_mode`` "cycle" or "iterations". With
    ``cycle_momentum`` the momentum goes the other way between ``max_momentum`` and
    ``base_momentum``. The optimizer's own learning rate is not used; ``base_lr`` and
    ``max_lr`` may be lists, one per parameter group."""

    _MODES = {"triangular": (lambda x: 1.0, "cycle"),
              "triangular2": (lambda x: 1 / (2.0 ** (x - 1)), "cycle")}

    def __init__(self, optimizer, base_lr: float, max_lr: float, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float = 0.8,
                 max_momentum: float = 0.9):
        fn = "CyclicLR"
        self.lows = _per_group(fn, "base_lr", base_lr, optimizer)
        self.highs = _per_group(fn, "max_lr", max_lr, optimizer)
        up = checks.integer(fn, "step_size_up", step_size_up, 1)
        down = up if step_size_down is None else \
            checks.integer(fn, "step_size_down", step_size_down, 0)
        self.total_size, self.step_ratio = up + down, up / (up + down)
        self.gamma = checks.number(fn, "gamma", gamma, 0.0, lo_open=True)
        if scale_fn is None:
            _choice(fn, "mode", mode, ("triangular", "triangular2", "exp_range"))
            self.scale_fn, self.scale_mode = self._MODES.get(
                mode, (lambda x: self.gamma ** x, "iterations"))
        else:
            if not callable(scale_fn):
                raise bad_type(fn, "scale_fn", scale_fn, "a function of one number")
            self.scale_fn = scale_fn
            self.scale_mode = _choice(fn, "scale_mode", scale_mode, ("cycle", "iterations"))
        self.cycle_momentum = checks.flag(fn, "cycle_momentum", cycle_momentum)
        self.base_momentum = checks.number(fn, "base_momentum", base_momentum, 0.0)
        self.max_momentum = checks.number(fn, "max_momentum", max_momentum, 0.0)
        if self.cycle_momentum:
            _check_cycles_momentum(fn, optimizer)
        super().__init__(optimizer)

    def _point(self, step: int) -> tuple:
        """(the rise as a fraction of the height, the scale) at ``step``."""
        cycle = math.floor(1 + step / self.total_size)
        x = 1.0 + step / self.total_size - cycle
        rise = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        return rise, self.scale_fn(cycle if self.scale_mode == "cycle" else step)

    def lrs_at(self, step: int) -> list:
        rise, scale = self._point(step)
        return [low + (high - low) * rise * scale for low, high in zip(self.lows, self.highs)]

    def momentum_at(self, step: int) -> float | None:
        if not self.cycle_momentum:
            return None
        rise, scale = self._point(step)
        return self.max_momentum - (self.max_momentum - self.base_momentum) * rise * scale


def _lambdas(fn: str, lr_lambda, optimizer) -> list:
    """``lr_lambda``: a function of the step count, or one per parameter group, as a list
    of one per group."""
    def function(name: str, f):
        if not callable(f):
            raise bad_type(fn, name, f, "a function of the step count")
        return f
    return _one_per_group(fn, "lr_lambda", lr_lambda, optimizer, function, "a function")


def _factor(fn: str, f, step: int) -> float:
    return checks.number(fn, f"lr_lambda({step})", f(step))


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(step), as ``torch.optim.lr_scheduler.LambdaLR``;
    ``lr_lambda`` a function of the step count or a list of one per parameter group (a
    warmup: ``lambda s: min(1.0, (s + 1) / warmup)``). The functions are not saved in
    ``state_dict()`` (PyTorch saves only those that are objects with a ``__dict__``)."""

    def __init__(self, optimizer, lr_lambda):
        self.lr_lambdas = _lambdas("LambdaLR", lr_lambda, optimizer)
        super().__init__(optimizer)

    def lrs_at(self, step: int) -> list:
        return [base * _factor("LambdaLR", f, step)
                for f, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(LRScheduler):
    """Each step multiplies the rate by lr_lambda(step): lr = base_lr * lr_lambda(1) *
    ... * lr_lambda(step), as ``torch.optim.lr_scheduler.MultiplicativeLR`` from its
    base rate (PyTorch's multiplies the group's rate as it stands, so a rate set by hand
    carries on there; here the next step sets the product again)."""

    def __init__(self, optimizer, lr_lambda):
        self.lr_lambdas = _lambdas("MultiplicativeLR", lr_lambda, optimizer)
        self._products = [[1.0] for _ in self.lr_lambdas]     # (step k's at index k)
        super().__init__(optimizer)

    def lrs_at(self, step: int) -> list:
        lrs = []
        for f, products, base in zip(self.lr_lambdas, self._products, self.base_lrs):
            while len(products) <= step:
                products.append(products[-1] * _factor("MultiplicativeLR", f, len(products)))
            lrs.append(base * products[step])
        return lrs


class SequentialLR(LRScheduler):
    """Runs ``schedulers`` one after another, switching at the step counts in
    ``milestones``; each part starts from its own step 0 at its milestone, as in PyTorch.
    The parts must be schedules of the same optimizer; only this one is stepped."""

    def __init__(self, optimizer, schedulers, milestones):
        fn = "SequentialLR"
        try:
            self.schedulers = list(schedulers)
            milestones = list(milestones)
        except TypeError:
            raise bad_type(fn, "schedulers", schedulers,
                           "a list of schedules and a list of milestones") from None
        if not self.schedulers:
            raise bad_value(fn, "schedulers", schedulers, "at least one schedule")
        for k, s in enumerate(self.schedulers):
            if not isinstance(s, LRScheduler) or isinstance(s, SequentialLR):
                raise bad_type(fn, f"schedulers[{k}]", s,
                               "a closed-form schedule (not ReduceLROnPlateau or SequentialLR)")
            if s.optimizer is not optimizer:
                raise bad_value(fn, f"schedulers[{k}]", s,
                                "a schedule of the optimizer given to SequentialLR")
        if len(milestones) != len(self.schedulers) - 1:
            raise bad_value(fn, "milestones", milestones,
                            f"{len(self.schedulers) - 1} step counts, one fewer than the "
                            f"schedules")
        self.milestones = [checks.integer(fn, f"milestones[{k}]", m, 1)
                           for k, m in enumerate(milestones)]
        if any(b <= a for a, b in zip(self.milestones, self.milestones[1:])):
            raise bad_value(fn, "milestones", milestones, "increasing step counts")
        super().__init__(optimizer)

    def _part(self, step: int) -> tuple:
        k = bisect.bisect_right(self.milestones, step)
        return self.schedulers[k], step - (self.milestones[k - 1] if k else 0)

    def lrs_at(self, step: int) -> list:
        part, local = self._part(step)
        return part.lrs_at(local)

    def momentum_at(self, step: int) -> float | None:
        part, local = self._part(step)
        return part.momentum_at(local)

    def _apply(self, step: int) -> None:
        super()._apply(step)
        part, local = self._part(step)
        part.last_step = local

    def state_dict(self) -> dict:
        return {**super().state_dict(), "schedulers": [s.state_dict() for s in self.schedulers]}

    def load_state_dict(self, state: dict) -> None:
        parts = state.get("schedulers")
        if not isinstance(parts, list) or len(parts) != len(self.schedulers):
            raise bad_value("SequentialLR.load_state_dict", "state", state,
                            f"a SequentialLR state of {len(self.schedulers)} schedules")
        for s, part in zip(self.schedulers, parts):
            s.base_lrs = _base_lrs(s, part)
        super().load_state_dict(state)


class ReduceLROnPlateau:
    """Divides the learning rate when a metric stops improving, as
    ``torch.optim.lr_scheduler.ReduceLROnPlateau``: call ``step(metric)`` after each
    evaluation. After more than ``patience`` evaluations without an improvement by
    ``threshold`` (relative or absolute, per ``threshold_mode``), lr becomes
    max(lr * factor, min_lr) (unless that changes it by less than ``eps``; ``min_lr`` may
    be a list, one per parameter group), then ``cooldown`` evaluations pass before counting
    again."""

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float = 0.0, eps: float = 1e-8):
        fn = "ReduceLROnPlateau"
        if not isinstance(optimizer, Optimizer):
            raise bad_type(fn, "optimizer", optimizer, "a dualgrad optimizer")
        self.mode = _choice(fn, "mode", mode, ("min", "max"))
        self.factor = checks.number(fn, "factor", factor, 0.0, 1.0, hi_open=True)
        self.patience = checks.integer(fn, "patience", patience, 0)
        self.threshold = checks.number(fn, "threshold", threshold, 0.0)
        self.threshold_mode = _choice(fn, "threshold_mode", threshold_mode, ("rel", "abs"))
        self.cooldown = checks.integer(fn, "cooldown", cooldown, 0)
        self.min_lrs = _per_group(fn, "min_lr", min_lr, optimizer)
        self.eps = checks.number(fn, "eps", eps, 0.0)
        self.optimizer = optimizer
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = self.last_step = 0

    def _is_better(self, value: float) -> bool:
        t, best = self.threshold, self.best
        if self.mode == "min":
            return value < (best * (1 - t) if self.threshold_mode == "rel" else best - t)
        return value > (best * (1 + t) if self.threshold_mode == "rel" else best + t)

    def step(self, metrics) -> None:
        """Take one evaluation's metric (a number or a one-element tensor)."""
        if isinstance(metrics, Tensor):
            if metrics.size != 1:
                raise bad_value("ReduceLROnPlateau.step", "metrics", metrics,
                                "a number or a one-element tensor")
            metrics = metrics.item()
        if not checks.is_number(metrics):
            raise bad_type("ReduceLROnPlateau.step", "metrics", metrics,
                           "a number or a one-element tensor")
        value = float(metrics)
        self.last_step += 1
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                old = group["lr"]
                new = max(old * self.factor, min_lr)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0

    def get_last_lr(self) -> list:
        """The optimizer's learning rates, one entry per parameter group."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The counters, the best metric and the learning rates, for checkpoints."""
        return {"best": self.best, "num_bad_epochs": self.num_bad_epochs,
                "cooldown_counter": self.cooldown_counter, "last_step": self.last_step,
                "lrs": self.get_last_lr()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict()`` saved, the learning rate included."""
        self.best = float(state["best"])
        self.num_bad_epochs = int(state["num_bad_epochs"])
        self.cooldown_counter = int(state["cooldown_counter"])
        self.last_step = int(state["last_step"])
        groups = self.optimizer.param_groups
        lrs = state["lrs"] if "lrs" in state else [state["lr"]] * len(groups)
        if len(lrs) != len(groups):
            raise bad_value("ReduceLROnPlateau.load_state_dict", "state", state,
                            f"the rates of {len(groups)} parameter groups")
        for group, lr in zip(groups, lrs):
            group["lr"] = float(lr)
