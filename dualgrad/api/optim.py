"""The optimizer base (parameter groups, state, state dicts, capture) and gradient clipping;
the optimizers themselves are ``optimizers.py``, the schedules ``schedules.py``.

An optimizer's arithmetic is one fused kernel per rule on the active backend
(``backend.optim_steps``), which updates the weights and their state in place, so on gpu
neither ever leaves the device. Per-step scalars are computed here in float64.
"""
from __future__ import annotations

import math

import numpy as np

from . import capture, checks, device
from .residency import adopt, handle
from ..errors import ArgumentTypeError, InvalidValueError, bad_shape, bad_type, bad_value
from ..kernel_ops import OPTIM_STATE
from .tensor import LOW_PRECISION, Parameter, Tensor, host_array

def _group_params(fn: str, where: str, params, offset: int):
    """(names, parameters) of one group from a list of Parameters or a dict name ->
    Parameter; list entries are named by their index among all the optimizer's."""
    if isinstance(params, Tensor):
        raise bad_type(fn, where, params, "a list or dict of Parameters, not one tensor")
    if isinstance(params, dict):
        names, items = [str(k) for k in params], list(params.values())
    else:
        try:
            items = list(params)
        except TypeError:
            raise bad_type(fn, where, params, "a list or dict of Parameters") from None
        names = [str(offset + i) for i in range(len(items))]
    if not items:
        raise bad_value(fn, where, params, "at least one parameter")
    for name, p in zip(names, items):
        # A frozen Parameter (requires_grad False) is accepted, as in PyTorch: it gets no
        # gradient, so steps skip it until it is unfrozen.
        if not isinstance(p, Parameter) and not (isinstance(p, Tensor) and p.requires_grad):
            raise bad_type(fn, f"params[{name}]", p, "a Parameter (or a tensor requiring grad)")
        _check_updatable(fn, f"params[{name}]", p)
    return names, items


def _check_updatable(fn: str, name: str, p: Tensor) -> None:
    """The fused updates are float32 (and float64 on the cpu) kernels: a 16-bit parameter
    (a model converted with ``Module.to``) is refused, where PyTorch would update it."""
    if p.dtype in LOW_PRECISION:
        raise ArgumentTypeError(f"{fn}: argument '{name}' is a {p.dtype} parameter; the "
                                "optimizers update float32 and float64 ones (train in 16 "
                                "bits with float32 parameters under dg.autocast)")


def _is_group_list(params) -> bool:
    return isinstance(params, (list, tuple)) and bool(params) and \
        all(isinstance(g, dict) for g in params)


def _state_tensor(backend, p: Tensor, value: float = 0.0) -> Tensor:
    """A tensor shaped like p filled with ``value``, in p's pool (persistent for resident
    weights)."""
    h = backend.empty(p.shape, p.dtype, p.persistent)
    backend.fill(h, value)
    return adopt(backend, Tensor(p.shape, p.dtype, persistent=p.persistent), h)


class Optimizer:
    """Base class, as ``torch.optim.Optimizer``: ``param_groups`` (each a dict of its
    "params" and its hyperparameters), per-parameter ``state``, ``step()``,
    ``zero_grad()``, ``add_param_group()``, ``state_dict()`` and ``load_state_dict()``.

    ``params`` is a list (or dict name -> Parameter) of parameters, or a list of group
    dicts such as ``[{"params": head, "lr": 1e-2}, {"params": body}]``, whose missing
    hyperparameters come from the constructor's arguments. ``opt.lr`` (and each other
    hyperparameter) reads the value every group shares and sets it in every group.

    A subclass names its kernel ``rule`` (``kernel_ops.OPTIM``), its ``_defaults``, and
    defines ``_check`` (one group's hyperparameters), ``_slots`` (the names of the state
    tensors the kernel takes) and ``_hyper`` (the kernel's scalars for one update)."""

    rule = ""
    _fn = "Optimizer"
    _defaults: dict = {}
    _counts_steps = True           # keeps state["step"] (SGD does not, as in PyTorch)

    def __init__(self, params, defaults: dict):
        self._check(defaults, "")
        object.__setattr__(self, "defaults", dict(defaults))
        object.__setattr__(self, "param_groups", [])
        self.params, self.param_names, self.state, self._group_of = [], [], [], []
        self._good = []              # per group: the values last found good
        groups = params if _is_group_list(params) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    # -- groups and hyperparameters ----------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with "params" and any hyperparameters; the
        rest come from ``defaults``), as PyTorch's; checked before anything changes."""
        fn, k = f"{self._fn}.add_param_group", len(self.param_groups)
        if not isinstance(param_group, dict) or "params" not in param_group:
            raise bad_type(fn, "param_group", param_group, 'a dict with a "params" entry')
        unknown = set(param_group) - set(self._defaults) - {"params", "initial_lr"}
        if unknown:
            raise bad_value(fn, "param_group", sorted(unknown)[0],
                            "hyperparameters of " + self._fn + ": " + ", ".join(self._defaults))
        where = "params" if k == 0 else f"param_groups[{k}]['params']"
        names, items = _group_params(self._fn, where, param_group["params"], len(self.params))
        group = {**self.defaults, **{n: v for n, v in param_group.items() if n != "params"}}
        self._check(group, "" if k == 0 and not self.param_groups else f"param_groups[{k}]")
        seen = {id(p) for p in self.params}
        for name, p in zip(names, items):
            if id(p) in seen:
                raise bad_value(self._fn, "params", f"params[{name}]",
                                "each parameter once, in one group (it appears twice)")
            seen.add(id(p))
        group["params"] = items
        for name in ("betas",):
            if isinstance(group.get(name), list):
                group[name] = tuple(group[name])
        self.param_groups.append(group)
        self._good.append(None)
        self.params += items
        self.param_names += names
        self.state += [dict() for _ in items]
        self._group_of += [k] * len(items)

    def __getattr__(self, name):
        # (only called when ordinary lookup fails: a hyperparameter's shared value)
        if name in type(self)._defaults and "param_groups" in self.__dict__:
            values = [g[name] for g in self.param_groups]
            if any(v != values[0] for v in values[1:]):
                raise InvalidValueError(
                    f"{self._fn}.{name}: the parameter groups hold different values "
                    f"({values}); read param_groups[k][{name!r}]")
            return values[0]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name in type(self)._defaults and "param_groups" in self.__dict__:
            for group in self.param_groups:       # (checked by the next step, as PyTorch)
                group[name] = value
        else:
            object.__setattr__(self, name, value)

    def _check(self, group: dict, where: str) -> None:
        """Raise for a bad hyperparameter of ``group`` (``where`` prefixes the names)."""

    def _name(self, where: str, name: str) -> str:
        return f"{where}['{name}']" if where else name

    def _checked_groups(self) -> None:
        """Check every group's hyperparameters (they may have been reassigned) unless each is
        the very object last found good: a step's check is then a comparison. (Not by
        value: True == 1; and a list is checked each time, since it may have changed in
        place.)"""
        names = tuple(self._defaults)
        for k, group in enumerate(self.param_groups):
            values = tuple(group.get(n) for n in names)
            good = self._good[k]
            if good is None or any(v is not g or v.__class__ is list
                                   for v, g in zip(values, good)):
                self._check(group, "" if len(self.param_groups) == 1 else f"param_groups[{k}]")
                self._good[k] = values

    def hyperparameters(self) -> list:
        """Each group's hyperparameters by name (as state_dict() saves them)."""
        return [{n: g[n] for n in g if n != "params"} for g in self.param_groups]

    # -- stepping ----------------------------------------------------------------------------
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

    def _ready(self):
        """(backend, [(index, param, grad handle)]) for the parameters that have a grad,
        after checking the hyperparameters."""
        self._checked_groups()
        backend = device.active()
        todo = []
        for i, p in enumerate(self.params):
            grad = p._grad
            if grad is None:
                continue
            _check_updatable("step", f"params[{self.param_names[i]}]", p)
            if grad.shape != p.shape:
                raise bad_shape("step", f"params[{self.param_names[i]}].grad",
                                grad.shape, f"the parameter's shape {p.shape}")
            todo.append((i, p, handle(backend, grad)))
        return backend, todo

    def step(self) -> None:
        """One update of every parameter that has a gradient (others are skipped)."""
        backend, todo = self._ready()
        layout = self._update(backend, todo)
        # A recorded step replays its dispatches: each replay first checks that the update
        # due would make the same dispatches over the same tensors (else the step is recorded
        # anew), then redoes the step counts and the scalars they read.
        capture.on_replay(lambda: self._layout(todo),
                          lambda: self._update(device.active(), todo), key=layout)

    def _dispatch_key(self, i: int) -> tuple:
        """What parameter i's next update shares with those updated in the same dispatch:
        its group, step, whether its state is new, its state tensors and ``_key_extra``."""
        group, state = self.param_groups[self._group_of[i]], self.state[i]
        slots = self._slots(group)
        first = any(n is not None and n not in state for n in slots)
        step = state.get("step", 0) + 1 if self._counts_steps else 0
        return (self._group_of[i], step, first, slots) + self._key_extra(group, state, step)

    def _key_extra(self, group: dict, state: dict, step: int) -> tuple:
        return ()

    def _plan(self, todo: list) -> list:
        """The positions in ``todo`` of each dispatch of the next update, in order."""
        plan: dict = {}
        for at, (i, _, _) in enumerate(todo):
            plan.setdefault(self._dispatch_key(i), []).append(at)
        return list(plan.items())

    def _layout(self, todo: list) -> tuple:
        """The dispatches the next update makes: their parameters and state tensors (steps
        and scalars aside)."""
        self._checked_groups()
        return tuple((tuple(ats), key[3]) for key, ats in self._plan(todo))

    def _update(self, backend, todo: list) -> tuple:
        """The update of the parameters in ``todo`` (from ``_ready``): one optim_steps per
        dispatch of ``_plan``. Returns its ``_layout``."""
        plan = self._plan(todo)
        changed = []
        for key, ats in plan:
            group, first, slots, params = self.param_groups[key[0]], key[2], key[3], []
            for at in ats:
                i, p, g = todo[at]
                state = self.state[i]
                if first:
                    for name in slots:
                        if name is not None and name not in state:
                            state[name] = _state_tensor(backend, p, self._initial(group, name))
                if self._counts_steps:
                    state["step"] = state.get("step", 0) + 1
                self._advance(group, state)
                params.append((handle(backend, p), g,
                               tuple(handle(backend, state[n]) if n is not None else None
                                     for n in slots)))
                changed.append(p)
                changed += [state[n] for n in slots if n is not None]
            # (the parameters of a dispatch share what the scalars depend on: its key)
            hyper = self._hyper(group, self.state[todo[ats[0]][0]], first)
            backend.optim_steps(self.rule, params, hyper)
        for t in changed:
            t.written()
        return tuple((tuple(ats), key[3]) for key, ats in plan)

    def _slots(self, group: dict) -> tuple:
        """The names of the state tensors the kernel takes (OPTIM_STATE's order; None for
        one the group's options leave out)."""
        raise NotImplementedError

    def _initial(self, group: dict, name: str) -> float:
        """The value a new state tensor starts from."""
        return 0.0

    def _advance(self, group: dict, state: dict) -> None:
        """Advance a parameter's host-side state other than its step count (NAdam's)."""

    def _hyper(self, group: dict, state: dict, first: bool) -> dict:
        """The kernel's scalars and flags for one update from a parameter's state (the step
        already counted and ``_advance`` done); ``first``: its state tensors are new."""
        raise NotImplementedError

    # -- state dict -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """As PyTorch's: ``{"state": {index: {"step": int, name: ndarray, ...}},
        "param_groups": [{hyperparameters..., "params": [indices]}]}``, and
        ``"param_names"``; arrays are host copies."""
        state = {}
        for i, s in enumerate(self.state):
            if s:
                state[i] = {k: (v.numpy() if isinstance(v, Tensor) else v)
                            for k, v in s.items()}
        groups = []
        for k, g in enumerate(self.param_groups):
            entry = {n: (list(v) if isinstance(v, tuple) else v)
                     for n, v in g.items() if n != "params"}
            entry["params"] = [i for i, gk in enumerate(self._group_of) if gk == k]
            groups.append(entry)
        return {"state": state, "param_groups": groups, "param_names": list(self.param_names)}

    def _staged_groups(self, state_dict: dict) -> list:
        """The hyperparameters of each group from ``state_dict``, checked. (A state saved
        with one "hyper" dict applies it to every group.)"""
        if "param_groups" in state_dict:
            saved = state_dict["param_groups"]
            if not isinstance(saved, list) or len(saved) != len(self.param_groups):
                raise InvalidValueError(
                    f"load_state_dict: the state has {len(saved) if isinstance(saved, list) else '?'}"
                    f" parameter groups; this optimizer has {len(self.param_groups)}")
        else:
            saved = [state_dict.get("hyper", {})] * len(self.param_groups)
        staged = []
        for k, (group, entry) in enumerate(zip(self.param_groups, saved)):
            if not isinstance(entry, dict):
                raise bad_type("load_state_dict", f"param_groups[{k}]", entry, "a dict")
            mine = [i for i, gk in enumerate(self._group_of) if gk == k]
            if "params" in entry and len(entry["params"]) != len(mine):
                raise InvalidValueError(
                    f"load_state_dict: group {k} of the state has {len(entry['params'])} "
                    f"parameters; this optimizer's has {len(mine)}")
            hyper = {n: (tuple(v) if isinstance(v, list) else v) for n, v in entry.items()
                     if n in self._defaults or n == "initial_lr"}
            merged = {**group, **hyper}
            self._check(merged, "" if len(self.param_groups) == 1 else f"param_groups[{k}]")
            staged.append(hyper)
        return staged

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore state saved by ``state_dict()`` (or by a PyTorch optimizer of the same
        rule, its tensors as arrays or CPU tensors: the same keys); everything is checked
        before any state changes. Restored state tensors live where the parameters live."""
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), dict):
            raise bad_type("load_state_dict", "state_dict", state_dict,
                           "a dict made by Optimizer.state_dict()")
        count = _saved_parameters(state_dict)
        if count != len(self.params):
            raise InvalidValueError(
                f"load_state_dict: the state is for {count} parameters; this optimizer has "
                f"{len(self.params)}")
        tensor_names = OPTIM_STATE[self.rule]
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
            for name in tensor_names:
                if name not in entry:
                    continue
                value = host_array("load_state_dict", f"state[{i}][{name}]", entry[name],
                                   p.dtype)
                if value.shape != p.shape:
                    raise bad_shape("load_state_dict", f"state[{i}][{name}]", value.shape,
                                    f"the parameter's shape {p.shape}")
                arrays[name] = value
            staged.append((i, entry, arrays))
        groups = self._staged_groups(state_dict)
        backend = device.active()
        for group, hyper in zip(self.param_groups, groups):
            group.update(hyper)
        self._good = [None] * len(self.param_groups)
        self.state = [dict() for _ in self.params]
        for i, entry, arrays in staged:
            p = self.params[i]
            for k, v in entry.items():
                if k not in arrays:
                    self.state[i][k] = _plain(v)
            for name, value in arrays.items():
                self.state[i][name] = adopt(backend, Tensor(p.shape, p.dtype,
                                                            persistent=p.persistent),
                                            backend.upload(value, p.persistent))


def _saved_parameters(state_dict: dict) -> int:
    """How many parameters a state is for: its parameter names (ours), or the parameter
    indices of its groups (PyTorch's)."""
    if "param_names" in state_dict:
        return len(state_dict["param_names"])
    groups = state_dict.get("param_groups")
    if isinstance(groups, list) and all(isinstance(g, dict) and "params" in g
                                        for g in groups):
        return sum(len(g["params"]) for g in groups)
    return 0


def _plain(value):
    """A saved scalar as a Python number: PyTorch keeps a step count as a 0-d tensor."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and not getattr(value, "shape", 1):
        number = np.asarray(value).item()
        return int(number) if isinstance(number, float) and number.is_integer() else number
    return value


# ---------------------------------------------------------------------------------------------
# Gradient clipping

def clip_grad_norm(params, max_norm: float, norm_type=2.0) -> Tensor:
    """Scale the gradients of ``params`` in place so that their joint ``norm_type``-norm
    (2 by default; any positive p, or inf: the largest magnitude) is at most ``max_norm``
    (as ``torch.nn.utils.clip_grad_norm_``: coefficient max_norm / (norm + 1e-6), capped
    at 1). Returns the norm before clipping as a 0-d tensor; computed on the device,
    nothing is downloaded."""
    params = _parameter_list("clip_grad_norm", params)
    max_norm = checks.number("clip_grad_norm", "max_norm", max_norm, 0.0, lo_open=True)
    if norm_type == "inf" or (checks.is_number(norm_type) and norm_type == math.inf):
        p = math.inf
    else:
        p = checks.number("clip_grad_norm", "norm_type", norm_type, 0.0, lo_open=True)
    backend = device.active()
    grads = [g.grad for g in params if g.grad is not None]
    total = None                      # the sum of |g|^p, or for p = inf the largest |g|
    for g in grads:
        h = _wide(backend, handle(backend, g))
        axes = tuple(range(len(h.shape)))
        if p == 2.0:
            part = backend.reduce("sum_squares", h, axes)
        elif math.isinf(p):
            part = backend.reduce("max", backend.unary("abs", h), axes)
        else:
            part = backend.reduce("sum", backend.unary("pow_scalar", backend.unary("abs", h),
                                                       p), axes)
        total = part if total is None else \
            backend.binary("maximum" if math.isinf(p) else "add", total, part)
    dtype = _wide_type(grads[0].dtype) if grads else np.dtype(np.float32)
    if total is None:
        total = backend.upload(np.zeros((), dtype))
    if p == 2.0:
        total = backend.unary("sqrt", total)
    elif not math.isinf(p) and p != 1.0:
        total = backend.unary("pow_scalar", total, 1.0 / p)
    coef = backend.unary("rdiv_scalar", backend.unary("add_scalar", total, 1e-6), max_norm)
    coef = backend.unary("clamp", coef, -math.inf, 1.0)
    for g in grads:
        h = handle(backend, g)
        if h.dtype in LOW_PRECISION:     # (scaled in float32, rounded once)
            backend.copy(h, backend.cast(backend.binary("mul", _wide(backend, h), coef),
                                         h.dtype))
        else:
            backend.binary("mul", h, coef, out=h)
        g.written()
    return adopt(backend, Tensor((), dtype), total)


def _wide_type(dtype):
    return np.dtype(np.float32) if dtype in LOW_PRECISION else dtype


def _wide(backend, h):
    """A gradient's storage as float32 where it is 16-bit (the norm is taken in float32)."""
    return backend.cast(h, np.dtype(np.float32)) if h.dtype in LOW_PRECISION else h


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
