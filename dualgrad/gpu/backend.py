"""The gpu backend: the primitives of the backend contract as Vulkan compute dispatches.

Storage handles are DeviceArrays in one of two pools: ``pass`` (an arena that each tape
frees) and ``persistent`` (parameters, their gradients, optimizer state). Every kernel takes
its operands as buffer device addresses in push constants; a kernel is a (shader,
specialization) pipeline, and the shader of each op family has the name of its CPU twin's
module (``unary``/``binary`` for elementwise.py, ``reduce`` for reduce.py, ...).
"""
from __future__ import annotations

import math
import struct
import threading
import weakref

import numpy as np

from ..api.errors import (ArgumentTypeError, DeadTensorError, DeviceError, DeviceOutOfMemory,
                          DeviceUnavailable)
from ..backend import ADAM_HYPER, SGD_HYPER, Backend
from ..cpu.dropout import threshold as dropout_threshold
from ..cpu.elementwise import BINARY_OPS, UNARY_OPS, pad4
from ..cpu.reduce import REDUCE_OPS, keepdims_shape
from . import plans
from .capture import Capture
from .context import Context
from .dispatch import COUNT_EQ, COUNTERS, FMA_SHADERS, MAX_ELEMENTS, MAX_GROUPS, WG
from .dispatch import broadcast_layout as _broadcast_layout
from .dispatch import check_size
from .dispatch import grid as _groups
from .dispatch import matmul_recipe as _matmul_recipe
from .dispatch import packer as _packer
from .dispatch import push_constants as _push
from .dispatch import quad_grid as _quad_groups
from .dispatch import reduce_recipe as _reduce_recipe
from .dispatch import reduced_shape as _reduced_shape
from .dispatch import strides4 as _strides4
from .memory import ArenaPool, Budget, DeviceArray, FreeListPool, limit_from_env
from .recorder import Recorder

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
SCRATCH = 1 << 16                 # partial results kept in the workspace, made with it
BIG_SCRATCH = 1 << 21             # ... past that, in a second range of the workspace, made at
                                  # first need: up to half of it each (8 MiB: two of the
                                  # H 1024 MLP's split products' 4 MiB), else allocated, each
                                  # its own. A call then costs no allocation (2-5 us of host),
                                  # and the calls reuse the memory, which stays in the GPU's
                                  # L2 cache (H200: the H 1024 products split 4 ways 0.93-0.97
                                  # of PyTorch's time, 1.04-1.14 with their own)
# The push constants of the hot dispatches, packed in one call each: a recipe's uints come
# packed (its ``tail``), so only the addresses are packed per call.
_UNARY_PUSH = _packer(4, 1, 2)    # x, y, g, out; n; a, b
_ADDRESSES4, _ADDRESSES5, _ADDRESSES8 = _packer(4), _packer(5), _packer(8)
_OPTIM_PUSH = _packer(4, 2, len(ADAM_HYPER))   # w, g, m (buf), v; n, flags; the scalars
# optim.comp's TABLE: one dispatch updates up to MAX_TABLE tensors, each entry (addresses,
# n, first workgroup, elements a workgroup) written into the command stream.
MAX_TABLE = 256
TABLE_GROUPS = 32768              # about this many workgroups a table dispatch, at most
_TABLE_ENTRY = struct.Struct("<4Q4I")
MAX_TABLES_KEPT = 16              # tables kept for reuse (an optimizer's, or a few of them
                                  # taking turns); past that, the kept ones are dropped


def _sgd_scalars(buf, hyper: dict) -> tuple:
    """(flags, the nine floats) of optim.comp's SGD update: 1 momentum buffer, 2 nesterov,
    4 first step; lr, momentum, dampening, wd, then zeros."""
    flags = (1 if buf is not None else 0) | (2 if hyper["nesterov"] else 0) | \
        (4 if hyper["first"] else 0)
    return flags, [hyper[k] for k in SGD_HYPER] + [0.0] * (len(ADAM_HYPER) - len(SGD_HYPER))


def _seed_step(seed: int, step: int) -> list:
    """Dropout's seed and step as the four 32-bit words the shader takes."""
    return [seed & 0xFFFFFFFF, seed >> 32, step & 0xFFFFFFFF, step >> 32]


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


def _offset(h: DeviceArray, elements: int) -> DeviceArray:
    """``h`` read from ``elements`` further on (with the same shape, so the same strides):
    a band of a product's operand. Its span stays the whole of ``h``'s (hazards are
    tracked as for the whole)."""
    view = DeviceArray(h.alloc, h.shape, h.dtype, None, h.size)
    view.address = h.address + elements * h.dtype.itemsize
    view.span = h.span
    return view


def _batch_band(h: DeviceArray, first: int, count: int) -> DeviceArray:
    """Matrices ``first`` to ``first + count`` of a batched (3-D) operand or product; a
    2-D one (shared by the batch) as it is."""
    if len(h.shape) != 3:
        return h
    _, rows, cols = h.shape
    view = _offset(h, first * rows * cols)
    view.shape, view.size = (count, rows, cols), count * rows * cols
    view.nbytes = view.size * h.dtype.itemsize
    return view


class GpuBackend(Backend):
    name = "gpu"

    @classmethod
    def open(cls, index: int | None = None) -> "GpuBackend":
        """Open a Vulkan device (raises DeviceUnavailable when there is none)."""
        return cls(Context.get(index))

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.device_index = ctx.info["index"]
        pool_type, staging_type = _memory_types(ctx)
        self.budget = Budget(limit_from_env())
        self.budget.reclaim = self._reclaim
        self._pool_type = pool_type
        # One pass arena per thread: a tape opened in one thread frees only that thread's
        # activations. (thread, arena) pairs; a dead thread's arena is handed on.
        self._arenas: list = []
        self._local = threading.local()
        self.persistent_pool = FreeListPool(ctx, pool_type, budget=self.budget)
        self.persistent_pool.owner = self
        self.pipelines = ctx.pipelines
        self._pipeline_of: dict = {}  # (shader, spec) -> pipeline: pipelines.get, without
                                      # its call (a dispatch's Python time is its cost)
        self.rec = Recorder(ctx, self.pipelines, staging_type)
        self._resident = weakref.WeakSet()       # tensors whose storage is here
        self._cap = None              # the Capture being recorded (under ctx.lock)
        self._sink = None             # the Capture whose scalars a replay's hooks write
        self._captures: list = []     # live Captures
        self._closing: list = []      # Captures to close once the current recording ends
        self._ops = {name: i for i, name in enumerate(UNARY_OPS)}
        self._bops = {name: i for i, name in enumerate(BINARY_OPS)}
        self._rops = {name: i for i, name in enumerate(REDUCE_OPS)}
        self._workspace_arrays = None
        self._big_partials = None     # BIG_SCRATCH's array (False: there was no room for it)
        self._cursors = [0, 0, 0]     # where the next _scratch range of each array starts
        self._tables: dict = {}       # optimizer tables kept: their operands -> (table, grid)
        limits = ctx.limits           # (read once: a field of a driver struct is slow to read)
        self._matmul_limits = (limits.maxComputeSharedMemorySize,
                               limits.maxComputeWorkGroupInvocations, ctx.tensor_cores)

    def supports(self, dtype) -> bool:
        return np.dtype(dtype) == F32

    # -- pools -------------------------------------------------------------------------------
    @property
    def pass_pool(self) -> ArenaPool:
        """The calling thread's pass arena."""
        arena = getattr(self._local, "arena", None)
        if arena is None:
            self._local.arena = arena = self._claim_arena()
        return arena

    def _claim_arena(self) -> ArenaPool:
        me = threading.current_thread()
        with self.ctx.lock:
            for pair in self._arenas:
                if not pair[0].is_alive():
                    pair[0] = me                 # its old tensors die at this thread's reset
                    return pair[1]
            arena = ArenaPool(self.ctx, self._pool_type, budget=self.budget)
            arena.owner = self
            self._arenas.append([me, arena])
            return arena

    def _reclaim(self) -> int:
        """Before an allocation fails: wait for submitted work (it may use any block), then
        give back the blocks that hold nothing live. The bytes freed."""
        with self.ctx.lock:
            self._uncapturable("device memory ran short while it was recorded", once=True)
            self.rec.flush(wait=True)
            return self.budget.trim_pools()

    # -- residency ---------------------------------------------------------------------------
    def _ours(self, h) -> bool:
        pool = h.alloc.pool
        return pool.owner is self and not pool.released

    def handle(self, t):
        ptr = t.ptr
        if ptr is not None and ptr.live and self._ours(ptr):
            if self._cap is not None:
                self._cap.note(t)
            return ptr
        if t.data is None:
            raise DeadTensorError(
                f"this {t.scope} tensor of shape {t.shape} was freed: the pass pool it lived "
                "in was reset by a later with_grad_tape() (or the device was released); read "
                "values before the next tape, or keep state in parameters")
        if not self.supports(t.dtype):
            raise ArgumentTypeError(f"the gpu backend holds float32 tensors only; this tensor "
                                    f"is {t.dtype} (convert it, or use the cpu backend)")
        # Moves here once (rule 8): a step that moves a tensor is recorded at its next call.
        self._uncapturable("a tensor moved to the device during it", once=True)
        h = self.upload(t.data, t.persistent)
        t.ptr = h
        if t.persistent:
            t.data = None                        # the device copy is now the value
        with self.ctx.lock:
            self._resident.add(t)
        return h

    def adopt(self, t, h) -> None:
        if self._cap is not None:
            self._cap.adopted(t, h)
        t.ptr, t.data = h, None
        with self.ctx.lock:
            self._resident.add(t)

    def host_value(self, t) -> np.ndarray:
        if t.data is None:
            h = self.handle(t)
            t.data = self.download(h)
        return t.data

    def reset_pass(self) -> None:
        with self.ctx.lock:
            self.rec.flush()
            self.pass_pool.reset()

    def release(self) -> None:
        """Rescue every live tensor's value into host memory, then free the device memory
        (the pools and the staging ring; the device and its compiled pipelines stay for the
        next selection)."""
        with self.ctx.lock:
            for cap in list(self._captures):
                cap.stop("the device was released")
            for t in list(self._resident):
                ptr = t.ptr
                if ptr is None or not self._ours(ptr):
                    continue
                if ptr.live and t.data is None:
                    t.data = self.download(ptr)
                if ptr.live or t.data is not None:
                    t.ptr = None
            self._resident = weakref.WeakSet()
            for cap in list(self._captures):
                cap.close()
            self._closing.clear()
            self.rec.destroy()
            for _, arena in self._arenas:
                arena.release()
            self._arenas.clear()
            self.persistent_pool.release()
            self._workspace_arrays = self._big_partials = None
            self._tables = {}
            self._cursors = [0, 0, 0]

    def memory(self) -> dict:
        """Pool statistics; the pass pool is the calling thread's arena."""
        p_bytes, p_count = self.persistent_pool.stats()
        arena = self.pass_pool
        return dict(buffer_bytes=arena.used_bytes, n_buffers=arena.count,
                    p_buffer_bytes=p_bytes, p_n_buffers=p_count,
                    reserved_bytes=arena.reserved_bytes,
                    p_reserved_bytes=self.persistent_pool.reserved_bytes)

    def transfers(self) -> dict:
        return self.rec.counters.transfers()

    def reset_transfers(self) -> None:
        self.rec.counters.reset()

    # -- step capture ------------------------------------------------------------------------
    def capture(self, run, args):
        """Record the step ``run(args)`` into a reusable command buffer (see
        ``dualgrad.gpu.capture``) and run it; returns (result, replay object). The device
        lock is held throughout: other threads' work waits rather than land in the
        recording."""
        with self.ctx.lock:
            self._workspace()         # made (and zeroed) outside the recording
            return Capture(self, args).record(run)

    def _uncapturable(self, reason: str, once: bool = False) -> None:
        """What the step does next cannot be replayed: stop recording it (if it is);
        ``once``: it will not happen again, so the next call is recorded."""
        cap = self._cap
        if cap is not None:
            with self.ctx.lock:
                cap.stop(f"the step cannot be replayed: {reason}", once)

    # -- storage ----------------------------------------------------------------------------
    def empty(self, shape, dtype=F32, persistent=False) -> DeviceArray:
        if dtype is not F32:
            dtype = np.dtype(dtype)
        size = int(math.prod(shape))                  # math.prod: a hot path
        if size > MAX_ELEMENTS:
            check_size(shape)
        if persistent:
            pool = self.persistent_pool
        else:                                         # (the property, inline: a hot path)
            pool = getattr(self._local, "arena", None) or self.pass_pool
        with self.ctx.lock:
            alloc = pool.alloc(size * dtype.itemsize)
            if self._cap is not None:
                self._cap.owned(alloc)
        return DeviceArray(alloc, shape, dtype, None, size)

    def upload(self, array, persistent=False) -> DeviceArray:
        if self._cap is not None:
            k = self._cap.input_index(array)
            if k is not None:         # an argument of a step being recorded: each run
                h = self.empty(array.shape, array.dtype, persistent)   # uploads it
                self._cap.inputs.append((k, h.alloc))
                return h
            self._uncapturable("it uploads a host array that is not one of its arguments "
                               "(make tensors from the arguments as they are)")
        array = np.asarray(array, order="C")
        h = self.empty(array.shape, array.dtype, persistent)
        if array.size:
            with self.ctx.lock:
                self.rec.upload(h.alloc, array)
        return h

    def write(self, h, array) -> None:
        self._uncapturable("it writes host values into a tensor")
        array = np.asarray(array, dtype=h.dtype, order="C")
        if array.size:
            with self.ctx.lock:
                self.rec.upload(h.alloc, array)

    def download(self, h) -> np.ndarray:
        if not h.size:
            return np.empty(h.shape, h.dtype)
        self._uncapturable("it reads a value from the device")
        with self.ctx.lock:
            raw = self.rec.download(h.alloc, h.nbytes)
        return np.frombuffer(raw, h.dtype).reshape(h.shape).copy()

    def is_live(self, h) -> bool:
        return h.live

    def indices(self, array) -> DeviceArray:
        host = np.asarray(array, dtype=np.int32, order="C")
        h = self.upload(host)
        h.host = host
        return h

    def fill(self, h, value) -> None:
        if h.size:
            word = struct.unpack("<I", struct.pack("<f", value))[0]
            with self.ctx.lock:
                if self._cap is not None:
                    self._cap.touch((h,))
                self.rec.fill(h.alloc.block.buffer, h.alloc.offset, h.nbytes, word,
                              [h.span])

    def copy(self, dst, src) -> None:
        if src.size:
            with self.ctx.lock:
                if self._cap is not None:
                    self._cap.touch((src, dst))
                self.rec.copy(src.alloc.block.buffer, src.alloc.offset, dst.alloc.block.buffer,
                              dst.alloc.offset, src.nbytes, [src.span], [dst.span])

    def reshape(self, h, shape) -> DeviceArray:
        return DeviceArray(h.alloc, shape, h.dtype, h.host)

    # -- launching ---------------------------------------------------------------------------
    def _run(self, shader: str, spec: tuple, push: bytes, groups: tuple, reads, writes):
        """Record a dispatch of (shader, spec) reading and writing these DeviceArrays
        (None among ``reads``: an unused operand)."""
        with self.ctx.lock:
            if self._cap is not None:
                self._cap.touch(reads)
                self._cap.touch(writes)
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

    # -- elementwise --------------------------------------------------------------------------
    def unary(self, op, x, a=0.0, b=0.0, out=None):
        out = self.empty(x.shape) if out is None else out
        if x.size:
            self._run("unary", (self._ops[op], 0),
                      _UNARY_PUSH.pack(x.address, 0, 0, out.address, x.size, a, b),
                      _quad_groups(x.size), [x], [out])
        return out

    def unary_backward(self, op, x, y, g, a=0.0, b=0.0, out=None):
        out = self.empty(g.shape) if out is None else out
        if g.size:
            self._run("unary", (self._ops[op], 1),
                      _UNARY_PUSH.pack(x.address, y.address, g.address, out.address, g.size,
                                       a, b), _quad_groups(g.size), [x, y, g], [out])
        return out

    def binary(self, op, a, b, out=None):
        shape, tail, flat = _broadcast_layout(a.shape, b.shape, None)
        out = self.empty(shape) if out is None else out
        if out.size:
            self._run("binary", (self._bops[op], 0, flat),
                      _ADDRESSES5.pack(a.address, b.address, 0, out.address, 0) + tail,
                      (_quad_groups if flat else _groups)(out.size), [a, b], [out])
        return out

    def binary_backward(self, op, a, b, g):
        ga, gb = self.empty(g.shape), self.empty(g.shape)
        if g.size:
            _, tail, flat = _broadcast_layout(a.shape, b.shape, g.shape)
            self._run("binary", (self._bops[op], 1, flat),
                      _ADDRESSES5.pack(a.address, b.address, g.address, ga.address,
                                       gb.address) + tail,
                      (_quad_groups if flat else _groups)(g.size), [a, b, g], [ga, gb])
        return ga, gb

    # -- reductions ---------------------------------------------------------------------------
    def _reduce_into(self, code, x, y, out, axes):
        self._reduce_run(_reduce_recipe(code, x.shape, tuple(axes), plans.reduce_plan),
                         x, y, out)

    def _reduce_run(self, passes, x, y, out):
        """Dispatch reduce.comp ``passes`` from x (and y, for tie counts) into out."""
        for p in passes:
            y_address = y.address if y is not None else 0
            if p.finish:
                with self.ctx.lock:      # (see _scratch)
                    partials, writes = self._partials(p.partials, [out])
                    counters = self._scratch(0, p.uints[0])           # one per output
                    self._run("reduce", p.spec,
                              _ADDRESSES5.pack(x.address, y_address, partials, out.address,
                                               counters) + p.tail,
                              p.groups, [x, y], writes)
                return
            dest = out if p.partials is None else self.empty(p.partials)
            self._run("reduce", p.spec,
                      _ADDRESSES5.pack(x.address, y_address, dest.address, 0, 0) + p.tail,
                      p.groups, [x, y], [dest])
            x, y = dest, None

    def _workspace(self) -> tuple:
        """(counters, partials) of finishing reductions and split-K products, made on first
        use: uint32 counters, zero between dispatches, and room for SCRATCH partial results;
        dispatches take ranges of them from ``_scratch``. The recorder does not track their
        ranges: ``_scratch`` orders a range's uses itself."""
        if self._workspace_arrays is None:
            with self.ctx.lock:
                if self._workspace_arrays is None:    # (another thread may have made them)
                    pool = self.persistent_pool
                    counters = DeviceArray(pool.alloc(4 * COUNTERS), (COUNTERS,), np.uint32)
                    partials = DeviceArray(pool.alloc(4 * SCRATCH), (SCRATCH,), F32)
                    self.rec.fill(counters.alloc.block.buffer, counters.alloc.offset,
                                  counters.nbytes, 0, [counters.span])
                    self.rec.barrier()            # the zeros before any use of them
                    self._workspace_arrays = counters, partials
        return self._workspace_arrays

    def _scratch(self, which: int, n: int) -> int:
        """The device address of ``n`` elements of the workspace's counters (``which`` 0)
        or partial results (1; 2: the big ones, made by ``_big_workspace``), the next ones
        in turn: finishing reductions and split-K products that follow one another use
        different ranges, so no barrier orders them.
        Where the ranges start again from the first, a barrier orders each use after the
        last (the counters of a range are zero again once the dispatch that used it has
        finished); the dispatches do not name these ranges to the recorder, which spares
        its hazard check two of their four ranges. The caller holds the device lock from
        here to the dispatch, so no other thread's dispatch takes the same range in
        between."""
        array = (self._big_partials if which == 2 else
                 (self._workspace_arrays or self._workspace())[which])
        start = self._cursors[which]
        if start + n > array.size:
            start = 0
            self.rec.barrier()
        self._cursors[which] = (start + n + 63) // 64 * 64    # 256-byte aligned ranges
        return array.address + 4 * start

    def _big_workspace(self) -> bool:
        """Whether the workspace has its room for BIG_SCRATCH partial results, made here
        at first need; where the device's memory (or its budget) had none, it never has,
        and those partial results are allocated, each its own."""
        if self._big_partials is None:
            try:
                alloc = self.persistent_pool.alloc(4 * BIG_SCRATCH)
            except DeviceOutOfMemory:
                self._big_partials = False
            else:
                self._big_partials = DeviceArray(alloc, (BIG_SCRATCH,), F32)
        return self._big_partials is not False

    def _partials(self, shape, writes) -> tuple:
        """(the address, ``writes`` plus what to name to the recorder) of room for partial
        results read back within their dispatch: the workspace's (its ranges are not
        tracked) up to SCRATCH values, or half of BIG_SCRATCH, else storage of their own.
        The caller holds the device lock (see ``_scratch``)."""
        used = math.prod(shape)
        if used <= SCRATCH:
            return self._scratch(1, used), writes
        if used <= BIG_SCRATCH // 2 and self._big_workspace():
            return self._scratch(2, used), writes
        allocated = self.empty(shape)
        return allocated.address, writes + [allocated]

    def reduce(self, op, x, axes, keepdims=False, out=None):
        if out is None:
            out = self.empty(_reduced_shape(x.shape, tuple(axes), keepdims))
        self._reduce_into(self._rops[op], x, None, out, axes)
        return out

    def reduce_backward(self, op, x, y, g, axes):
        out = self.empty(x.shape)
        if not x.size:
            return out
        code = self._rops[op]
        ties = None
        if op == "max":
            ties = self.empty(y.shape)
            self._reduce_into(COUNT_EQ, x, y, ties, axes)
        x4 = pad4(x.shape)
        os_ = _strides4(pad4(keepdims_shape(x.shape, axes)))
        lead = 4 - len(x.shape)
        for a in axes:
            os_[a + lead] = 0
        divisor = float(math.prod(x.shape[a] for a in axes))
        self._run("reduce_backward", (code,),
                  _push((x.address, y.address, g.address, ties.address if ties is not None else 0,
                         out.address), (x.size, *map(int, x4), *os_), (divisor,)),
                  _groups(x.size), [x, y, g, ties], [out])
        return out

    def permute(self, x, axes):
        return self._permute_into(x, axes, self.empty(tuple(x.shape[a] for a in axes)))

    def _permute_into(self, x, axes, out):
        shape = out.shape
        if x.size:
            lead = 4 - len(shape)
            xs = _strides4(pad4(x.shape))[4 - len(x.shape):]
            is_ = [0] * lead + [xs[a] for a in axes]
            self._run("permute", (), _push((x.address, out.address),
                                           (x.size, *map(int, pad4(shape)), *is_)),
                      _groups(x.size), [x], [out])
        return out

    # -- matmul -------------------------------------------------------------------------------
    def matmul(self, a, b, trans_a=False, trans_b=False, bias=None, out=None, relu=False,
               mask=None, sums=None):
        ra, ca = a.shape[-2:]
        rb, cb = b.shape[-2:]
        m, k = (ca, ra) if trans_a else (ra, ca)
        n = rb if trans_b else cb
        batched = len(a.shape) == 3 or len(b.shape) == 3
        batch = a.shape[0] if len(a.shape) == 3 else (b.shape[0] if len(b.shape) == 3 else 1)
        if out is None:
            out = self.empty((batch, m, n) if batched else (m, n))
        fused = out.size and self._matmul_into(a, b, out, trans_a, trans_b, m, n, k, batch,
                                               bias, relu=relu, mask=mask, sums=sums)
        if sums is not None and not fused:     # op(a)'s row sums by a reduction of their own
            self.reduce("sum", a, (len(a.shape) - (2 if trans_a else 1),), out=sums)
        return out

    def _matmul_into(self, a, b, out, trans_a, trans_b, m, n, k, batch, bias=None,
                     tensor_cores=True, relu=False, mask=None, sums=None) -> bool:
        """Record the product; True where ``sums`` (op(a)'s row sums) were written with it
        (the fma kernel's ROWSUM_A: one matrix, whole K), else the caller makes them."""
        shared, threads, cores = self._matmul_limits
        fuse_sums = sums is not None and batch == 1 and len(a.shape) == 2
        r = _matmul_recipe(a.shape, b.shape, trans_a, trans_b, m, n, k, batch, shared,
                           threads, cores and tensor_cores, plans.matmul_plan,
                           bias is not None, relu, mask is not None, fuse_sums)
        gx, gy, gz = r.groups
        if gx > MAX_GROUPS or gy > MAX_GROUPS or gz > MAX_GROUPS:
            self._matmul_bands(a, b, out, trans_a, trans_b, m, n, k, batch, bias, relu, mask,
                               r)
            return False
        split = r.split
        if split is not None:         # the tensor-core kernel's bf16 pieces, A's then B's
            pieces = self.empty((split.floats[0] + split.floats[1],))
            a_pieces, b_pieces = pieces.address, pieces.address + 4 * split.floats[0]
            self._run("split_bf16", split.spec,
                      _ADDRESSES4.pack(a.address, a_pieces, b.address, b_pieces) + split.tail,
                      split.groups, [a, b], [pieces])
        with self.ctx.lock:                         # (see _scratch)
            if r.partials is None:  # the pieces (tensor cores), else W and counters unused
                extra = (a_pieces, b_pieces) if split is not None else (0, 0)
                writes = [out]
            else:                                   # split K: scratch and tile counters
                counters = self._scratch(0, r.groups[0] * r.groups[1] * batch)  # one a tile
                partials, writes = self._partials(r.partials, [out])
                extra = (partials, counters)
            if r.shader in FMA_SHADERS:      # (it adds the bias, relus and masks, itself)
                if r.sums:
                    writes.append(sums)
                push = _ADDRESSES8.pack(a.address, b.address, out.address, *extra,
                                        bias.address if bias is not None else 0,
                                        mask.address if mask is not None else 0,
                                        sums.address if r.sums else 0) + r.tail
                self._run(r.shader, r.spec, push, r.groups, [a, b, bias, mask], writes)
                return r.sums
            self._run(r.shader, r.spec,
                      _ADDRESSES5.pack(a.address, b.address, out.address, *extra) + r.tail,
                      r.groups, [a, b, pieces], writes)
        self._epilogue(out, bias, relu, mask)
        return False

    def _epilogue(self, out, bias, relu, mask) -> None:
        """The bias, the relu and the mask of a product made without them, as separate ops
        in place (the same bits as the fma kernel's)."""
        if bias is not None:
            self.binary("add", out, bias, out=out)
        if relu:
            self.unary("relu", out, out=out)
        if mask is not None:
            self.unary_backward("relu", mask, mask, out, out=out)

    def _matmul_bands(self, a, b, out, trans_a, trans_b, m, n, k, batch, bias, relu, mask,
                      r):
        """A product whose grid passes a dimension's MAX_GROUPS workgroups (a tall, wide or
        many-times batched one), as several: bands of the batch, or of C's rows, each read
        and written through addresses offset into the operands (the fma kernel only: the
        tensor-core kernel's split pass reads whole operands); too many columns, as the
        transposed product, transposed back."""
        if r.groups[0] > MAX_GROUPS:            # C^T = op(B)^T op(A)^T has them as rows
            shape_t = (batch, n, m) if len(out.shape) == 3 else (n, m)
            product_t = self.empty(shape_t)
            self._matmul_into(b, a, product_t, not trans_b, not trans_a, n, m, k, batch)
            self._permute_into(product_t, (0, 2, 1) if len(shape_t) == 3 else (1, 0), out)
            self._epilogue(out, bias, relu, mask)
            return
        # Bands of the batch (of one matrix where the rows need bands too). A band of 128
        # matrices or more is never split, and a split product's grid holds fewer than 256
        # workgroups: each band's grid fits.
        if batch > 1:
            band = MAX_GROUPS if r.groups[1] <= MAX_GROUPS else 1
            if band >= batch:
                raise DeviceError(f"internal: no band of the {r.groups} grid fits")
            for b0 in range(0, batch, band):
                nb = min(band, batch - b0)
                a_, b_, out_ = (_batch_band(x, b0, nb) for x in (a, b, out))
                mask_ = _batch_band(mask, b0, nb) if mask is not None else None
                self._matmul_into(a_, b_, out_, trans_a, trans_b, m, n, k, nb, bias, False,
                                  relu, mask_)
            return
        # Bands of C's rows: every tile has 16 rows or more, and a band starting at a
        # multiple of 16 rows keeps the operands 16-byte aligned for vec4 loads.
        rows = MAX_GROUPS * 16
        if rows >= m:
            raise DeviceError(f"internal: no band of the {r.groups} grid fits")
        a_row = 1 if trans_a else a.shape[-1]       # op(A)'s row stride
        for r0 in range(0, m, rows):
            mask_ = _offset(mask, r0 * n) if mask is not None else None
            self._matmul_into(_offset(a, r0 * a_row), b, _offset(out, r0 * n), trans_a,
                              trans_b, min(rows, m - r0), n, k, batch, bias, False, relu,
                              mask_)

    # -- softmax family -----------------------------------------------------------------------
    def _rows(self, x):
        n = x.shape[-1] if x.shape else 1
        return (x.size // n if n else 0), n

    def _softmax(self, x, log):
        out = self.empty(x.shape)
        rows, n = self._rows(x)
        if x.size:
            self._run("softmax", (log, 0, 0), _push((x.address, 0, 0, out.address, 0, 0, 0,
                                                     0), (rows, n)),
                      (min(rows, MAX_GROUPS), 1, 1), [x], [out])
        return out

    def softmax(self, x):
        return self._softmax(x, 0)

    def log_softmax(self, x):
        return self._softmax(x, 1)

    def _softmax_grad(self, y, g, log):
        out = self.empty(g.shape)
        rows, n = self._rows(g)
        if g.size:
            self._run("softmax", (log, 1, 0), _push((0, y.address, g.address, out.address, 0, 0,
                                                     0, 0), (rows, n)),
                      (min(rows, MAX_GROUPS), 1, 1), [y, g], [out])
        return out

    def softmax_backward(self, y, g):
        return self._softmax_grad(y, g, 0)

    def log_softmax_backward(self, y, g):
        return self._softmax_grad(y, g, 1)

    def softmax_cross_entropy(self, logits, targets, grad=None):
        rows, n = logits.shape
        lse, loss = self.empty((rows,)), self.empty(())
        if not rows:                                # (the mean of no rows, as 0 / 0)
            self.fill(loss, float("nan"))
            return loss, lse
        with self.ctx.lock:         # (see _scratch) the rows' losses, summed in the dispatch
            outs = [lse, loss] if grad is None else [lse, loss, grad]
            per_row, writes = self._partials((rows,), outs)
            self._run("softmax", (0, 0, 1, int(grad is not None)),
                      _push((logits.address, grad.address if grad is not None else 0, 0,
                             per_row, targets.address, lse.address, self._scratch(0, 1),
                             loss.address), (rows, n)),
                      (min(rows, MAX_GROUPS), 1, 1), [logits, targets], writes)
        return loss, lse

    def softmax_cross_entropy_backward(self, logits, targets, lse, g):
        rows, n = logits.shape
        out = self.empty(logits.shape)
        self._run("xent_backward", (), _push((logits.address, targets.address, lse.address,
                                              g.address, out.address), (rows, n)),
                  _groups(out.size), [logits, targets, lse, g], [out])
        return out

    # -- layer kernels ------------------------------------------------------------------------
    def layer_norm(self, x, gamma, beta, eps):
        rows, n = self._rows(x)
        y, mean, rstd = self.empty(x.shape), self.empty((rows,)), self.empty((rows,))
        if x.size:
            self._run("layernorm", (0,), _push((x.address, gamma.address, beta.address, 0,
                                                y.address, mean.address, rstd.address),
                                               (rows, n), (eps,)),
                      (min(rows, MAX_GROUPS), 1, 1), [x, gamma, beta], [y, mean, rstd])
        return y, mean, rstd

    def layer_norm_backward(self, x, gamma, mean, rstd, g):
        rows, n = self._rows(x)
        dx, dgamma, dbeta = self.empty(x.shape), self.empty((n,)), self.empty((n,))
        if x.size:
            self._run("layernorm", (1,), _push((x.address, gamma.address, 0, g.address,
                                                dx.address, mean.address, rstd.address),
                                               (rows, n), (0.0,)),
                      (min(rows, MAX_GROUPS), 1, 1), [x, gamma, g, mean, rstd], [dx])
            self._run("layernorm_params", (), _push((x.address, g.address, mean.address,
                                                     rstd.address, dgamma.address,
                                                     dbeta.address), (rows, n)),
                      _groups(n), [x, g, mean, rstd], [dgamma, dbeta])
        else:
            self.fill(dgamma, 0.0)
            self.fill(dbeta, 0.0)
        return dx, dgamma, dbeta

    def embedding(self, table, idx):
        count, dim = idx.size, table.shape[1]
        out = self.empty((count, dim))
        if out.size:
            self._run("embedding", (0,), _push((table.address, idx.address, 0, 0, out.address),
                                               (count, dim)),
                      _groups(out.size), [table, idx], [out])
        return self.reshape(out, tuple(idx.shape) + (dim,))

    def embedding_backward(self, idx, g, num_rows):
        self._uncapturable("embedding's gradient groups the indices on the host")
        dim = g.shape[-1]
        out = self.empty((num_rows, dim))
        self.fill(out, 0.0)
        positions = idx.host.reshape(-1)
        if positions.size and dim:
            # Group the positions by the row they looked up, keeping position order.
            order = np.argsort(positions, kind="stable").astype(np.int32)
            rows, starts = np.unique(positions[order], return_index=True)
            seg = np.append(starts, positions.size).astype(np.int32)
            rows_h, order_h, seg_h = (self.upload(a) for a in (rows.astype(np.int32), order,
                                                               seg))
            self._run("embedding", (1,), _push((g.address, rows_h.address, order_h.address,
                                                seg_h.address, out.address),
                                               (rows.size, dim)),
                      _groups(rows.size * dim), [g, rows_h, order_h, seg_h], [out])
        return out

    def dropout(self, x, p, seed, step):
        out = self.empty(x.shape)
        if x.size:
            scale = float(np.float32(1.0 / (1.0 - p))) if p < 1.0 else 0.0
            words = _seed_step(seed, step)
            if self._cap is None:
                spec, push = (), _push((x.address, out.address),
                                       (x.size, dropout_threshold(p), *words), (scale,))
            else:                     # seed and step from a slot a replay rewrites
                slot = self._cap.keyed_slot(("dropout", seed, step), words)
                spec, push = (1,), _push((x.address, out.address),
                                         (x.size, dropout_threshold(p), 0, 0, 0, 0),
                                         (scale,)) + struct.pack("<4xQ", slot)
            self._run("dropout", spec, push, _groups(-(-x.size // 4)), [x], [out])
        return out

    def replay_dropout(self, recorded: tuple, seed: int, step: int) -> None:
        if self._sink is not None:
            self._sink.put_keyed(("dropout", *recorded), _seed_step(seed, step))

    # -- optimizers ---------------------------------------------------------------------------
    def adam_step(self, w, g, m, v, hyper) -> None:
        if w.size:
            floats = [hyper[k] for k in ADAM_HYPER]
            self._optim(0, (w.address, g.address, m.address, v.address), w.size, 0, floats,
                        [w, g, m, v], [w, m, v])

    def adam_steps(self, params, hyper) -> None:
        """Every (w, g, m, v) of ``params`` in one dispatch (``_steps``)."""
        floats = [hyper[k] for k in ADAM_HYPER]
        self._steps(0, [((w, g, m, v), (w, m, v)) for w, g, m, v in params if w.size], 0,
                    floats, lambda w, g, m, v: self.adam_step(w, g, m, v, hyper))

    def sgd_step(self, w, g, buf, hyper) -> None:
        if w.size:
            flags, floats = _sgd_scalars(buf, hyper)
            self._optim(1, (w.address, g.address, buf.address if buf is not None else 0, 0),
                        w.size, flags, floats, [w, g, buf],
                        [w] + ([buf] if buf is not None else []))

    def sgd_steps(self, params, hyper) -> None:
        """Every (w, g, buf) of ``params`` in one dispatch (``_steps``) for those with a
        momentum buffer and one for those without."""
        for with_buf in (True, False):
            part = [((w, g, buf), (w, buf) if with_buf else (w,)) for w, g, buf in params
                    if w.size and (buf is not None) == with_buf]
            if part:
                flags, floats = _sgd_scalars(part[0][0][2], hyper)
                self._steps(1, part, flags, floats,
                            lambda w, g, buf: self.sgd_step(w, g, buf, hyper))

    def _steps(self, kind, tensors, flags, floats, alone) -> None:
        """Updates of optim.comp's KIND sharing ``floats`` and ``flags``: ``tensors`` holds
        (operands, the ones written), up to MAX_TABLE of them in a dispatch of its TABLE
        (one alone: ``alone(*operands)``, the plain kernel). The table goes to the device
        in the command stream (vkCmdUpdateBuffer), as push constants do, so the steady
        step still uploads only its batch."""
        for at in range(0, len(tensors), MAX_TABLE):
            part = tensors[at:at + MAX_TABLE]
            if len(part) == 1:
                alone(*part[0][0])
            elif self._sink is not None:           # a replay's hook: its scalars only
                self._sink.put(floats, flags)
            else:
                table, groups = self._table([operands for operands, _ in part])
                self._optim(kind, (table.address, 0, 0, 0), len(part), flags, floats,
                            [table] + [h for operands, _ in part for h in operands],
                            [h for _, written in part for h in written], groups)

    def _table(self, part) -> tuple:
        """(the table of a TABLE dispatch over the operands of ``part`` (None: none), its
        grid): each tensor's workgroups take ``chunk`` elements each, at least 4 a
        thread. Outside a recording, a table of the same operands at the same addresses as
        one made before (a training loop's next step) is that one again, kept in the
        persistent pool: nothing is packed or written."""
        key = None
        if self._cap is None:
            key = tuple([h.address if h is not None else 0 for q in part for h in q] +
                        [q[0].size for q in part])
            made = self._tables.get(key)
            if made is not None:
                return made
        total = sum(q[0].size for q in part)
        chunk = 4 * WG * -(-total // (4 * WG * TABLE_GROUPS))
        rows, first = [], 0
        for q in part:
            addrs = [h.address if h is not None else 0 for h in q] + [0] * (4 - len(q))
            rows.append(_TABLE_ENTRY.pack(*addrs, q[0].size, first, chunk, 0))
            first += -(-q[0].size // chunk)
        data = b"".join(rows)
        with self.ctx.lock:
            cap = self._cap
            table = self.empty((len(data) // 4,), np.uint32, persistent=cap is None)
            if cap is not None:
                cap.touch((table,))
            self.rec.update(table.alloc.block.buffer, table.alloc.offset, data, [table.span])
            if cap is None and key is not None:   # (no recording began or ended meanwhile)
                if len(self._tables) >= MAX_TABLES_KEPT:
                    self._tables.clear()
                self._tables[key] = table, (first, 1, 1)
        return table, (first, 1, 1)

    def _optim(self, kind, addrs, n, flags, floats, reads, writes, table_grid=None) -> None:
        """One optim.comp dispatch of the four operands at ``addrs`` (0: none), or with
        ``table_grid`` a TABLE dispatch of that grid over the table at addrs[0], of n
        entries. While a step is recorded, the scalars and flags go to a slot of the
        capture's scalar buffer (rewritten before each replay); while a replay's hooks
        run, they only fill the next slot."""
        if self._sink is not None:
            self._sink.put(floats, flags)
            return
        groups, mode = (_groups(n), ()) if table_grid is None else (table_grid, (1,))
        if self._cap is None:
            self._run("optim", (kind, 0, *mode) if mode else (kind,),
                      _OPTIM_PUSH.pack(*addrs, n, flags, *floats), groups, reads, writes)
            return
        slot = self._cap.slot(floats, flags)
        push = _push(addrs, (n, 0), [0.0] * len(floats)) + struct.pack("<4xQ", slot)
        self._run("optim", (kind, 1, *mode), push, groups, reads, writes)
