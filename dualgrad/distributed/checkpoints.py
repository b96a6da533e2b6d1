"""Checkpoints of a data-parallel run: written by rank 0 alone, read by rank 0 and copied
to every process, so that a run resumes identical everywhere, with any number of
processes (the file holds one model, not one per process)."""
from __future__ import annotations

from ..api import io, random
from ..errors import DistributedError
from .parallel import DistributedDataParallel, broadcast_parameters, from_root
from .world import broadcast_object, world


def _inner(model):
    return model.module if isinstance(model, DistributedDataParallel) else model


def _outcome(fn: str, call) -> object:
    """Run ``call`` on rank 0 and return its result in every process; an exception there
    is raised on rank 0 as it is and in the others as a DistributedError naming it."""
    w = world()
    result = error = None
    if w.rank == 0:
        try:
            result = call()
        except Exception as exc:  # (told to the others first, so that none waits)
            error = exc
    told = broadcast_object((result, None if error is None else
                             f"{type(error).__name__}: {error}"))
    if error is not None:
        raise error
    if told[1] is not None:
        raise DistributedError(f"{fn}: rank 0 failed: {told[1]}")
    return told[0]


def save_checkpoint(path, model, optimizer=None, scheduler=None, extra=None,
                    scaler=None) -> None:
    """``dg.save_checkpoint`` by rank 0 (atomic as ever); every process returns once the
    file is written, or raises if rank 0 failed. A ``DistributedDataParallel`` model is
    saved as its inner module, so the file loads into the model alone too."""
    _outcome("save_checkpoint",
             lambda: io.save_checkpoint(path, _inner(model), optimizer, scheduler, extra,
                                        scaler))


def load_checkpoint(path, model, optimizer=None, scheduler=None, strict: bool = True,
                    scaler=None):
    """``dg.load_checkpoint`` by rank 0, whose parameters, buffers, optimizer and schedule
    state and generator are then copied to every process (the file need only be where
    rank 0 runs). Returns the checkpoint's ``extra`` in every process."""
    extra = _outcome("load_checkpoint",
                     lambda: io.load_checkpoint(path, _inner(model), optimizer, scheduler,
                                                strict, scaler))
    broadcast_parameters(_inner(model), optimizer, scheduler)
    if scaler is not None:
        from_root(scaler)
    state = broadcast_object(random.get_state() if world().rank == 0 else None)
    random.set_state(state)
    return extra
