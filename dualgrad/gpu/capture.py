"""A training step recorded into one reusable command buffer, and its replays: the device's
side of ``dg.capture_step`` (the front end's, ``dualgrad.api.capture``, keeps what concerns
tensors and the host).

While a ``Recording`` is entered (``with recording:``, the device lock held throughout, so
other threads' work waits rather than land in it), the device records its commands into the
recording's command buffer instead of the ordinary stream, and:

- allocates the step's pass storage in the recording's own arena, which stays reserved for
  its lifetime (the addresses are baked into the recorded push constants); each replay
  bumps the arena's generation, so storage of an earlier replay reads as dead;
- defers the uploads of the step's arguments: the buffers are kept, and every run (the
  first one and each replay) uploads the batch into them before submitting;
- gives each optimizer kernel a slot of words in a small scalar buffer in place of push
  constants, rewritten before each run from what the optimizers' replay hooks compute, in
  the order they were recorded; a dropout mask's seed and step likewise, in a slot keyed by
  the (seed, step) it was recorded with (its forward and backward share it);
- keeps every allocation of the other pools that the commands touch alive while the
  recording lives (its own arena's ranges are reused within the step as in an eager one).

What cannot be replayed (reading a value back, uploading a host array that is not an
argument) stops the recording early (``stop``): what was recorded is submitted, the rest of
the step runs eagerly, and ``reason`` says why.
"""
from __future__ import annotations

import numpy as np

from ..errors import DeviceError
from ..kernel_ops import OPTIM_SCALARS
from .memory import Allocation, ArenaPool, DeviceArray

SLOT_WORDS = OPTIM_SCALARS + 1    # the float scalars and the flags of optim.comp
SLOTS_PER_CHUNK = 64
ARENA_BLOCK = 4 << 20             # small blocks: a step's activations rarely need 64 MiB


class Recording:
    def __init__(self, dev, args: list):
        self.dev = dev
        self.args = args
        self.arena = ArenaPool(dev.ctx, dev.pool_type, ARENA_BLOCK, dev.budget, dev.rec.idle)
        self.arena.owner = dev
        self.cmd = None               # the recorded command buffer, once ended
        self.segments: list = []      # (command buffer, host calls after it) before it
        self.reason = ""              # why it cannot be replayed ("" while it can)
        self.once = False             # the reason will not recur: record the next call
        self.closed = False
        self.inputs: list = []        # (argument index, allocation)
        self._owned: dict = {}        # id -> allocation made while recording
        self._touched: dict = {}      # id -> allocation a command touched
        self._chunks: list = []       # DeviceArrays of SLOTS_PER_CHUNK slots
        self.slots = 0
        self.scalars = np.zeros(0, np.float32)
        self._ordered: list = []      # the optimizer slots, in recording order
        self._keyed: dict = {}        # key -> slot (dropout masks)
        self._cursor = 0
        self._result = None           # (shape, dtype, allocation) of the step's result
        self._before = None           # the arena the thread allocated in before

    # -- while recording ---------------------------------------------------------------------
    def __enter__(self) -> "Recording":
        dev = self.dev
        dev.lock.acquire()
        try:
            dev.workspace.make()      # made (and zeroed) outside the recording
            dev.rec.begin_capture()
        except BaseException:
            dev.lock.release()
            raise
        dev.capture = self
        dev.recordings.append(self)
        self._before = dev.hold_arena(self.arena)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        dev = self.dev
        try:
            dev.restore_arena(self._before)
            if kind is not None:
                self.stop("the step raised an error")   # run what it recorded, as eagerly
                self.close()
            elif dev.capture is self:
                self._finish()
        finally:
            dev.lock.release()

    def end(self, result=None, reason: str = "", once: bool = False) -> None:
        """The step ran to its end, returning the storage ``result`` (or None); ``reason``:
        why the front end finds it cannot be replayed (``once``: a reason that will not
        recur)."""
        if reason:
            self.stop(reason, once)
        elif result is not None and result.alloc.pool is not self.arena:
            self.stop("the step returns something other than a tensor it computed")
        elif result is not None:
            self._result = (result.shape, result.dtype, result.alloc)

    def stop(self, reason: str, once: bool = False) -> None:
        """Give the recording up: submit what was recorded (the rest of the step runs
        eagerly) and remember why (``once``: a reason that will not recur)."""
        if not self.reason:
            self.reason, self.once = reason, once
        if self.dev.capture is self:
            self._finish()

    def split(self, calls: tuple) -> None:
        """End the command buffer here: each run submits it, then makes ``calls`` (a
        host's part of the step: data parallelism's hand-over of staged gradients, its
        wait for their averages), then goes on with the next one."""
        rec = self.dev.rec
        self.segments.append((rec.end_capture(), calls))
        rec.begin_capture()

    def _finish(self) -> None:
        dev = self.dev
        self.cmd = dev.rec.end_capture()
        dev.capture = None
        self._submit(self.args)
        while dev.closing:            # recordings dropped while this one was recorded
            dev.closing.pop().close()

    def owned(self, alloc) -> None:
        if alloc.pool is not self.arena:
            self._owned[id(alloc)] = alloc

    def touch(self, handles) -> None:
        # The recording's own arena serves no one else: its ranges may be handed out again
        # within the step (the recorded barriers order the reuse, and every replay repeats
        # it), so only storage of other pools is kept.
        arena = self.arena
        for h in handles:
            if h is not None:
                alloc = h.alloc
                if alloc.pool is not arena:
                    self._touched[id(alloc)] = alloc

    def input_index(self, array):
        for k, arg in enumerate(self.args):
            if arg is array:
                return k
        return None

    def input(self, k: int, array) -> DeviceArray:
        """Storage in the recording's arena for argument ``k``, uploaded at every run
        before the commands: in a range no other storage of the step uses."""
        h = self.dev.empty(array.shape, array.dtype, fresh=True)
        self.inputs.append((k, h.alloc))
        return h

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
            self._chunks.append(self.dev.empty((SLOTS_PER_CHUNK * SLOT_WORDS,), np.float32,
                                               True))
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
    @property
    def replayable(self) -> bool:
        return not self.reason and not self.closed

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

    def replay(self, args: list, hooks: list):
        """Run the host's hooks (their optimizer scalars fill the slots), upload the batch
        and the scalars, submit; returns the result's storage of this run (or None)."""
        dev = self.dev
        with dev.lock:
            self._cursor = 0
            dev.sink = self
            try:
                for run in hooks:
                    run()
            finally:
                dev.sink = None
            if self._cursor != len(self._ordered):
                raise DeviceError("internal: a replay wrote fewer optimizer scalars than "
                                  "the recorded step uses")
            self.arena.renew()           # earlier replays' storage is dead
            self._submit(args)
            if self._result is None:
                return None
            shape, dtype, alloc = self._result
            return DeviceArray(Allocation(self.arena, alloc.block, alloc.offset, alloc.nbytes,
                                          self.arena.generation), shape, dtype)

    def _submit(self, args: list) -> None:
        rec = self.dev.rec
        for k, alloc in self.inputs:
            rec.upload(alloc, args[k])
        used = self.slots * SLOT_WORDS
        for i, chunk in enumerate(self._chunks):
            part = self.scalars[i * SLOTS_PER_CHUNK * SLOT_WORDS:
                                min(used, (i + 1) * SLOTS_PER_CHUNK * SLOT_WORDS)]
            rec.upload(chunk.alloc, part)
        for cmd, calls in self.segments:
            rec.submit(cmd)
            for call in calls:
                call()
        rec.submit(self.cmd)

    def close(self) -> None:
        """Free the command buffer and the arena (after the device is done with them)."""
        if self.closed:
            return
        dev = self.dev
        with dev.lock:
            if dev.capture is not None and dev.capture is not self:
                # Another step is being recorded, so the device cannot be waited for now:
                # this one is closed when that recording ends.
                if self not in dev.closing:
                    dev.closing.append(self)
                return
            self.closed = True
            if dev.capture is self:
                self.stop("closed while recording")
            for cmd, _ in self.segments:
                dev.rec.free_captured(cmd)
            self.segments.clear()
            if self.cmd is not None:
                dev.rec.free_captured(self.cmd)
                self.cmd = None
            self.arena.release()
            if self in dev.recordings:
                dev.recordings.remove(self)
            self._owned.clear()
            self._touched.clear()
            self._chunks.clear()
            self.inputs.clear()
