"""A training step recorded into one reusable command buffer, and its replays.

While ``Capture.record`` runs the step, the backend records its commands into the capture's
command buffer instead of the ordinary stream, and:

- allocates the step's pass tensors in the capture's own arena, which stays reserved for
  the capture's lifetime (their addresses are baked into the recorded push constants);
  each replay bumps the arena's generation, so a tensor of an earlier replay reads as dead;
- defers the uploads of the step's arguments: the buffers are kept, and every run (the
  first one and each replay) uploads the batch into them before submitting;
- gives each optimizer kernel a slot of ten words in a small scalar buffer in place of push
  constants, rewritten before each run from what the optimizers' replay hooks compute, in
  the order they were recorded; a dropout mask's seed and step likewise, in a slot keyed by
  the (seed, step) it was recorded with (its forward and backward share it);
- notes every tensor that existed before the step (parameters, their gradients, optimizer
  state) with its buffer: a replay is refused (the step is recorded anew) once one of them
  was replaced, reallocated or freed, so it never writes to freed memory;
- keeps every allocation the commands touch alive while the capture lives.

What cannot be replayed — reading a value back, uploading a host array that is not an
argument, host-side index work (embedding's gradient) — ends the recording early:
what was recorded is submitted, the rest of the step runs eagerly, and later calls run the
step eagerly (``EagerReplay``, with the reason).
"""
from __future__ import annotations

import weakref

import numpy as np

from ..api.errors import DeviceError
from ..backend import EagerReplay
from .memory import Allocation, ArenaPool, DeviceArray

SLOT_WORDS = 10                   # nine float scalars and the flags of optim.comp
SLOTS_PER_CHUNK = 64
ARENA_BLOCK = 4 << 20


class Capture:
    replayable = True

    def __init__(self, backend, args: list):
        self.backend = backend
        self.args = args
        # Small blocks: a step's activations rarely need the pass pool's 64 MiB.
        self.arena = ArenaPool(backend.ctx, backend._pool_type, ARENA_BLOCK, backend.budget)
        self.arena.owner = backend
        self.cmd = None               # the recorded command buffer, once ended
        self.reason = ""              # why it cannot be replayed ("" while it can)
        self.once = False             # the reason will not recur: record the next call
        self.closed = False
        self.inputs: list = []        # (argument index, allocation)
        self._owned: dict = {}        # id -> allocation made during the capture
        self._touched: dict = {}      # id -> allocation a command touched
        self._existing: list = []     # (tensor ref, allocation, grad, requires_grad)
        self._seen: set = set()
        self._new_persistent: list = []   # refs to tensors given new persistent storage
        self._chunks: list = []       # DeviceArrays of SLOTS_PER_CHUNK slots
        self.slots = 0
        self.scalars = np.zeros(0, np.float32)
        self._ordered: list = []      # the optimizer slots, in recording order
        self._keyed: dict = {}        # key -> slot (dropout masks)
        self._cursor = 0
        self._result = None           # (shape, dtype, allocation) of the returned tensor

    # -- while recording ---------------------------------------------------------------------
    def record(self, run):
        """Run ``run(args)`` with the backend recording into this capture; returns
        (result, replay object)."""
        b = self.backend
        arena = b.pass_pool
        b.rec.begin_capture()
        b._cap = self
        b._captures.append(self)
        b._local.arena = self.arena
        try:
            result = run(self.args)
        except BaseException:
            self.stop("the step raised an error")      # run what it recorded, as eagerly
            self.close()
            raise
        finally:
            b._local.arena = arena
        if not self.reason:
            self._check_end(result)
        if self.cmd is None:
            self._finish()
        if self.reason:
            return result, EagerReplay(b, run, self.reason, self, self.once)
        if result is not None:
            h = result.ptr
            self._result = (h.shape, h.dtype, h.alloc)
        return result, self

    def stop(self, reason: str, once: bool = False) -> None:
        """Give the recording up: submit what was recorded (the rest of the step runs
        eagerly) and remember why (``once``: a reason that will not recur)."""
        if not self.reason:
            self.reason, self.once = reason, once
        if self.backend._cap is self:
            self._finish()

    def _finish(self) -> None:
        b = self.backend
        self.cmd = b.rec.end_capture()
        b._cap = None
        self._submit(self.args)
        while b._closing:             # captures dropped while this one was recorded
            b._closing.pop().close()

    def _check_end(self, result) -> None:
        from ..api.tensor import Tensor
        if result is not None and not (isinstance(result, Tensor) and result.ptr is not None
                                       and result.ptr.alloc.pool is self.arena):
            self.reason = "the step returns something other than a tensor it computed"
        elif not all(r() is not None and r()._grad is grad for r, _, grad, _ in self._existing):
            self.reason = ("the step leaves gradients other than it found them: end it with "
                           "optimizer.zero_grad()")
        elif any(r() is not None for r in self._new_persistent):
            self.reason = ("the step made new persistent state (optimizer state on a first "
                           "step)")
            self.once = True

    def owned(self, alloc) -> None:
        self._owned[id(alloc)] = alloc

    def touch(self, handles) -> None:
        for h in handles:
            if h is not None:
                self._touched[id(h.alloc)] = h.alloc

    def note(self, t) -> None:
        """A tensor's storage was used: remember it when it existed before the step."""
        alloc = t.ptr.alloc
        if id(alloc) not in self._owned and id(t) not in self._seen:
            self._seen.add(id(t))
            self._existing.append((weakref.ref(t), alloc, t._grad, t.requires_grad))

    def adopted(self, t, h) -> None:
        if id(h.alloc) in self._owned and h.alloc.pool is not self.arena:
            self._new_persistent.append(weakref.ref(t))

    def input_index(self, array):
        for k, arg in enumerate(self.args):
            if arg is array:
                return k
        return None

    def slot(self, floats: list, flags: int) -> int:
        """The device address of the next optimizer slot, holding ``floats`` and
        ``flags`` (replays rewrite the slots in this order)."""
        k = self._new_slot()
        self._ordered.append(k)
        self._put(k, floats, flags)
        return self._address(k)

    def keyed_slot(self, key, uints: list) -> int:
        """The device address of the slot for ``key`` (made on first use) holding
        ``uints``."""
        k = self._keyed.get(key)
        if k is None:
            k = self._keyed[key] = self._new_slot()
            self._put_uints(k, uints)
        return self._address(k)

    def _new_slot(self) -> int:
        k = self.slots
        if k % SLOTS_PER_CHUNK == 0:
            b = self.backend
            self._chunks.append(b.empty((SLOTS_PER_CHUNK * SLOT_WORDS,), np.float32, True))
            self.scalars = np.concatenate([self.scalars,
                                           np.zeros(SLOTS_PER_CHUNK * SLOT_WORDS, np.float32)])
        self.slots += 1
        return k

    def _address(self, k: int) -> int:
        return self._chunks[k // SLOTS_PER_CHUNK].address + \
            (k % SLOTS_PER_CHUNK) * SLOT_WORDS * 4

    def _put(self, k: int, floats: list, flags: int) -> None:
        at = k * SLOT_WORDS
        self.scalars[at:at + SLOT_WORDS - 1] = floats
        self.scalars.view(np.uint32)[at + SLOT_WORDS - 1] = flags

    def _put_uints(self, k: int, uints: list) -> None:
        at = k * SLOT_WORDS
        self.scalars.view(np.uint32)[at:at + len(uints)] = uints

    # -- replaying ---------------------------------------------------------------------------
    def put(self, floats: list, flags: int) -> None:
        """A replay hook's scalars for the next optimizer slot, in recording order."""
        if self._cursor >= len(self._ordered):
            raise DeviceError("internal: a replay wrote more optimizer scalars than the "
                              "recorded step uses")
        self._put(self._ordered[self._cursor], floats, flags)
        self._cursor += 1

    def put_keyed(self, key, uints: list) -> None:
        """A replay hook's words for the slot recorded under ``key``."""
        k = self._keyed.get(key)
        if k is None:
            raise DeviceError("internal: a replay wrote a scalar slot the recorded step "
                              "does not use")
        self._put_uints(k, uints)

    def usable(self, backend) -> bool:
        """Whether the recording still fits: same backend, and every tensor that existed
        before the step still has the same live storage, gradient and requires_grad."""
        if self.closed or backend is not self.backend:
            return False
        for ref, alloc, grad, requires in self._existing:
            t = ref()
            if (t is None or t.ptr is None or t.ptr.alloc is not alloc or not alloc.live
                    or t._grad is not grad or t.requires_grad != requires):
                return False
        return True

    def replay(self, args: list, hooks: list):
        """Redo the host bookkeeping, upload the batch and the scalars, submit."""
        b = self.backend
        with b.ctx.lock:
            self._cursor = 0
            b._sink = self
            try:
                for run in hooks:
                    run()
            finally:
                b._sink = None
            if self._cursor != len(self._ordered):
                raise DeviceError("internal: a replay wrote fewer optimizer scalars than "
                                  "the recorded step uses")
            for ref, _, _, _ in self._existing:
                t = ref()
                if t is not None:
                    t.written()          # host caches of what the step writes are stale
            self.arena.renew()           # earlier replays' tensors are dead
            self._submit(args)
            if self._result is None:
                return None
            return self._result_tensor()

    def _submit(self, args: list) -> None:
        rec = self.backend.rec
        for k, alloc in self.inputs:
            rec.upload(alloc, args[k])
        used = self.slots * SLOT_WORDS
        for i, chunk in enumerate(self._chunks):
            part = self.scalars[i * SLOTS_PER_CHUNK * SLOT_WORDS:
                                min(used, (i + 1) * SLOTS_PER_CHUNK * SLOT_WORDS)]
            rec.upload(chunk.alloc, part)
        rec.submit(self.cmd)

    def _result_tensor(self):
        from ..api.tensor import Tensor
        shape, dtype, alloc = self._result
        h = DeviceArray(Allocation(self.arena, alloc.block, alloc.offset, alloc.nbytes,
                                   self.arena.generation), shape, dtype)
        t = Tensor(shape, dtype)
        self.backend.adopt(t, h)
        return t

    def close(self) -> None:
        """Free the command buffer and the arena (after the device is done with them)."""
        if self.closed:
            return
        b = self.backend
        with b.ctx.lock:
            if b._cap is not None and b._cap is not self:
                # Another step is being recorded, so the device cannot be waited for now:
                # this one is closed when that recording ends.
                if self not in b._closing:
                    b._closing.append(self)
                return
            self.closed = True
            if b._cap is self:
                self.stop("closed while recording")
            if self.cmd is not None:
                b.rec.free_captured(self.cmd)
                self.cmd = None
            self.arena.release()
            if self in b._captures:
                b._captures.remove(self)
            self._owned.clear()
            self._touched.clear()
            self._chunks.clear()
            self.inputs.clear()
