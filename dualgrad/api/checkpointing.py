"""Gradient checkpointing: ``checkpoint(fn, *args)`` keeps none of ``fn``'s intermediate
results for the backward pass and computes them again there, trading time for memory.

On the gpu the forward runs in a scratch arena (``backend.SCRATCH``) that is freed once its
result is copied into the tape's, and the recomputation and its backward run there too,
freed once the inputs' gradients are copied out; on the cpu the intermediates are simply
not referenced. The dropout masks ``fn`` draws are drawn again the same. While a step is
recorded (``capture_step``) its own arena serves every slot, so nothing is freed early
there, and the results are the same.
"""
from __future__ import annotations

from ..backend import SCRATCH, TAPE
from ..errors import ArgumentTypeError, bad_type
from . import capture, device, ops, tape
from .residency import adopt, handle
from .tensor import Tensor


def _detached(t: Tensor) -> Tensor:
    """A leaf sharing ``t``'s storage, taking a gradient where ``t`` does (an input of the
    recomputation)."""
    d = Tensor(t.shape, t.dtype, requires_grad=t.requires_grad)
    d.ptr, d._host, d._scope = t.ptr, t._host, t._scope
    if capture.local.step is not None:       # (a recorded step need not keep it)
        capture.local.step.made(d)
    return d


def _substituted(args: tuple, by_id: dict) -> list:
    """``args`` with each tensor replaced by ``by_id``'s stand-in for it."""
    return [by_id.get(id(a), a) if isinstance(a, Tensor) else a for a in args]


def _leaves_then_free(out: Tensor) -> list:
    """The leaves taking gradients that ``out``'s graph reaches (fn's inputs, detached,
    and the parameters it used), the graph then dropped."""
    if out._node is None:
        return []
    order = tape._topological(out._node)
    leaves, seen = [], set()
    for node in order:
        for i in node.inputs:
            if i is not None and i.__class__ is not tape.Node and id(i) not in seen:
                seen.add(id(i))
                leaves.append(i)
    for node in order:
        tape._free(node)
    out._node = None
    return leaves


class _InScratch:
    """Pass storage goes to the freshly emptied scratch arena within the block, and back
    to the tape's after it (the scratch emptied again); nothing while a step is recorded."""

    def __init__(self, backend):
        self.backend = backend
        self.active = capture.local.step is None

    def __enter__(self):
        if self.active:
            self.backend.begin_pass(SCRATCH)
        return self

    def to_tape(self, h):
        """``h`` copied into the tape's arena (itself where nothing is scratch)."""
        if not self.active:
            return h
        self.backend.use_pass(TAPE)
        kept = self.backend.empty(tuple(h.shape), h.dtype)
        self.backend.copy(kept, h)
        self.backend.use_pass(SCRATCH)
        return kept

    def __exit__(self, kind, exc, tb) -> bool:
        if self.active:
            self.backend.begin_pass(SCRATCH)
            self.backend.use_pass(TAPE)
        return False


def checkpoint(fn, *args) -> Tensor:
    """``fn(*args)``, a Tensor, with none of ``fn``'s intermediate results kept for the
    backward pass: it runs ``fn`` again there (as ``torch.utils.checkpoint.checkpoint``).
    ``fn`` must compute the same thing each time (its dropout masks are drawn again the
    same); tensors it makes besides its result are freed when it returns. Outside a tape
    it is a plain call."""
    if not callable(fn):
        raise bad_type("checkpoint", "fn", fn, "a callable")
    if not tape.recording():
        return fn(*args)
    backend = device.active()
    args_in = [a for a in args if isinstance(a, Tensor)]
    draws = []
    scratch = _InScratch(backend)
    with scratch:    # (recorded from detached inputs, to find fn's parameters, then dropped)
        detached = {id(a): _detached(a) for a in args_in}
        ops._draws.log, before = draws, ops._draws.log
        try:
            out = fn(*_substituted(args, detached))
        finally:
            ops._draws.log = before
        if not isinstance(out, Tensor):
            raise ArgumentTypeError(f"checkpoint: fn returned {type(out).__name__}; expected "
                                    "a Tensor")
        kept = scratch.to_tape(handle(backend, out))
        named = {id(a) for a in detached.values()}
        inputs = tuple(args_in) + tuple(t for t in _leaves_then_free(out)
                                        if id(t) not in named)

    def backward(g, needs):
        with _InScratch(backend) as again, tape.recording_as(True):
            leaves = {id(t): _detached(t) for t in args_in}
            ops._draws.replay, before = list(draws), ops._draws.replay   # (never None here)
            try:
                redone = fn(*_substituted(args, leaves))
            finally:
                ops._draws.replay = before
            if redone._node is not None:
                tape.backward_from(redone, g)
            grads = []                   # (fn's parameters have theirs from backward_from)
            for t, need in zip(inputs, needs):
                leaf = leaves.get(id(t))
                grads.append(again.to_tape(handle(backend, leaf.grad)) if need and leaf is
                             not None and leaf.grad is not None else None)
            for leaf in leaves.values():     # (stand-ins: no gradient left behind)
                leaf.grad = None
        return tuple(grads)
    return ops._make(kept, inputs, backward, backend, dtype=out.dtype) if inputs else \
        adopt(backend, Tensor(out.shape, out.dtype), kept)


__all__ = ["checkpoint"]
