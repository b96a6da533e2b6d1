"""The device: one opened Vulkan device as the kernels use it.

It owns the memory (a pass arena per thread for each pass slot, the persistent pool, the
budget they share, the workspace), the command recorder and the pipelines, and it is the one
place that knows whether a step is being recorded (``capture``) or a replay's scalars are
being written (``sink``). ``launch`` is the one call that records a kernel; the kernel
families (``kernels/``) describe their dispatches and call it.
"""
from __future__ import annotations

import math
import struct
import threading

import numpy as np

from ..backend import EVAL, SCRATCH, TAPE
from ..errors import DeviceUnavailable
from .dispatch import MAX_ELEMENTS, ROUND16, check_size
from .host_buffer import HostBuffer
from .memory import ArenaPool, Budget, DeviceArray, FreeListPool, limit_from_env
from .recorder import Recorder
from .workspace import Workspace

F32 = np.dtype(np.float32)


def _memory_types(ctx) -> tuple:
    """(pool type, staging type): device-local memory for the pools (plain VRAM where there
    is such a type), host-visible coherent memory for staging (cached where possible)."""
    vk, props = ctx.vk, ctx.memory_properties
    types = [(i, props.memoryTypes[i].propertyFlags,
              props.memoryHeaps[props.memoryTypes[i].heapIndex].size)
             for i in range(props.memoryTypeCount)]
    local = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
    visible = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
    coherent = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    cached = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
    pool = [t for t in types if t[1] & local]
    pool.sort(key=lambda t: (bool(t[1] & visible), -t[2]))
    staging = [t for t in types if t[1] & visible and t[1] & coherent]
    staging.sort(key=lambda t: (not t[1] & cached, -t[2]))
    if not pool or not staging:
        raise DeviceUnavailable(f"{ctx.name} has no device-local or no host-visible memory")
    return pool[0][0], staging[0][0]


class _Arenas(threading.local):
    """A thread's pass storage, the class attributes every thread's defaults (read on every
    allocation: a default found this way costs no missed lookup)."""
    arenas = None                 # its [TAPE, EVAL, SCRATCH] arenas, once claimed
    arena = None                  # where its pass storage goes now
    recording_arena = None        # a step's recording's arena, while it records


class Device:
    def __init__(self, ctx):
        self.ctx, self.lock = ctx, ctx.lock
        self.index = ctx.info["index"]
        self.pool_type, staging_type = _memory_types(ctx)
        self.staging_type = staging_type
        self.budget = Budget(limit_from_env())
        self.budget.reclaim = self._reclaim
        # Each thread has its own pass arenas, one per slot (TAPE, EVAL, SCRATCH): a tape
        # opened in one thread frees only that thread's activations. [thread, arenas]
        # pairs; a dead thread's arenas are handed on.
        self._arenas: list = []
        self._local = _Arenas()
        self.persistent_pool = FreeListPool(ctx, self.pool_type, budget=self.budget)
        self.persistent_pool.owner = self
        self.pipelines = ctx.pipelines
        self._pipeline_of: dict = {}  # (shader, spec) -> pipeline: pipelines.get, without
                                      # its call (a dispatch's Python time is its cost)
        self.rec = Recorder(ctx, self.pipelines, staging_type)
        self.workspace = Workspace(self)
        self.capture = None           # the Recording being recorded (under the lock)
        self.sink = None              # the Recording whose scalars a replay's hooks write
        self.recordings: list = []    # live Recordings
        self.closing: list = []       # Recordings to close once the current recording ends
        self.tables: dict = {}        # optimizer tables kept for reuse (kernels/optim.py)
        limits = ctx.limits           # (read once: a field of a driver struct is slow to read)
        self.matmul_limits = (limits.maxComputeSharedMemorySize,
                              limits.maxComputeWorkGroupInvocations, ctx.tensor_cores)
        self.fma_limits = self.matmul_limits[:2] + (False,)     # tensor cores not used

    # -- pools -------------------------------------------------------------------------------
    def _thread_arenas(self) -> list:
        """The calling thread's arenas, one per pass slot."""
        arenas = self._local.arenas
        if arenas is None:
            self._local.arenas = arenas = self._claim_arenas()
        return arenas

    def _claim_arenas(self) -> list:
        me = threading.current_thread()
        with self.lock:
            for pair in self._arenas:
                if not pair[0].is_alive():
                    pair[0] = me                 # its old tensors die at this thread's reset
                    return pair[1]
            arenas = [ArenaPool(self.ctx, self.pool_type, budget=self.budget,
                                idle=self.rec.idle)
                      for _ in (TAPE, EVAL, SCRATCH)]
            for arena in arenas:
                arena.owner = self
            self._arenas.append([me, arenas])
            return arenas

    @property
    def pass_pool(self) -> ArenaPool:
        """Where the calling thread's pass storage goes now."""
        arena = self._local.arena
        if arena is None:
            self._local.arena = arena = self._thread_arenas()[TAPE]
        return arena

    def begin_pass(self, slot: int) -> None:
        """Free the calling thread's arena of ``slot`` and allocate there from now on.
        While a step is recorded its own arena stands for every slot."""
        with self.lock:
            self.rec.flush()
            held = self._local.recording_arena
            if held is not None:
                held.reset()
                return
            arena = self._thread_arenas()[slot]
            arena.reset()
            self._local.arena = arena

    def use_pass(self, slot: int) -> None:
        """Allocate in the calling thread's arena of ``slot`` from now on."""
        if self._local.recording_arena is None:
            self._local.arena = self._thread_arenas()[slot]

    def hold_arena(self, arena: ArenaPool) -> ArenaPool:
        """Allocate the calling thread's pass storage in ``arena`` (a recording's) until
        ``restore_arena``; returns what to hand that."""
        before = self.pass_pool
        self._local.recording_arena = self._local.arena = arena
        return before

    def restore_arena(self, before: ArenaPool) -> None:
        self._local.recording_arena = None
        self._local.arena = before

    def _reclaim(self) -> int:
        """Before an allocation fails: wait for submitted work (it may use any block), then
        give back the blocks that hold nothing live. The bytes freed."""
        with self.lock:
            self.uncapturable("device memory ran short while it was recorded", once=True)
            self.rec.flush(wait=True)
            return self.budget.trim_pools()

    def synchronize(self) -> None:
        """Submit what is recorded and wait for all of it (a step doing so is not
        replayed: it stops the capture)."""
        self.uncapturable("it waits for the device (synchronize)")
        with self.lock:
            self.rec.flush(wait=True)

    def owns(self, h) -> bool:
        """Whether ``h`` is live storage of this device."""
        alloc = h.alloc
        pool = alloc.pool
        return pool.owner is self and pool.is_live(alloc)

    def memory(self) -> dict:
        """Pool statistics; the pass pools are the calling thread's."""
        p_bytes, p_count = self.persistent_pool.stats()
        arenas = self._thread_arenas()
        stats = [a.stats() for a in arenas]
        return dict(buffer_bytes=sum(used for used, _ in stats),
                    n_buffers=sum(n for _, n in stats),
                    peak_bytes=self.budget.peak,
                    p_buffer_bytes=p_bytes, p_n_buffers=p_count,
                    reserved_bytes=sum(a.reserved_bytes for a in arenas),
                    p_reserved_bytes=self.persistent_pool.reserved_bytes)

    def reset_peak_memory(self) -> None:
        """The peak of the bytes the pools hand out starts again from what is in use now
        (the calling thread's dropped pass storage and the persistent frees counted
        first)."""
        self.persistent_pool.stats()
        for arena in self._thread_arenas():
            arena.stats()
        self.budget.reset_peak()

    def release(self) -> None:
        """Free the device memory (the pools, the workspace, the staging ring) and every
        recording; the device and its compiled pipelines stay for the next selection."""
        with self.lock:
            for recording in list(self.recordings):
                recording.stop("the device was released")
            for recording in list(self.recordings):
                recording.close()
            self.closing.clear()
            self.rec.destroy()
            for _, arenas in self._arenas:
                for arena in arenas:
                    arena.release()
            self._arenas.clear()
            self.persistent_pool.release()
            self.workspace.forget()
            self.tables = {}

    # -- recording ---------------------------------------------------------------------------
    def uncapturable(self, reason: str, once: bool = False) -> None:
        """What the step does next cannot be replayed: stop recording it (if it is);
        ``once``: it will not happen again, so the next call is recorded."""
        capture = self.capture
        if capture is not None:
            with self.lock:
                capture.stop(f"the step cannot be replayed: {reason}", once)

    # -- storage ----------------------------------------------------------------------------
    def empty(self, shape, dtype=F32, persistent=False, fresh=False) -> DeviceArray:
        """Storage of ``shape`` and ``dtype``, in the persistent pool or the pass's
        (``fresh``: there, in a range nothing of the pass has used: ``ArenaPool.alloc``)."""
        if dtype is not F32:
            dtype = np.dtype(dtype)
        size = int(math.prod(shape))                  # math.prod: a hot path
        if size > MAX_ELEMENTS:
            check_size(shape)
        if persistent:
            pool = self.persistent_pool
        else:                                         # (the property, inline: a hot path)
            pool = self._local.arena or self.pass_pool
        with self.lock:
            alloc = pool.alloc(size * dtype.itemsize, True) if fresh else \
                pool.alloc(size * dtype.itemsize)
            if self.capture is not None:
                self.capture.owned(alloc)
        return DeviceArray(alloc, shape, dtype, None, size)

    def upload(self, array, persistent=False) -> DeviceArray:
        capture = self.capture
        if capture is not None:
            k = capture.input_index(array)
            if k is not None:         # an argument of a step being recorded: each run
                return capture.input(k, array)                  # uploads it
            self.uncapturable("it uploads a host array that is not one of its arguments "
                              "(make tensors from the arguments as they are)")
        array = np.asarray(array, order="C")
        h = self.empty(array.shape, array.dtype, persistent)
        if array.size:
            with self.lock:
                self.rec.upload(h.alloc, array)
        return h

    def write(self, h, array) -> None:
        self.uncapturable("it writes host values into a tensor")
        array = np.asarray(array, dtype=h.dtype, order="C")
        if array.size:
            with self.lock:
                self.rec.upload(h.alloc, array)

    def download(self, h) -> np.ndarray:
        if not h.size:
            return np.empty(h.shape, h.dtype)
        self.uncapturable("it reads a value from the device")
        with self.lock:
            raw = self.rec.download(h.alloc, h.nbytes)
        return np.frombuffer(raw, h.dtype).reshape(h.shape).copy()

    def host_buffer(self, size, dtype, array=None) -> HostBuffer:
        return HostBuffer(self.ctx, size, dtype, self.staging_type, array)

    def stage_out(self, pieces, buffer: HostBuffer, then=None) -> HostBuffer:
        with self.lock:
            self._copies(buffer, pieces, to_host=True)
            self.rec.read_by_host()
            arrive = (lambda: buffer.arm(self.ctx.queue),) + ((lambda: then(buffer),)
                                                            if then is not None else ())
            if self.capture is not None:    # each run submits up to here, then arrives
                self.capture.split(arrive)
            else:
                self.rec.flush()            # (submitted now: the device starts on it)
                for fn in arrive:
                    fn()
        return buffer

    def stage_in(self, buffer: HostBuffer, pieces, before=None) -> None:
        with self.lock:
            if before is not None:
                if self.capture is not None:    # each run submits up to here, then waits
                    self.capture.split((before,))
                else:
                    before()
            self._copies(buffer, pieces, to_host=False)

    def _copies(self, buffer: HostBuffer, pieces, to_host: bool) -> None:
        """Record the copies between each (storage, element offset) of ``pieces`` and
        ``buffer``, one way or the other (the caller holds the lock)."""
        rec, size, capture = self.rec, buffer.dtype.itemsize, self.capture
        moved = 0
        for h, offset in pieces:
            if h.size:
                at = buffer.address + offset * size
                if capture is not None:
                    capture.touch((h,))
                host = (buffer.block.buffer, offset * size, [(at, at + h.nbytes)])
                here = (h.alloc.block.buffer, h.alloc.offset, [h.span])
                (sb, so, sr), (db, do, dr) = (here, host) if to_host else (host, here)
                rec.copy(sb, so, db, do, h.nbytes, sr, dr)
                moved += h.nbytes
        counters = rec.counters
        if to_host:
            counters.d2h_bytes += moved
            counters.d2h_calls += 1
        else:
            counters.h2d_bytes += moved
            counters.h2d_calls += 1

    def indices(self, array) -> DeviceArray:
        host = np.asarray(array, dtype=np.int32, order="C")
        h = self.upload(host)
        h.host = host
        return h

    def fill(self, h, value) -> None:
        if h.size:
            size = h.nbytes
            if h.dtype in ROUND16:       # two 16-bit values a word (the storage owns a pad)
                with np.errstate(over="ignore"):    # (past float16's range: inf)
                    half = int(np.float32(value).astype(h.dtype).view(np.uint16))
                word, size = half | half << 16, (size + 3) // 4 * 4
            elif h.dtype.kind == "b":    # (a byte each: the storage owns a word's pad too)
                word, size = 0x01010101 if value else 0, (size + 3) // 4 * 4
            elif h.dtype.kind == "i":
                word = struct.unpack("<I", struct.pack("<i", int(value)))[0]
            else:
                word = struct.unpack("<I", struct.pack("<f", value))[0]
            with self.lock:
                if self.capture is not None:
                    self.capture.touch((h,))
                self.rec.fill(h.alloc.block.buffer, h.alloc.offset, size, word, [h.span])

    def fill_bytes(self, h, data: bytes) -> None:
        """Write ``data`` (a multiple of 4 bytes, at most 65536) into ``h`` from the command
        stream itself, as push constants are: no staging, nothing uploaded."""
        with self.lock:
            if self.capture is not None:
                self.capture.touch((h,))
            self.rec.update(h.alloc.block.buffer, h.alloc.offset, data, [h.span])

    def copy(self, dst, src) -> None:
        if src.size:
            with self.lock:
                if self.capture is not None:
                    self.capture.touch((src, dst))
                self.rec.copy(src.alloc.block.buffer, src.alloc.offset, dst.alloc.block.buffer,
                              dst.alloc.offset, src.nbytes, [src.span], [dst.span])

    @staticmethod
    def reshape(h, shape) -> DeviceArray:
        return DeviceArray(h.alloc, shape, h.dtype, h.host)

    # -- launching ---------------------------------------------------------------------------
    def launch(self, shader: str, spec: tuple, push: bytes, groups: tuple, reads, writes):
        """Record a dispatch of (shader, spec) reading and writing these DeviceArrays (None
        among ``reads``: an unused operand). The caller may hold the lock already (a
        workspace range taken for this dispatch)."""
        with self.lock:
            if self.capture is not None:
                self.capture.touch(reads)
                self.capture.touch(writes)
            pipeline = self._pipeline_of.get((shader, spec))
            if pipeline is None:
                pipeline = self._pipeline_of[shader, spec] = self.pipelines.get(shader, spec)
            read, written = [], []       # (loops, not comprehensions: half the time)
            for h in reads:
                if h is not None:
                    read.append(h.span)
            for h in writes:
                written.append(h.span)
            self.rec.dispatch(pipeline, push, groups, read, written)
