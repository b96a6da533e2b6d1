"""Step capture and replay: ``capture_step(fn)`` records a whole training step once and
replays it with each new batch, as CUDA graphs or tinygrad's TinyJit do.

The front end's part is backend-agnostic: it turns the arguments into arrays, keys
recordings by their shapes and dtypes, collects what a replay must redo on the host, and
watches the tensors the step uses. The backend's ``record(args)`` gives a recording of the
step's device commands (on gpu: ``dualgrad.gpu.capture.Recording``), or None where nothing
is recorded (on cpu, and where a step cannot be recorded, each replay runs the step again:
``EagerReplay``).

What a replay redoes on the host, registered while the step is recorded:

- ``on_replay(check, run)``: an optimizer's bookkeeping (step counts, the learning rate a
  schedule set) whose scalars the recorded kernels read from a small device buffer.
  ``check()`` raises on bad hyperparameters before anything changes and returns a key of
  what the recording depends on (which state exists, a module's mode): when it differs
  from the key at recording, the step is recorded anew. ``run()`` writes the new scalars.
- ``check_input(array, check)``: a value check an op made on an argument (class indices
  in range), made again on each new batch before it is uploaded.

What the front end watches (``_Step``, told by ``residency``): every tensor that existed
before the step and that the step used (a replay needs each to keep its storage, gradient
and requires_grad), the tensors the step made, and whether it made persistent state.
"""
from __future__ import annotations

import threading
import warnings
import weakref

import numpy as np

from ..errors import ArgumentTypeError, DualgradWarning, InvalidValueError, bad_type
from . import checks, device
from .scopes import Scope
from .tensor import Tensor


class _Local(threading.local):
    step = None                   # the _Step being recorded in this thread


local = _Local()
steps_running = 0                 # steps being recorded, in all threads (a cheap first test)
_count_lock = threading.Lock()
MAX_SHAPES = 4                    # recordings kept per step (one per argument signature)


class _Step:
    """What the host must redo at each replay, and what the step did to tensors,
    collected while it runs to be recorded."""

    def __init__(self, args: list):
        self.args = args
        self.hooks: list = []          # (check, run or None, key at recording)
        self.input_checks: list = []   # (argument index, check)
        self.recording = None          # the backend's recording, if any
        self.existing: list = []       # (tensor ref, storage, grad, requires_grad)
        self._seen: set = set()        # ids of tensors noted
        self._new_persistent: list = []    # refs to tensors given new persistent storage

    def run(self, fn):
        """fn(*args), with this step collecting (not inside another step's run)."""
        global steps_running
        if local.step is not None:
            return fn(*self.args)
        local.step = self
        with _count_lock:
            steps_running += 1
        try:
            return fn(*self.args)
        finally:
            with _count_lock:
                steps_running -= 1
            local.step = None

    # -- told by residency ---------------------------------------------------------------------
    def used(self, t: Tensor) -> None:
        """``t``'s device storage was used: remember it if it existed before the step."""
        if id(t) not in self._seen:
            self._seen.add(id(t))
            self.existing.append((weakref.ref(t), t.ptr, t._grad, t.requires_grad))

    def made(self, t: Tensor) -> None:
        """``t`` was made by the step, sharing another tensor's storage (a stand-in)."""
        self._seen.add(id(t))

    def adopted(self, t: Tensor, h) -> None:
        """``t`` was made (or given new storage) by the step."""
        self._seen.add(id(t))
        if h.scope == "persistent":
            self._new_persistent.append(weakref.ref(t))

    def stop(self, reason: str, once: bool = False) -> None:
        """What the step does next cannot be replayed (``once``: it will not recur)."""
        if self.recording is not None:
            self.recording.stop(f"the step cannot be replayed: {reason}", once)

    # -- at its end ---------------------------------------------------------------------------
    def verdict(self, result) -> tuple:
        """(reason, once): why a step that returned ``result`` cannot be replayed ("" if
        it can), and whether the reason will recur."""
        if result is not None and (not isinstance(result, Tensor) or result.ptr is None):
            return "the step returns something other than a tensor it computed", False
        if not all(r() is not None and r()._grad is grad for r, _, grad, _ in self.existing):
            return ("the step leaves gradients other than it found them: end it with "
                    "optimizer.zero_grad()"), False
        if any(r() is not None for r in self._new_persistent):
            return "the step made new persistent state (optimizer state on a first step)", True
        return "", False

    def unchanged(self, backend) -> bool:
        """Whether every tensor the step found still has the same live storage, gradient
        and requires_grad."""
        for ref, ptr, grad, requires in self.existing:
            t = ref()
            if (t is None or t.ptr is not ptr or not backend.owns(ptr) or t._grad is not grad
                    or t.requires_grad != requires):
                return False
        return True


def on_replay(check, run=None, key=None) -> None:
    """While a step is being recorded: before each replay, ``check()`` (a key that must
    equal ``key``, by default its value now, else the step is recorded anew), then
    ``run()``."""
    current = local.step
    if current is not None:
        current.hooks.append((check, run, check() if key is None else key))


def check_input(array, check) -> None:
    """While a step is being recorded: if ``array`` is one of its arguments, apply
    ``check`` to that argument of each later call before it is replayed."""
    current = local.step
    if current is not None:
        for k, arg in enumerate(current.args):
            if arg is array:
                current.input_checks.append((k, check))


class EagerReplay:
    """A step that is not recorded: each replay runs it again. ``reason`` says why ("" on a
    backend that records nothing)."""

    replayable = False

    def __init__(self, backend, fn, reason: str = "", recording=None, once: bool = False):
        self.backend, self.fn, self.reason = backend, fn, reason
        self._recording = recording       # a recording that was given up, to free
        self.once = once                  # the reason was passing: record the next call

    def usable(self, backend, step: _Step) -> bool:
        """Whether a call on ``backend`` can use this object."""
        return not self.once and backend is self.backend

    def replay(self, args: list, hooks: list):
        """Run the step for the new arguments (``hooks``: what a recorded replay would
        redo on the host; running the step does it all itself)."""
        return self.fn(*args)

    def close(self) -> None:
        """Free what the object holds."""
        if self._recording is not None:
            self._recording.close()
            self._recording = None


class _Replay:
    """A recorded step: each replay writes the host's scalars and the new batch and
    submits the recording. The tensor a replay returns lives until the next replay."""

    replayable = True
    reason = ""

    def __init__(self, backend, recording):
        self.backend, self.recording = backend, recording
        self.scope = None             # the scope of the last replay's result

    def usable(self, backend, step: _Step) -> bool:
        return (backend is self.backend and self.recording.replayable
                and step.unchanged(backend))

    def replay(self, args: list, hooks: list):
        from .residency import adopt
        h = self.recording.replay(args, hooks)
        if self.scope is not None:
            self.scope.end("the next replay of the captured step began")
        if h is None:
            return None
        self.scope = Scope("by a replay of a captured step")
        t = adopt(self.backend, Tensor(h.shape, h.dtype), h)
        t._scope = self.scope
        return t

    def close(self) -> None:
        self.recording.close()


def _as_input(name: str, value) -> np.ndarray:
    """An argument (``name``: "args[k]" or the keyword) as a C-contiguous float32 (real
    input) or int32 (integer input) array."""
    if isinstance(value, (str, bytes)) or value is None or isinstance(value, Tensor):
        raise bad_type("capture_step", name, value,
                       "a NumPy array of the batch (not a tensor or a string)")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise bad_type("capture_step", name, value, "a NumPy array") from None
    if array.dtype.kind in "biu":
        dtype = np.int32
        if array.size and (array.min() < -2 ** 31 or array.max() >= 2 ** 31):
            raise InvalidValueError(f"capture_step: argument '{name}' holds integers "
                                    "beyond int32")
    elif array.dtype.kind == "f":
        dtype = np.float32
    else:
        raise ArgumentTypeError(f"capture_step: argument '{name}' has dtype {array.dtype};"
                                " expected real numbers")
    return np.ascontiguousarray(array, dtype=dtype)


def _with_keywords(fn, positional: int, names: tuple):
    """fn taking all its arrays positionally: the last ``len(names)`` become keywords."""
    if not names:
        return fn

    def call(*arrays):
        return fn(*arrays[:positional], **dict(zip(names, arrays[positional:])))
    return call


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
        self._recordings: dict = {}   # signature -> (replay object, _Step)
        self._warned = False          # about recording many argument shapes
        # Free the recordings with the step (not at exit: the device may be gone).
        weakref.finalize(self, _close_all, self._recordings).atexit = False

    def __call__(self, *args, **kwargs):
        arrays = [_as_input(f"args[{k}]", a) for k, a in enumerate(args)]
        arrays += [_as_input(name, a) for name, a in kwargs.items()]
        names = tuple(kwargs)
        key = (names,) + tuple((a.shape, a.dtype.str) for a in arrays)
        fn = _with_keywords(self.fn, len(args), names)
        backend = device.active()
        found = self._recordings.get(key)
        if found is not None:
            replay, step = found
            if replay.usable(backend, step):
                for k, check in step.input_checks:
                    check(arrays[k])
                if all(check() == expected for check, _, expected in step.hooks):
                    self.calls += 1
                    self.replays += 1
                    for ref, _, _, _ in step.existing:
                        t = ref()
                        if t is not None:
                            t.written()    # host caches of what the step writes are stale
                    return replay.replay(arrays, [run for _, run, _ in step.hooks
                                                  if run is not None])
            del self._recordings[key]
            replay.close()
        self.calls += 1
        if self.calls <= self.warmup:
            return fn(*arrays)
        result, replay, step = self._record(backend, fn, arrays)
        self.captures += 1
        if len(self._recordings) >= MAX_SHAPES:
            oldest = next(iter(self._recordings))
            self._recordings.pop(oldest)[0].close()
            self._warn_of_many_shapes()
        self._recordings[key] = (replay, step)
        return result

    def _warn_of_many_shapes(self) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"capture_step: the step was recorded {self.captures} times for different "
                f"argument shapes (it keeps {MAX_SHAPES} recordings); each new shape records "
                "it again, which costs more than running it eagerly. Give it batches of a few "
                "fixed shapes (drop or pad the last, smaller batch).",
                DualgradWarning, stacklevel=3)

    def _record(self, backend, fn, arrays: list) -> tuple:
        """Run the step once, recording it where the backend records: (its result, the
        replay object, the _Step)."""
        step = _Step(arrays)
        recording = backend.record(arrays)
        if recording is None:
            return step.run(fn), EagerReplay(backend, fn), step
        with recording:
            step.recording = recording
            result = step.run(fn)
            reason, once = step.verdict(result)
            recording.end(result.ptr if reason == "" and result is not None else None,
                          reason, once)
        if recording.reason:
            return result, EagerReplay(backend, fn, recording.reason, recording,
                                       recording.once), step
        return result, _Replay(backend, recording), step

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


def _close_all(recordings: dict) -> None:
    for replay, _ in list(recordings.values()):
        replay.close()
    recordings.clear()


def capture_step(fn=None, *, warmup: int = 1):
    """Record a training step once and replay it with each new batch.

    ``fn(*batch, **named)`` runs one whole step — forward under ``with_grad_tape()``,
    ``backward``, ``optimizer.step()``, ``optimizer.zero_grad()`` — and returns the loss
    tensor (or None). Its arguments, positional or keyword, are NumPy arrays, passed to
    ``fn`` as float32 (real input) or int32 (integer input). The first ``warmup`` calls run
    eagerly (the optimizer makes its state); the next call is recorded, and later calls
    with arguments of the same shapes and dtypes replay the recording: the new batch is
    uploaded into the recorded input buffers, the optimizers' per-step scalars (step
    counts, learning rates) into a small buffer, and the recorded commands are submitted.
    Arguments of other shapes are recorded anew (a few signatures are kept; a
    ``DualgradWarning`` says when a loop keeps recording new shapes). Use as
    ``step = capture_step(fn)`` or as a
    decorator, ``@capture_step`` or ``@capture_step(warmup=2)``.
    """
    if fn is None:
        return lambda f: CapturedStep(f, warmup)
    return CapturedStep(fn, warmup)
