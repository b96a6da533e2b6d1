"""Optimizers (SGD, Adam, AdamW) and gradient clipping (schedules: ``schedules.py``).

The optimizer classes hold the state; the arithmetic is one fused kernel per parameter on the
active backend (``adam_step`` / ``sgd_step``), which updates the weight and its state in
place, so on gpu neither ever leaves the device. The update rules are PyTorch's, as its
documentation states them; per-step scalars are computed here in float64.
"""
from __future__ import annotations

import math

import numpy as np

from . import capture, checks, device
from .residency import adopt, handle
from ..errors import InvalidValueError, bad_shape, bad_type, bad_value
from .tensor import Parameter, Tensor, host_array


def _params(fn: str, params):
    """(names, parameters) from a list of Parameters or a dict name -> Parameter."""
    if isinstance(params, Tensor):
        raise bad_type(fn, "params", params, "a list or dict of Parameters, not one tensor")
    if isinstance(params, dict):
        names, items = [str(k) for k in params], list(params.values())
    else:
        try:
            items = list(params)
        except TypeError:
            raise bad_type(fn, "params", params, "a list or dict of Parameters") from None
        names = [str(i) for i in range(len(items))]
    if not items:
        raise bad_value(fn, "params", params, "at least one parameter")
    seen = set()
    for name, p in zip(names, items):
        # A frozen Parameter (requires_grad False) is accepted, as in PyTorch: it gets no
        # gradient, so steps skip it until it is unfrozen.
        if not isinstance(p, Parameter) and not (isinstance(p, Tensor) and p.requires_grad):
            raise bad_type(fn, f"params[{name}]", p,
                           "a Parameter (or a tensor requiring grad)")
        if id(p) in seen:
            raise bad_value(fn, "params", f"params[{name}]",
                            "each parameter once (it appears twice)")
        seen.add(id(p))
    return names, items


def _state_tensor(backend, p: Tensor) -> Tensor:
    """A zero-filled tensor shaped like p, in p's pool (persistent for resident weights)."""
    h = backend.empty(p.shape, p.dtype, p.persistent)
    backend.fill(h, 0.0)
    return adopt(backend, Tensor(p.shape, p.dtype, persistent=p.persistent), h)


class Optimizer:
    """Base class: parameters, hyperparameters (attributes) and per-parameter state."""

    _hyper_names: tuple = ()
    _state_tensors: tuple = ()
    _good_hyper = None
    # The learning rate the first schedule made for this optimizer found (PyTorch's
    # param_group["initial_lr"]): every schedule of it starts from this rate.
    initial_lr: float | None = None

    def __init__(self, fn: str, params):
        self.param_names, self.params = _params(fn, params)
        self.state = [dict() for _ in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients (to None, or to zeros in place)."""
        backend = device.active()
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                backend.fill(handle(backend, p.grad), 0.0)
                p.grad.written()

    def _checked_hyper(self) -> None:
        """Check the hyperparameters (they may have been reassigned) unless each is the very
        object last found good: a step's check is then a comparison. (Not by value: True ==
        1; and a list is checked each time, since it may have changed in place.)"""
        values = tuple(getattr(self, name) for name in self._hyper_names)
        good = self._good_hyper
        if good is None or any(v is not g or v.__class__ is list
                               for v, g in zip(values, good)):
            self._check_hyper(dict(zip(self._hyper_names, values)))
            self._good_hyper = values

    def _ready(self):
        """(backend, [(index, param, grad handle)]) for the parameters that have a grad,
        after checking the hyperparameters."""
        self._checked_hyper()
        backend = device.active()
        todo = []
        for i, p in enumerate(self.params):
            grad = p._grad
            if grad is None:
                continue
            if grad.shape != p.shape:
                raise bad_shape("step", f"params[{self.param_names[i]}].grad",
                                grad.shape, f"the parameter's shape {p.shape}")
            todo.append((i, p, handle(backend, grad)))
        return backend, todo

    def step(self) -> None:
        """One update of every parameter that has a gradient (others are skipped)."""
        backend, todo = self._ready()
        self._update(backend, todo)
        # A recorded step replays the kernels; the step counts and the scalars they read
        # (learning rate, bias corrections) are redone here before each replay.
        capture.on_replay(lambda: self._replay_key(todo),
                          lambda: self._update(device.active(), todo))

    def _update(self, backend, todo: list) -> None:
        """The update of the parameters in ``todo`` (from ``_ready``)."""
        raise NotImplementedError

    def _replay_key(self, todo: list) -> tuple:
        """Check the hyperparameters; return which state tensors exist for ``todo`` (a
        recorded update fits only the state it was recorded with)."""
        self._checked_hyper()
        return tuple(tuple(sorted(k for k, v in self.state[i].items() if isinstance(v, Tensor)))
                     for i, _, _ in todo)

    def hyperparameters(self) -> dict:
        """The current hyperparameters by name (as state_dict() saves them)."""
        return {name: getattr(self, name) for name in self._hyper_names}

    # -- state dict -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {"step": int, name: ndarray, ...}}, "hyper": {...},
        "param_names": [...]}``; arrays are host copies."""
        state = {}
        for i, s in enumerate(self.state):
            if s:
                state[i] = {k: (v.numpy() if isinstance(v, Tensor) else v)
                            for k, v in s.items()}
        return {"state": state, "hyper": self.hyperparameters(),
                "param_names": list(self.param_names)}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore state saved by ``state_dict()``; everything is checked before any state
        changes. Restored state tensors live where the parameters live."""
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), dict):
            raise bad_type("load_state_dict", "state_dict", state_dict,
                           "a dict made by Optimizer.state_dict()")
        if len(state_dict.get("param_names", [])) != len(self.params):
            raise InvalidValueError(
                f"load_state_dict: the state is for {len(state_dict.get('param_names', []))} "
                f"parameters; this optimizer has {len(self.params)}")
        staged = []
        for key, entry in state_dict["state"].items():
            try:
                i = int(key)
            except (TypeError, ValueError):
                raise bad_value("load_state_dict", "state", key,
                                "parameter indices as keys") from None
            if not isinstance(entry, dict):
                raise bad_type("load_state_dict", f"state[{key}]", entry, "a dict")
            if not 0 <= i < len(self.params):
                raise bad_value("load_state_dict", "state", key,
                                f"parameter indices in [0, {len(self.params)})")
            p, arrays = self.params[i], {}
            for name in self._state_tensors:
                if name not in entry:
                    continue
                value = host_array("load_state_dict", f"state[{i}][{name}]", entry[name],
                                   p.dtype)
                if value.shape != p.shape:
                    raise bad_shape("load_state_dict", f"state[{i}][{name}]", value.shape,
                                    f"the parameter's shape {p.shape}")
                arrays[name] = value
            staged.append((i, entry, arrays))
        hyper = state_dict.get("hyper", {})
        self._check_hyper({**self.hyperparameters(), **hyper})
        backend = device.active()
        for name, value in hyper.items():
            if name in self._hyper_names:
                setattr(self, name, tuple(value) if isinstance(value, list) else value)
        self.state = [dict() for _ in self.params]
        for i, entry, arrays in staged:
            p = self.params[i]
            for k, v in entry.items():
                if k not in self._state_tensors:
                    self.state[i][k] = v
            for name, value in arrays.items():
                self.state[i][name] = adopt(backend, Tensor(p.shape, p.dtype,
                                                            persistent=p.persistent),
                                            backend.upload(value, p.persistent))

    def _check_hyper(self, hyper: dict) -> None:
        pass


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (dampening, Nesterov) and weight
    decay, as ``torch.optim.SGD``."""

    _hyper_names = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
    _state_tensors = ("momentum_buffer",)

    def __init__(self, params, lr: float, momentum: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0, dampening: float = 0.0):
        hyper = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                     nesterov=nesterov)
        self._check_hyper(hyper)
        super().__init__("SGD", params)
        for name, value in hyper.items():
            setattr(self, name, value)

    def _check_hyper(self, h: dict) -> None:
        checks.number("SGD", "lr", h["lr"], 0.0)
        checks.number("SGD", "momentum", h["momentum"], 0.0)
        checks.number("SGD", "dampening", h["dampening"], 0.0, 1.0)
        checks.number("SGD", "weight_decay", h["weight_decay"], 0.0)
        checks.flag("SGD", "nesterov", h["nesterov"])
        if h["nesterov"] and (h["momentum"] <= 0 or h["dampening"] != 0):
            raise InvalidValueError("SGD: nesterov=True needs momentum > 0 and dampening 0")

    def _replay_key(self, todo: list) -> tuple:
        return super()._replay_key(todo) + (self.momentum != 0.0,)

    def _update(self, backend, todo: list) -> None:
        # Parameters whose momentum buffer is new (first) and the others: one sgd_steps each.
        groups: dict = {}
        changed = []
        for i, p, g in todo:
            state = self.state[i]
            buf, first = None, False
            changed.append(p)
            if self.momentum != 0.0:
                first = "momentum_buffer" not in state
                if first:
                    state["momentum_buffer"] = _state_tensor(backend, p)
                buf = handle(backend, state["momentum_buffer"])
                changed.append(state["momentum_buffer"])
            groups.setdefault(first, []).append((handle(backend, p), g, buf))
        for first, params in groups.items():
            backend.sgd_steps(params, dict(lr=self.lr, momentum=self.momentum,
                                           dampening=self.dampening, wd=self.weight_decay,
                                           nesterov=bool(self.nesterov), first=first))
        for t in changed:
            t.written()


class Adam(Optimizer):
    """Adam (``decoupled=False``, weight decay as an L2 term in the gradient) as
    ``torch.optim.Adam``; see AdamW for decoupled weight decay."""

    _hyper_names = ("lr", "betas", "eps", "weight_decay")
    _state_tensors = ("exp_avg", "exp_avg_sq")
    _decoupled = False
    _fn = "Adam"

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        hyper = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self._check_hyper(hyper)
        super().__init__(self._fn, params)
        self.lr, self.eps, self.weight_decay = float(lr), float(eps), float(weight_decay)
        self.betas = (float(betas[0]), float(betas[1]))

    def _check_hyper(self, h: dict) -> None:
        checks.number(self._fn, "lr", h["lr"], 0.0)
        checks.number(self._fn, "eps", h["eps"], 0.0)
        checks.number(self._fn, "weight_decay", h["weight_decay"], 0.0)
        betas = h["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise bad_value(self._fn, "betas", betas, "a pair (beta1, beta2)")
        for k, b in enumerate(betas):
            checks.number(self._fn, f"betas[{k}]", b, 0.0, 1.0, hi_open=True)

    def _update(self, backend, todo: list) -> None:
        # Parameters at the same step count share their scalars: one adam_steps each.
        groups: dict = {}
        changed = []
        for i, p, g in todo:       # a skipped parameter's step count does not advance
            state = self.state[i]
            if not state:
                state.update(step=0, exp_avg=_state_tensor(backend, p),
                             exp_avg_sq=_state_tensor(backend, p))
            state["step"] += 1
            changed += (p, state["exp_avg"], state["exp_avg_sq"])
            group = groups.setdefault(state["step"], [])
            group.append((handle(backend, p), g, handle(backend, state["exp_avg"]),
                          handle(backend, state["exp_avg_sq"])))
        for step, params in groups.items():
            backend.adam_steps(params, adam_hyper(self.lr, self.betas, self.eps,
                                                  self.weight_decay, step, self._decoupled))
        for t in changed:
            t.written()


class AdamW(Adam):
    """Adam with decoupled weight decay (the weight shrinks by lr * weight_decay each step),
    as ``torch.optim.AdamW``; its default weight_decay is 0.01."""

    _decoupled = True
    _fn = "AdamW"

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)


def adam_hyper(lr, betas, eps, weight_decay, step, decoupled) -> dict:
    """The scalars of one Adam or AdamW update (``backend.ADAM_HYPER``); step counts from 1."""
    return dict(beta1=betas[0], beta2=betas[1], one_minus_beta1=1.0 - betas[0],
                one_minus_beta2=1.0 - betas[1], eps=eps,
                l2=0.0 if decoupled else weight_decay,
                decay=1.0 - lr * weight_decay if decoupled else 1.0,
                step_size=lr / (1.0 - betas[0] ** step),
                bc2_sqrt=math.sqrt(1.0 - betas[1] ** step))


def optimizer_sgd(params, lr, momentum=0.0, nesterov=False, weight_decay=0.0,
                  dampening=0.0) -> SGD:
    """An SGD optimizer (``dg.optim.SGD``)."""
    return SGD(params, lr, momentum, nesterov, weight_decay, dampening)


def optimizer_adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0) -> Adam:
    """An Adam optimizer (``dg.optim.Adam``)."""
    return Adam(params, lr, betas, eps, weight_decay)


def optimizer_adamw(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                    weight_decay=1e-2) -> AdamW:
    """An AdamW optimizer (``dg.optim.AdamW``)."""
    return AdamW(params, lr, betas, eps, weight_decay)


# ---------------------------------------------------------------------------------------------
# Gradient clipping

def clip_grad_norm(params, max_norm: float) -> Tensor:
    """Scale the gradients of ``params`` in place so that their joint L2 norm is at most
    ``max_norm`` (as ``torch.nn.utils.clip_grad_norm_``: coefficient
    max_norm / (norm + 1e-6), capped at 1). Returns the norm before clipping as a 0-d
    tensor; computed on the device, nothing is downloaded."""
    params = _parameter_list("clip_grad_norm", params)
    max_norm = checks.number("clip_grad_norm", "max_norm", max_norm, 0.0, lo_open=True)
    backend = device.active()
    grads = [p.grad for p in params if p.grad is not None]
    total_sq = None
    for g in grads:
        h = handle(backend, g)
        sq = backend.reduce("sum", backend.binary("mul", h, h), tuple(range(len(h.shape))))
        total_sq = sq if total_sq is None else backend.binary("add", total_sq, sq)
    dtype = grads[0].dtype if grads else np.dtype(np.float32)
    if total_sq is None:
        total_sq = backend.upload(np.zeros((), dtype))
    total = backend.unary("sqrt", total_sq)
    coef = backend.unary("rdiv_scalar", backend.unary("add_scalar", total, 1e-6), max_norm)
    coef = backend.unary("clamp", coef, -math.inf, 1.0)
    for g in grads:
        h = handle(backend, g)
        backend.binary("mul", h, coef, out=h)
        g.written()
    return adopt(backend, Tensor((), dtype), total)


def clip_grad_value(params, clip_value: float) -> None:
    """Clamp every gradient of ``params`` to [-clip_value, clip_value] in place, as
    ``torch.nn.utils.clip_grad_value_`` (NaN stays NaN); on the device, nothing is
    downloaded."""
    params = _parameter_list("clip_grad_value", params)
    clip = checks.number("clip_grad_value", "clip_value", clip_value, 0.0)
    backend = device.active()
    for p in params:
        if p.grad is not None:
            h = handle(backend, p.grad)
            backend.unary("clamp", h, -clip, clip, out=h)
            p.grad.written()


def _parameter_list(fn: str, params) -> list:
    """``params`` (a list, a dict or one Parameter) as a list of Tensors, checked."""
    if isinstance(params, dict):
        params = list(params.values())
    elif isinstance(params, Tensor):
        params = [params]
    else:
        try:
            params = list(params)
        except TypeError:
            raise bad_type(fn, "params", params, "a list or dict of Parameters") from None
    for k, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise bad_type(fn, f"params[{k}]", p, "a Parameter")
    return params
