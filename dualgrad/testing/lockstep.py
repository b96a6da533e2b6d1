"""The lockstep harness: train the same model on the cpu reference and on the gpu side by
side, from the same initial weights on the same batches, and compare parameters and optimizer
state (moments, step counts) after every step.

Each tensor's divergence is normwise and relative: ``||gpu - cpu||`` over the largest
``||cpu||`` the tensor has had in the run so far, in the 2-norm. The largest so far, because
some tensors shrink through zero (a bias changing sign, Adam's first moment as gradients
cancel) while the rounding differences they carry stay the size they were. Kernels agree per call to a few float32 ULPs (about 1e-6 relative, see the tolerance
table); training carries those differences forward, and a well-conditioned model keeps them
near that size. The 2-norm, not the largest element, because Adam normalises each element's
update: an element whose gradient nearly cancels (a sum of terms of both signs) has a
gradient with few correct bits on either backend, and its update, up to lr either way, may
differ in full. Such elements are few, so they move the norm little; a kernel that computes
a different function moves most elements. The default bound, 1e-4, leaves two orders of
magnitude for growth over hundreds of steps and still catches such a kernel, which moves the
weights by a fraction of an update (lr * 1e-2 or more) within a step or two. A chaotic model
(a learning rate on the edge of divergence) may need a bound that grows with the step:
``tolerance`` may be a function of the step number.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterable

import numpy as np

from ..api import device as _device
from ..errors import bad_type, bad_value

TINY = float(np.finfo(np.float32).tiny)


@dataclasses.dataclass
class StepDivergence:
    """The divergences after one optimizer step (step 0: the initial weights)."""
    step: int
    loss: float                     # |gpu loss - cpu loss| / |cpu loss| (0 at step 0)
    tensors: dict                   # name -> divergence, for every parameter and state entry

    @property
    def worst(self) -> tuple:
        """(name, divergence) of the tensor furthest apart."""
        if not self.tensors:
            return ("", 0.0)
        name = max(self.tensors, key=self.tensors.get)
        return name, self.tensors[name]


@dataclasses.dataclass
class LockstepResult:
    """Per-step divergences, and where the run stopped if a tensor left its bound."""
    steps: list
    bound: Callable
    diverged_at: int | None = None          # the first step out of bounds
    tensor: str | None = None               # the tensor that left its bound there

    @property
    def ok(self) -> bool:
        return self.diverged_at is None

    @property
    def max_divergence(self) -> float:
        return max((max(s.worst[1], s.loss) for s in self.steps), default=0.0)

    @property
    def message(self) -> str:
        if self.ok:
            return (f"the backends agree over {len(self.steps) - 1} steps; largest divergence "
                    f"{self.max_divergence:.3g}")
        step = self.steps[-1]
        value = step.loss if self.tensor == "loss" else step.tensors[self.tensor]
        return (f"the backends diverge at step {self.diverged_at}: {self.tensor} is "
                f"{value:.3g} apart (relative), above the bound {self.bound(step.step):.3g}")

    def check(self) -> "LockstepResult":
        """Raise AssertionError (with the message) unless every step stayed in bounds."""
        if not self.ok:
            raise AssertionError(self.message)
        return self


def divergence(got, ref, scale: float = 0.0) -> float:
    """||got - ref|| / max(||ref||, scale) (2-norms), NaN-aware (NaN in one only is
    infinitely far)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        return math.inf
    if not ref.size:
        return 0.0
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    if (nan_g != nan_r).any():
        return math.inf
    with np.errstate(invalid="ignore"):
        diff = np.where(nan_g | (got == ref), 0.0, np.abs(got - ref))
    if np.isinf(diff).any():
        return math.inf
    return float(np.linalg.norm(diff) / max(norm(ref), scale, TINY))


def norm(a) -> float:
    """The 2-norm of the finite elements of ``a``."""
    a = np.asarray(a, np.float64)
    return float(np.linalg.norm(np.where(np.isfinite(a), a, 0.0)))


def default_loss(model, x, y):
    """Softmax cross-entropy for integer targets, mean squared error for float ones."""
    from ..api.losses import mse_loss, softmax_cross_entropy
    from ..api.tensor import ag_tensor
    x = np.asarray(x)
    out = model(ag_tensor(x) if x.dtype.kind == "f" else x)
    y = np.asarray(y)
    return softmax_cross_entropy(out, y) if y.dtype.kind in "iu" else mse_loss(out,
                                                                             ag_tensor(y))


class _Run:
    """One side of the lockstep: a model, its optimizer and schedule on one backend."""

    def __init__(self, backend, model, optimizer, scheduler, capture=False):
        self.backend, self.model, self.optimizer, self.scheduler = (backend, model, optimizer,
                                                                    scheduler)
        self.captured = None
        if capture:
            from ..api.capture import capture_step
            self.captured = capture_step(self._captured)

    def _train(self, loss_fn, batch, max_norm):
        """One training step; returns the loss tensor."""
        from ..api.optim import clip_grad_norm
        from ..api.tape import with_grad_tape
        with with_grad_tape():
            loss = loss_fn(self.model, *batch)
            loss.backward()
        if max_norm is not None:
            clip_grad_norm(self.optimizer.params, max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss

    def step(self, loss_fn, batch, max_norm) -> float:
        with _device.using(self.backend):
            if self.captured is None:
                value = self._train(loss_fn, batch, max_norm).item()
            else:
                self.loss_fn, self.max_norm = loss_fn, max_norm
                value = self.captured(*batch).item()
            if self.scheduler is not None:
                self.scheduler.step()
        return value

    def _captured(self, *batch):
        return self._train(self.loss_fn, batch, self.max_norm)

    def snapshot(self) -> dict:
        """Host copies of every parameter and optimizer state entry, by name."""
        with _device.using(self.backend):
            values = {f"param {k}": v for k, v in self.model.state_dict().items()}
            names = self.optimizer.param_names
            for i, entry in self.optimizer.state_dict()["state"].items():
                for key, value in entry.items():
                    values[f"state[{names[i]}].{key}"] = value
        return values


def _compare(got: dict, ref: dict, peaks: dict) -> dict:
    """Divergence per tensor; ``peaks`` (updated) holds each one's largest norm so far."""
    out = {}
    for name in ref.keys() | got.keys():
        if name not in ref or name not in got:
            out[name] = math.inf
        elif isinstance(ref[name], np.ndarray):
            peaks[name] = max(peaks.get(name, 0.0), norm(ref[name]))
            out[name] = divergence(got[name], ref[name], peaks[name])
        else:                                   # step counts and flags: exactly equal
            out[name] = 0.0 if got[name] == ref[name] else math.inf
    return out


def lockstep(model_factory: Callable, optimizer_factory: Callable, batches: Iterable, *,
             loss_fn: Callable = default_loss, scheduler_factory: Callable | None = None,
             max_norm: float | None = None, tolerance=1e-4, device: str = "gpu",
             seed: int = 0, capture: bool = False) -> LockstepResult:
    """Train on the cpu reference and on ``device`` in lockstep and compare after each step.

    ``model_factory()`` builds a ``dg.nn.Module`` (called once per backend after
    ``manual_seed(seed)``; the gpu model then gets the cpu model's weights, so the two start
    equal whatever the factory does). ``optimizer_factory(params)`` builds its optimizer,
    ``scheduler_factory(optimizer)`` an optional LR schedule. Each batch is a tuple passed as
    ``loss_fn(model, *batch)`` (default: ``default_loss(model, x, y)``). ``max_norm`` clips
    gradients before each step. ``tolerance`` bounds every tensor's divergence (a float, or a
    function of the step number). With ``capture``, each side trains through
    ``capture_step`` (recorded once and replayed on gpu; run eagerly on cpu).

    Returns a ``LockstepResult``: the divergences of step 0 (the initial weights) and of each
    step, stopping at the first step where a tensor (or the loss) is out of bounds and naming
    it. Call ``.check()`` on it to raise instead. The active backend is restored afterwards.
    """
    for name, value in (("model_factory", model_factory),
                        ("optimizer_factory", optimizer_factory), ("loss_fn", loss_fn)):
        if not callable(value):
            raise bad_type("lockstep", name, value, "a callable")
    if callable(tolerance):
        bound = tolerance
    else:
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or \
                not tolerance > 0:
            raise bad_value("lockstep", "tolerance", tolerance,
                            "a positive number or a function of the step")
        bound = lambda step, t=float(tolerance): t  # noqa: E731
    from ..api.random import manual_seed
    previous = _device.ag_device()
    _device.ag_device(device)
    try:
        runs = []
        for backend in (_device.cpu_backend(), _device.active()):
            with _device.using(backend):
                manual_seed(seed)
                model = model_factory()
                if runs:
                    model.load_state_dict(runs[0].model.state_dict())
                    model.load_extra_state(runs[0].model.extra_state())
                optimizer = optimizer_factory(model.parameters())
                scheduler = scheduler_factory(optimizer) if scheduler_factory else None
            runs.append(_Run(backend, model, optimizer, scheduler, capture))
        ref, dut = runs
        result, peaks = LockstepResult([], bound), {}
        step = StepDivergence(0, 0.0, _compare(dut.snapshot(), ref.snapshot(), peaks))
        for number, batch in enumerate(batches, start=1):
            if _judge(result, step):
                return result
            batch = batch if isinstance(batch, tuple) else (batch,)
            ref_loss = ref.step(loss_fn, batch, max_norm)
            dut_loss = dut.step(loss_fn, batch, max_norm)
            loss = divergence(dut_loss, ref_loss) if ref_loss != dut_loss else 0.0
            step = StepDivergence(number, loss, _compare(dut.snapshot(), ref.snapshot(),
                                                          peaks))
        _judge(result, step)
        return result
    finally:
        _device.ag_device(previous)


def _judge(result: LockstepResult, step: StepDivergence) -> bool:
    """Record ``step``; mark the result diverged (and return True) if it is out of bounds."""
    result.steps.append(step)
    limit = result.bound(step.step)
    if step.loss > limit:
        result.diverged_at, result.tensor = step.step, "loss"
    else:
        name, value = step.worst
        if value > limit:
            result.diverged_at, result.tensor = step.step, name
    return not result.ok
