"""``GradScaler``: dynamic loss scaling for training under ``autocast("float16")``, as
PyTorch's ``torch.amp.GradScaler``.

float16 keeps 11 significant bits down to 2^-24: small gradients rounded to it vanish. The
loss is multiplied by a large scale before the backward pass, so the gradients the
products meet are large enough; the parameters' gradients are divided by it again before
the optimizer steps. A step whose gradients hold an inf or a NaN (the scale was too large)
is skipped and the scale halved; after ``growth_interval`` steps without one it doubles.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import CallOrderError, bad_type, bad_value
from . import checks, device
from .optim import Optimizer
from .residency import handle
from .tensor import Tensor

_READY, _UNSCALED, _STEPPED = 0, 1, 2        # an optimizer's stage since the last update()


def _times(scale: float, factor: float) -> float:
    """scale * factor in float32, as PyTorch keeps and updates its scale."""
    with np.errstate(over="ignore"):
        return float(np.float32(scale) * np.float32(factor))


class GradScaler:
    """Scales the loss, unscales the gradients, skips steps whose gradients are not
    finite, and moves the scale (see the module's docstring). ``enabled=False`` makes
    every method pass its argument through (the same code trains without scaling)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        fn = "GradScaler"
        self._enabled = checks.flag(fn, "enabled", enabled)
        self._scale = checks.number(fn, "init_scale", init_scale, 0.0, lo_open=True)
        self._growth_factor = checks.number(fn, "growth_factor", growth_factor, 1.0,
                                            lo_open=True)
        self._backoff_factor = checks.number(fn, "backoff_factor", backoff_factor, 0.0, 1.0,
                                             lo_open=True, hi_open=True)
        self._growth_interval = checks.integer(fn, "growth_interval", growth_interval, 1)
        self._growth_tracker = 0
        self._stage: dict = {}         # id(optimizer) -> stage since the last update()
        self._found_inf: dict = {}     # id(optimizer) -> whether its gradients had inf/NaN

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """``outputs`` (a loss tensor, or a list or tuple of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not isinstance(outputs, Tensor):
            raise bad_type("GradScaler.scale", "outputs", outputs, "a Tensor (the loss)")
        return outputs * float(self._scale)

    def unscale_(self, optimizer: Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (on the device), and note
        whether any is inf or NaN; at most once per optimizer between updates (before
        clipping gradients, say). ``step`` does it where it was not done."""
        fn = "GradScaler.unscale_"
        if not self._enabled:
            return
        if not isinstance(optimizer, Optimizer):
            raise bad_type(fn, "optimizer", optimizer, "a dualgrad optimizer")
        stage = self._stage.get(id(optimizer), _READY)
        if stage == _UNSCALED:
            raise CallOrderError(f"{fn}: already called for this optimizer since the "
                                 "last update()")
        if stage == _STEPPED:
            raise CallOrderError(f"{fn}: step() was already called for this optimizer; "
                                 "call update() first")
        backend = device.active()
        inverse = float(np.float32(1.0 / self._scale))   # (float64's reciprocal, rounded)
        poison = None        # the sum of g * 0 over every gradient: NaN where one is not finite
        for p in optimizer.params:
            if p.grad is None:
                continue
            h = handle(backend, p.grad)
            backend.unary("mul_scalar", h, inverse, out=h)
            p.grad.written()
            zeros = backend.reduce("sum", backend.unary("mul_scalar", h, 0.0),
                                   tuple(range(len(h.shape))))
            poison = zeros if poison is None else backend.binary("add", poison, zeros)
        found = poison is not None and not np.isfinite(backend.download(poison)).all()
        self._found_inf[id(optimizer)] = bool(found)
        self._stage[id(optimizer)] = _UNSCALED

    def step(self, optimizer: Optimizer):
        """Unscale ``optimizer``'s gradients (unless ``unscale_`` did), then take its step
        unless they hold an inf or a NaN. Returns the step's result, or None when skipped."""
        if not self._enabled:
            return optimizer.step()
        if not isinstance(optimizer, Optimizer):
            raise bad_type("GradScaler.step", "optimizer", optimizer, "a dualgrad optimizer")
        if self._stage.get(id(optimizer), _READY) == _STEPPED:
            raise CallOrderError("GradScaler.step: already called for this optimizer "
                                 "since the last update()")
        if self._stage.get(id(optimizer), _READY) == _READY:
            self.unscale_(optimizer)
        self._stage[id(optimizer)] = _STEPPED
        if self._found_inf[id(optimizer)]:
            return None
        return optimizer.step()

    def update(self, new_scale: float | None = None) -> None:
        """After the step(s): halve the scale (``backoff_factor``) if any step was skipped,
        else count a good step and grow it (``growth_factor``) every ``growth_interval``
        of them; or set it to ``new_scale``."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = checks.number("GradScaler.update", "new_scale", new_scale, 0.0,
                                        lo_open=True)
        elif any(self._found_inf.values()):
            self._scale = _times(self._scale, self._backoff_factor)
            self._growth_tracker = 0
        elif self._found_inf:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                grown = _times(self._scale, self._growth_factor)
                if math.isfinite(grown):        # (not past float32's range, as PyTorch's)
                    self._scale = grown
                self._growth_tracker = 0
        self._stage.clear()
        self._found_inf.clear()

    def state_dict(self) -> dict:
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker (empty when disabled), JSON-serialisable; ``save_checkpoint(...,
        scaler=)`` keeps it."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict()`` gave (checked before anything changes)."""
        fn = "GradScaler.load_state_dict"
        if not isinstance(state, dict):
            raise bad_type(fn, "state", state, "a dict made by GradScaler.state_dict()")
        if not self._enabled:
            return
        missing = [k for k in self.state_dict() if k not in state]
        if missing:
            raise bad_value(fn, "state", sorted(state), f"the keys {sorted(self.state_dict())}")
        scale = checks.number(fn, "state['scale']", state["scale"], 0.0, lo_open=True)
        growth = checks.number(fn, "state['growth_factor']", state["growth_factor"], 1.0,
                               lo_open=True)
        backoff = checks.number(fn, "state['backoff_factor']", state["backoff_factor"], 0.0,
                                1.0, lo_open=True, hi_open=True)
        interval = checks.integer(fn, "state['growth_interval']", state["growth_interval"], 1)
        tracker = checks.integer(fn, "state['_growth_tracker']", state["_growth_tracker"], 0)
        self._scale, self._growth_factor, self._backoff_factor = scale, growth, backoff
        self._growth_interval, self._growth_tracker = interval, tracker
