"""The optimizers (``dg.optim``): SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam,
each with PyTorch's arguments, defaults and update rule as its documentation states them.
Each names its fused kernel (``kernel_ops.OPTIM``), checks a group's hyperparameters, and
computes the kernel's scalars for one update in float64 (``optim.Optimizer`` does the rest).
"""
from __future__ import annotations

import math

from . import checks
from .optim import Optimizer
from ..errors import InvalidValueError, bad_value


def _betas(fn: str, name: str, betas) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise bad_value(fn, name, betas, "a pair (beta1, beta2)")
    for k, b in enumerate(betas):
        checks.number(fn, f"{name}[{k}]", b, 0.0, 1.0, hi_open=True)


class _Base(Optimizer):
    """Common checks: lr, eps, weight_decay (where the rule has them), maximize."""

    def _check(self, h: dict, where: str) -> None:
        fn, name = self._fn, lambda n: self._name(where, n)
        checks.number(fn, name("lr"), h["lr"], 0.0)
        for n in ("eps", "weight_decay"):
            if n in self._defaults:
                checks.number(fn, name(n), h[n], 0.0)
        for n in ("maximize", "amsgrad", "nesterov", "centered", "decoupled_weight_decay"):
            if n in self._defaults:
                checks.flag(fn, name(n), h[n])
        if "betas" in self._defaults:
            _betas(fn, name("betas"), h["betas"])
        self._check_more(h, name)

    def _check_more(self, h: dict, name) -> None:
        pass


class SGD(_Base):
    """Stochastic gradient descent with optional momentum (dampening, Nesterov) and weight
    decay, as ``torch.optim.SGD``."""

    rule, _fn, _counts_steps = "sgd", "SGD", False
    _defaults = dict(lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                     maximize=False)

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _check_more(self, h: dict, name) -> None:
        checks.number("SGD", name("momentum"), h["momentum"], 0.0)
        checks.number("SGD", name("dampening"), h["dampening"], 0.0, 1.0)
        if h["nesterov"] and (h["momentum"] <= 0 or h["dampening"] != 0):
            raise InvalidValueError("SGD: nesterov=True needs momentum > 0 and dampening 0")

    def _slots(self, group: dict) -> tuple:
        return ("momentum_buffer" if group["momentum"] != 0.0 else None,)

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        return dict(lr=g["lr"], momentum=g["momentum"], dampening=g["dampening"],
                    wd=g["weight_decay"], momentum_buffer=g["momentum"] != 0.0,
                    nesterov=g["nesterov"], first=first, maximize=g["maximize"])


def adam_hyper(lr, betas, eps, weight_decay, step, decoupled) -> dict:
    """The scalars of one Adam or AdamW update (``kernel_ops.OPTIM_HYPER["adam"]``); step
    counts from 1."""
    return dict(beta1=betas[0], beta2=betas[1], one_minus_beta1=1.0 - betas[0],
                one_minus_beta2=1.0 - betas[1], eps=eps,
                l2=0.0 if decoupled else weight_decay,
                decay=1.0 - lr * weight_decay if decoupled else 1.0,
                step_size=lr / (1.0 - betas[0] ** step),
                bc2_sqrt=math.sqrt(1.0 - betas[1] ** step))


class Adam(_Base):
    """Adam, as ``torch.optim.Adam`` (weight decay as an L2 term in the gradient, or with
    ``decoupled_weight_decay`` AdamW's); ``amsgrad`` keeps the running maximum of the second
    moment."""

    rule, _fn = "adam", "Adam"
    _defaults = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                     maximize=False, decoupled_weight_decay=False)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 decoupled_weight_decay: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas) if isinstance(betas, list)
                                      else betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _slots(self, group: dict) -> tuple:
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq" if group["amsgrad"] else None)

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        return dict(adam_hyper(g["lr"], g["betas"], g["eps"], g["weight_decay"],
                               state["step"], g["decoupled_weight_decay"]),
                    amsgrad=g["amsgrad"], maximize=g["maximize"])


class AdamW(Adam):
    """Adam with decoupled weight decay (the weight shrinks by lr * weight_decay each step),
    as ``torch.optim.AdamW``; its default weight_decay is 0.01."""

    _fn = "AdamW"
    _defaults = {**Adam._defaults, "weight_decay": 1e-2, "decoupled_weight_decay": True}

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)


class RMSprop(_Base):
    """RMSprop, as ``torch.optim.RMSprop``: the gradient divided by the root of a running
    mean of its square (``centered``: of its variance), with optional momentum."""

    rule, _fn = "rmsprop", "RMSprop"
    _defaults = dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                     centered=False, maximize=False)

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _check_more(self, h: dict, name) -> None:
        checks.number("RMSprop", name("alpha"), h["alpha"], 0.0, 1.0)
        checks.number("RMSprop", name("momentum"), h["momentum"], 0.0)

    def _slots(self, group: dict) -> tuple:
        return ("square_avg", "momentum_buffer" if group["momentum"] > 0 else None,
                "grad_avg" if group["centered"] else None)

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        return dict(alpha=g["alpha"], one_minus_alpha=1.0 - g["alpha"], eps=g["eps"],
                    l2=g["weight_decay"], lr=g["lr"], momentum=g["momentum"],
                    momentum_buffer=g["momentum"] > 0, centered=g["centered"],
                    maximize=g["maximize"])


class Adagrad(_Base):
    """Adagrad, as ``torch.optim.Adagrad``: the gradient divided by the root of the sum of
    its squares so far, the rate lr / (1 + (step - 1) lr_decay)."""

    rule, _fn = "adagrad", "Adagrad"
    _defaults = dict(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                     eps=1e-10, maximize=False)

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))

    def _check_more(self, h: dict, name) -> None:
        checks.number("Adagrad", name("lr_decay"), h["lr_decay"], 0.0)
        checks.number("Adagrad", name("initial_accumulator_value"),
                      h["initial_accumulator_value"], 0.0)

    def _slots(self, group: dict) -> tuple:
        return ("sum",)

    def _initial(self, group: dict, name: str) -> float:
        return group["initial_accumulator_value"]

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        return dict(l2=g["weight_decay"], eps=g["eps"], maximize=g["maximize"],
                    clr=g["lr"] / (1 + (state["step"] - 1) * g["lr_decay"]))


class Adamax(_Base):
    """Adamax, as ``torch.optim.Adamax``: Adam with the infinity norm, u = max(beta2 u,
    |g| + eps), the step lr / (1 - beta1^t) m / u."""

    rule, _fn = "adamax", "Adamax"
    _defaults = dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False)

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _slots(self, group: dict) -> tuple:
        return ("exp_avg", "exp_inf")

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        beta1, beta2 = g["betas"]
        return dict(one_minus_beta1=1.0 - beta1, beta2=beta2, eps=g["eps"],
                    l2=g["weight_decay"], maximize=g["maximize"],
                    step_size=g["lr"] / (1.0 - beta1 ** state["step"]))


def _decay(g: dict) -> dict:
    """The weight-decay scalars of NAdam and RAdam (decoupled or an L2 term)."""
    wd = g["weight_decay"]
    if g["decoupled_weight_decay"]:
        return dict(l2=0.0, decay=1.0 - g["lr"] * wd)
    return dict(l2=wd, decay=1.0)


class NAdam(_Base):
    """NAdam, as ``torch.optim.NAdam``: Adam with Nesterov momentum, the momentum warmed up
    by mu_t = beta1 (1 - 0.96^(t momentum_decay) / 2); ``decoupled_weight_decay`` as
    AdamW's."""

    rule, _fn = "nadam", "NAdam"
    _defaults = dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                     momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False)

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _check_more(self, h: dict, name) -> None:
        checks.number("NAdam", name("momentum_decay"), h["momentum_decay"], 0.0)

    def _slots(self, group: dict) -> tuple:
        return ("exp_avg", "exp_avg_sq")

    @staticmethod
    def _mu(g: dict, step: int) -> float:
        return g["betas"][0] * (1.0 - 0.5 * 0.96 ** (step * g["momentum_decay"]))

    def _key_extra(self, group: dict, state: dict, step: int) -> tuple:
        # (parameters share a dispatch only with the same running product of mu)
        return (state.get("mu_product", 1.0) * self._mu(group, step),)

    def _advance(self, group: dict, state: dict) -> None:
        state["mu_product"] = state.get("mu_product", 1.0) * self._mu(group, state["step"])

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        step, (beta1, beta2) = state["step"], g["betas"]
        mu, mu_next = self._mu(g, step), self._mu(g, step + 1)
        product, lr = state["mu_product"], g["lr"]
        return dict(one_minus_beta1=1.0 - beta1, beta2=beta2, one_minus_beta2=1.0 - beta2,
                    eps=g["eps"], maximize=g["maximize"], **_decay(g),
                    grad_coef=lr * (1.0 - mu) / (1.0 - product),
                    m_coef=lr * mu_next / (1.0 - product * mu_next),
                    bc2_sqrt=math.sqrt(1.0 - beta2 ** step))


class RAdam(_Base):
    """RAdam, as ``torch.optim.RAdam``: Adam whose adaptive term is rectified, and left out
    while the variance is intractable (rho_t <= 5, the first steps); ``decoupled_weight_decay``
    as AdamW's."""

    rule, _fn = "radam", "RAdam"
    _defaults = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                     decoupled_weight_decay=False, maximize=False)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _slots(self, group: dict) -> tuple:
        return ("exp_avg", "exp_avg_sq")

    def _hyper(self, g: dict, state: dict, first: bool) -> dict:
        step, (beta1, beta2), lr = state["step"], g["betas"], g["lr"]
        bc1, bc2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        rho_t = rho_inf - 2.0 * step * beta2 ** step / bc2
        rectified = rho_t > 5.0
        if rectified:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                             ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            step_size = lr * rect * math.sqrt(bc2) / bc1
        else:
            step_size = lr / bc1
        return dict(one_minus_beta1=1.0 - beta1, beta2=beta2, one_minus_beta2=1.0 - beta2,
                    eps=g["eps"], maximize=g["maximize"], rectified=rectified, **_decay(g),
                    step_size=step_size)


def optimizer_sgd(params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                  nesterov=False) -> SGD:
    """An SGD optimizer (``dg.optim.SGD``; its arguments in PyTorch's order)."""
    return SGD(params, lr, momentum, dampening, weight_decay, nesterov)


def optimizer_adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0) -> Adam:
    """An Adam optimizer (``dg.optim.Adam``)."""
    return Adam(params, lr, betas, eps, weight_decay)


def optimizer_adamw(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                    weight_decay=1e-2) -> AdamW:
    """An AdamW optimizer (``dg.optim.AdamW``)."""
    return AdamW(params, lr, betas, eps, weight_decay)
