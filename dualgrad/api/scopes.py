"""Scopes: how long a computed tensor lives, the same on every backend.

A tensor computed from others lives in the scope it was made in: the current tape (inside
``with_grad_tape()``, and outside any tape or evaluation), or the current evaluation (inside
a ``no_grad()`` block outside any tape). The next block of the same kind frees the scope's
memory (on the gpu, its pass arena) and ends the scope: using or reading a tensor of an
ended scope raises DeadTensorError on every backend, saying which block freed it, so a
mistake shows on the cpu during development as it would on the gpu. A tape's tensors
survive an evaluation and an evaluation's survive a tape.

What outlives every scope: parameters and optimizer state, values that came from the host
(``ag_tensor``), gradients of those, and a computed tensor whose value has been read
(``numpy()``, ``item()``: it keeps the value it was read with).

Scopes are per thread and per backend, as the gpu's pass arenas are.
"""
from __future__ import annotations

import os
import threading

from ..backend import EVAL, TAPE
from .idset import WeakIdSet


class _State(threading.local):
    """This thread's table (None until first used): a class default, so reading it misses
    no lookup."""
    table = None


_local = _State()


def block(name: str, frame) -> tuple:
    """A block of user code, as dead tensors' messages name it: (``name``, the file and
    line of ``frame``), formatted only when a message needs it (a tape is entered each
    step)."""
    return name, frame.f_code.co_filename, frame.f_lineno


def _describe(where) -> str:
    if isinstance(where, str):
        return where
    name, path, line = where
    return f"the {name} at {os.path.basename(path)}:{line}"


class Scope:
    """One lifetime: ``alive`` until the next block of its kind begins (``end``)."""

    __slots__ = ("alive", "made_in", "freed_by")

    def __init__(self, made_in):
        self.alive = True
        self.made_in = made_in        # a block() where it began, or a phrase
        self.freed_by = ""

    def end(self, freed_by) -> None:
        self.alive = False
        self.freed_by = freed_by      # a block() and what it did, or a phrase

    def dead_message(self, t) -> str:
        made = self.made_in
        made = f"in {_describe(made)}" if not isinstance(made, str) else made
        freed = self.freed_by
        freed = f"{_describe(freed[0])} {freed[1]}" if isinstance(freed, tuple) else freed
        return (f"this tensor of shape {t.shape} was computed {made} and freed when "
                f"{freed}: each tape, and each no_grad() block outside a tape, reuses the "
                "memory of the one before. Read the value before then (t.numpy() or "
                "t.item() keep it), or compute it again.")


class Lifetimes:
    """A backend's scopes in one thread (``of(backend)``): one per slot, the slot in use
    and its scope, and the tensors that outlive every scope but sit in pass storage
    (``keep``)."""

    __slots__ = ("backend", "scopes", "slot", "current", "evaluations", "kept")

    def __init__(self, backend):
        self.backend = backend
        self.scopes = [Scope("outside any tape"), Scope("outside any tape")]
        self.slot = TAPE
        self.current = self.scopes[TAPE]
        self.evaluations = 0          # no_grad() blocks open outside a tape
        self.kept = None              # a WeakIdSet, made at first need

    def keep(self, t) -> None:
        """``t`` outlives every scope though its storage is pass storage (a value from the
        host): ``take_kept`` hands it over before a block frees that storage."""
        if self.kept is None:
            self.kept = WeakIdSet()
        self.kept.add(t)

    def take_kept(self) -> list:
        """The tensors ``keep`` was given that are still alive, forgotten here (the caller
        moves them out of pass storage)."""
        alive = list(self.kept)
        self.kept.clear()
        return alive

    def begin(self, slot: int, where: tuple) -> int:
        """A block of ``slot``'s kind begins (``where``: ``block()``): end that slot's
        scope, free its memory, and compute in a new scope there. Returns the slot in use
        before."""
        before = self.slot
        self.scopes[slot].end((where, "began"))
        self.backend.begin_pass(slot)
        self.scopes[slot] = self.current = Scope(where)
        self.slot = slot
        return before

    def resume(self, slot: int) -> None:
        """Compute in ``slot``'s current scope again (a block of the other kind ended)."""
        if self.slot != slot:
            self.backend.use_pass(slot)
            self.slot = slot
            self.current = self.scopes[slot]

    def abandon(self, slot: int, where: tuple) -> None:
        """An exception left the block that opened ``slot``'s scope: end it and free its
        memory now (a failed step's activations would otherwise hold memory until the next
        block), then compute in a new scope there."""
        self.scopes[slot].end((where, "was left by an exception"))
        self.backend.begin_pass(slot)
        fresh = Scope(f"after {_describe(where)} was left by an exception")
        self.scopes[slot] = fresh
        if self.slot == slot:
            self.current = fresh


def of(backend) -> Lifetimes:
    """The calling thread's Lifetimes on ``backend``."""
    table = _local.table
    if table is None:
        table = _local.table = {}
    lifetimes = table.get(backend)
    if lifetimes is None:
        lifetimes = table[backend] = Lifetimes(backend)
    return lifetimes


def current(backend) -> Scope:
    """The scope that tensors computed now on ``backend`` live in."""
    table = _local.table
    lifetimes = table.get(backend) if table is not None else None
    return (lifetimes or of(backend)).current


__all__ = ["Scope", "Lifetimes", "TAPE", "EVAL", "block", "of", "current"]
