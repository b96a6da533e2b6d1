"""Step capture and replay: ``capture_step(fn)`` records a whole training step once and
replays it with each new batch, as CUDA graphs or tinygrad's TinyJit do.

The front end's part is backend-agnostic: it turns the arguments into arrays, keys
recordings by their shapes and dtypes, and collects what a replay must redo on the host.
The backend's ``capture(run, args)`` runs the step once and returns a replay object: on gpu
the step's commands recorded into one reusable command buffer, on cpu (or where a step
cannot be recorded) an object whose replay runs the step again.

What a replay redoes on the host, registered while the step is captured:

- ``on_replay(check, run)``: an optimizer's bookkeeping (step counts, the learning rate a
  schedule set) whose scalars the recorded kernels read from a small device buffer.
  ``check()`` raises on bad hyperparameters before anything changes and returns a key of
  what the recording depends on (which state exists, a module's mode): when it differs
  from the key at capture, the step is recorded anew. ``run()`` writes the new scalars.
- ``check_input(array, check)``: a value check an op made on an argument (class indices
  in range), made again on each new batch before it is uploaded.
"""
from __future__ import annotations

import functools
import threading
import weakref

import numpy as np

from . import checks, device
from .errors import ArgumentTypeError, InvalidValueError, bad_type
from .tensor import Tensor

_local = threading.local()
MAX_SHAPES = 4                    # recordings kept per step (one per argument signature)


class _Capturing:
    """What the host must redo at each replay, collected while a step is captured."""

    def __init__(self, args: list):
        self.args = args
        self.hooks: list = []          # (check, run or None, key at capture)
        self.input_checks: list = []   # (argument index, check)


def on_replay(check, run=None) -> None:
    """While a step is being captured: before each replay, ``check()`` (a key that must
    equal its value now, else the step is recorded anew), then ``run()``."""
    current = getattr(_local, "capturing", None)
    if current is not None:
        current.hooks.append((check, run, check()))


def check_input(array, check) -> None:
    """While a step is being captured: if ``array`` is one of its arguments, apply
    ``check`` to that argument of each later call before it is replayed."""
    current = getattr(_local, "capturing", None)
    if current is not None:
        for k, arg in enumerate(current.args):
            if arg is array:
                current.input_checks.append((k, check))


def _as_input(k: int, value) -> np.ndarray:
    """Argument k as a C-contiguous float32 (real input) or int32 (integer input) array."""
    if isinstance(value, (str, bytes)) or value is None or isinstance(value, Tensor):
        raise bad_type("capture_step", f"args[{k}]", value,
                       "a NumPy array of the batch (not a tensor or a string)")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise bad_type("capture_step", f"args[{k}]", value, "a NumPy array") from None
    if array.dtype.kind in "biu":
        dtype = np.int32
        if array.size and (array.min() < -2 ** 31 or array.max() >= 2 ** 31):
            raise InvalidValueError(f"capture_step: argument 'args[{k}]' holds integers "
                                    "beyond int32")
    elif array.dtype.kind == "f":
        dtype = np.float32
    else:
        raise ArgumentTypeError(f"capture_step: argument 'args[{k}]' has dtype {array.dtype};"
                                " expected real numbers")
    return np.ascontiguousarray(array, dtype=dtype)


class CapturedStep:
    """A training step that is recorded once and replayed (see ``capture_step``)."""

    def __init__(self, fn, warmup: int = 1):
        if not callable(fn):
            raise bad_type("capture_step", "fn", fn, "a callable fn(*batch) -> loss")
        self.fn = fn
        self.warmup = checks.integer("capture_step", "warmup", warmup, 0)
        self.calls = 0
        self.captures = 0             # how many times the step was recorded
        self.replays = 0
        self._recordings: dict = {}   # signature -> (replay object, _Capturing)
        # Free the recordings with the step (not at exit: the device may be gone).
        weakref.finalize(self, _close_all, self._recordings).atexit = False

    def __call__(self, *args):
        arrays = [_as_input(k, a) for k, a in enumerate(args)]
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        backend = device.active()
        found = self._recordings.get(key)
        if found is not None:
            replay, capturing = found
            if replay.usable(backend):
                for k, check in capturing.input_checks:
                    check(arrays[k])
                if all(check() == expected for check, _, expected in capturing.hooks):
                    self.calls += 1
                    self.replays += 1
                    return replay.replay(arrays, [run for _, run, _ in capturing.hooks
                                                  if run is not None])
            del self._recordings[key]
            replay.close()
        self.calls += 1
        if self.calls <= self.warmup:
            return self.fn(*arrays)
        capturing = _Capturing(arrays)
        result, replay = backend.capture(functools.partial(_run, self.fn, capturing), arrays)
        self.captures += 1
        if len(self._recordings) >= MAX_SHAPES:
            oldest = next(iter(self._recordings))
            self._recordings.pop(oldest)[0].close()
        self._recordings[key] = (replay, capturing)
        return result

    @property
    def replayable(self) -> bool:
        """Whether the latest recording replays recorded commands (False on cpu, or when
        the step could not be recorded; ``reason`` says why)."""
        return bool(self._recordings) and list(self._recordings.values())[-1][0].replayable

    @property
    def reason(self) -> str:
        """Why the latest recording runs the step again rather than replaying it ("" if
        it replays)."""
        return list(self._recordings.values())[-1][0].reason if self._recordings else ""

    def close(self) -> None:
        """Free the recordings (their device memory and command buffers)."""
        _close_all(self._recordings)


def _run(fn, capturing: _Capturing, arrays: list):
    """Run the step; while it is captured (not when a replay object runs it again),
    collect what replays redo."""
    if getattr(_local, "capturing", None) is not None or capturing.args is not arrays:
        return fn(*arrays)
    _local.capturing = capturing
    try:
        return fn(*arrays)
    finally:
        _local.capturing = None


def _close_all(recordings: dict) -> None:
    for replay, _ in list(recordings.values()):
        replay.close()
    recordings.clear()


def capture_step(fn=None, *, warmup: int = 1):
    """Record a training step once and replay it with each new batch.

    ``fn(*batch)`` runs one whole step — forward under ``with_grad_tape()``, ``backward``,
    ``optimizer.step()``, ``optimizer.zero_grad()`` — and returns the loss tensor (or
    None). Its arguments are NumPy arrays, passed to ``fn`` as float32 (real input) or
    int32 (integer input). The first ``warmup`` calls run eagerly (the optimizer makes its
    state); the next call is recorded, and later calls with arguments of the same shapes
    and dtypes replay the recording: the new batch is uploaded into the recorded input
    buffers, the optimizers' per-step scalars (step counts, learning rates) into a small
    buffer, and the recorded commands are submitted. Arguments of other shapes are
    recorded anew (a few signatures are kept). Use as ``step = capture_step(fn)`` or as a
    decorator, ``@capture_step`` or ``@capture_step(warmup=2)``.
    """
    if fn is None:
        return lambda f: CapturedStep(f, warmup)
    return CapturedStep(fn, warmup)
