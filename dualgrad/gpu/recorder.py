"""Command recording: dispatches and copies go into a command buffer that is submitted in
batches, with barriers only where a hazard exists, and transfers through a staging ring.

Hazards are tracked by device address range: since the last barrier, which ranges were
written and which were read. A dispatch that reads a written range, or writes a range that
was read or written, gets one global memory barrier first. Each command buffer opens with a
barrier too, which orders it after everything submitted before it. Ranges a caller orders
itself are not named to the recorder (the backend's reduction workspace: it calls
``barrier()`` where it uses a range again).

The batch is submitted when the host needs a value (a download), when a pool is reset or
released, when it grows long, or once it holds some work (a few dispatches) while the device
is down to its last submitted batch; at most ``MAX_IN_FLIGHT`` batches are in flight. A
wait for a batch polls its fence for a while before it sleeps (``WAIT_POLL_SECONDS``).

While a step is captured (``begin_capture``), commands go into a reusable command buffer
that is not submitted until ``end_capture``; ``submit`` then runs it, after whatever the
ordinary stream holds (the uploads of a replay), as often as it is replayed.

Under validation, every recorded command and every submit or wait is a safe point: the
messages the layer reported during it are raised there (``ValidationLog.raise_pending``).
"""
from __future__ import annotations

import collections
import time

import numpy as np

from ..errors import DeviceError
from .context import LIVE, VALIDATION
from .memory import Block

STAGING_BYTES = 32 << 20
MAX_IN_FLIGHT = 4
MAX_BATCH = 2048                  # dispatches per command buffer before it is submitted
SUBMIT_BYTES = 4 << 30            # bytes touched by a batch's kernels before it is submitted
                                  # however busy the device is
IDLE_SUBMIT_BYTES = 16 << 20      # ... or before it is submitted to a device that is down
                                  # to its last submitted batch: the next one then waits in
                                  # the queue instead of the GPU waiting for it, and small
                                  # batches stay in one submit
MIN_BATCH = 8                     # ... once it holds this many dispatches: a submit costs
                                  # the host 15-25 us and the device a gap, so a host that
                                  # submits each dispatch falls behind (docs/performance.md)
WAIT_POLL_SECONDS = 1e-3          # a wait polls its fence this long before it sleeps: a
                                  # sleeping wait returns tens of us after the fence signals
NO_BOUNDS = (float("inf"), float("-inf"), float("inf"), float("-inf"))  # nothing tracked
MAX_TRACKED = 32                  # ranges tracked between barriers: a range within their
                                  # bounds is checked against each, which costs Python time


def _check(result: int, call: str) -> None:
    """Raise DeviceError for a failed Vulkan call made through the raw function table."""
    if result != 0:                                  # VK_SUCCESS
        raise DeviceError(f"{call} failed (VkResult {result}); the device may have been lost "
                          "or be out of memory")


class Counters:
    """What crossed between host and device, and how often the queue was used."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.h2d_bytes = self.h2d_calls = self.d2h_bytes = self.d2h_calls = 0
        self.submits = self.dispatches = self.barriers = 0

    def transfers(self) -> dict:
        return dict(h2d_bytes=self.h2d_bytes, h2d_calls=self.h2d_calls,
                    d2h_bytes=self.d2h_bytes, d2h_calls=self.d2h_calls, submits=self.submits)


class Recorder:
    def __init__(self, ctx, pipelines, staging_type: int):
        vk = self.vk = ctx.vk
        self.ctx, self.pipelines, self.lib, self.ffi = ctx, pipelines, vk.lib, vk.ffi
        self.counters = Counters()
        self.pool = vk.vkCreateCommandPool(ctx.device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            queueFamilyIndex=ctx.queue_family), None)
        LIVE["command_pool"] += 1
        self.staging = Block(ctx, STAGING_BYTES, staging_type, mapped=True)
        # The ring's reservations, as positions that only grow (offset = position % size):
        # everything before _released is no longer read by a batch in flight.
        self._staged = self._released = 0
        self._idle: list = []                      # (command buffer, fence) ready for reuse
        self._flight = collections.deque()         # [command buffer, fence, finished, staged]
        self._made: list = []                      # every (command buffer, fence) made
        self.cmd = None
        self._fence = None
        self._batch = self._touched = 0
        self._written: list = []
        self._read: list = []
        self._bounds = NO_BOUNDS                   # of the written and of the read ranges
        self._bound = None
        self._host_reads = False
        self.capturing = False
        self.timer = None                          # a KernelTimer while one is entered
        stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        self._stages = stages
        self._barrier = self._memory_barrier(
            vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT |
            vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        self._host_barrier = self._memory_barrier(vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                                  vk.VK_ACCESS_HOST_READ_BIT)
        self._region = self.ffi.new("VkBufferCopy*")
        self._layout = pipelines.layout
        self._compute = vk.VK_PIPELINE_BIND_POINT_COMPUTE
        self._compute_stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
        # Built once and reused: the package's struct constructors cost 7 to 20 us a call,
        # as much as the submission itself.
        ffi = self.ffi
        self._begin_info = ffi.new("VkCommandBufferBeginInfo*")
        self._begin_info.sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
        self._begin_info.flags = vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT
        self._submit_cmds = ffi.new("VkCommandBuffer[2]")
        self._submit_info = ffi.new("VkSubmitInfo*")
        self._submit_info.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
        self._submit_info.pCommandBuffers = self._submit_cmds
        self._fence_ptr = ffi.new("VkFence*")

    def _memory_barrier(self, src: int, dst: int):
        b = self.ffi.new("VkMemoryBarrier*")
        b.sType = self.vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
        b.srcAccessMask, b.dstAccessMask = src, dst
        return b

    # -- command buffers ---------------------------------------------------------------------
    def _begin(self) -> None:
        if self.cmd is not None:
            return
        vk = self.vk
        if self._idle:
            self.cmd, self._fence = self._idle.pop()
        else:
            self.cmd = vk.vkAllocateCommandBuffers(self.ctx.device, vk.VkCommandBufferAllocateInfo(
                commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                commandBufferCount=1))[0]
            self._fence = vk.vkCreateFence(self.ctx.device, vk.VkFenceCreateInfo(), None)
            self._made.append((self.cmd, self._fence))
            LIVE["command_buffer"] += 1
            LIVE["fence"] += 1
        _check(self.lib.vkBeginCommandBuffer(self.cmd, self._begin_info), "vkBeginCommandBuffer")
        self._emit_barrier()              # order after every earlier submission
        if self.timer is not None:
            self.timer.begun(self.lib, self.cmd)
        self._bound = None
        self._batch = self._touched = 0

    def barrier(self) -> None:
        """Order every command recorded so far before the next one: for ranges the
        recorder does not track (each command buffer opens with this barrier anyway)."""
        if self.cmd is not None:
            self._emit_barrier()

    def _emit_barrier(self) -> None:
        self.lib.vkCmdPipelineBarrier(self.cmd, self._stages, self._stages, 0, 1, self._barrier,
                                      0, self.ffi.NULL, 0, self.ffi.NULL)
        self._written.clear()
        self._read.clear()
        self._bounds = NO_BOUNDS
        self.counters.barriers += 1

    @staticmethod
    def _extent(ranges) -> tuple:
        """(lowest start, highest end, bytes) of the [start, end) ``ranges``; (inf, -inf,
        0) for none."""
        lo, hi, spanned = NO_BOUNDS[0], NO_BOUNDS[1], 0
        for s, e in ranges:
            if s < lo:
                lo = s
            if e > hi:
                hi = e
            spanned += e - s
        return lo, hi, spanned

    @staticmethod
    def _crosses(start: int, end: int, tracked) -> bool:
        """Whether [start, end) overlaps any of the ``tracked`` ranges."""
        for ts, te in tracked:
            if start < te and ts < end:
                return True
        return False

    def idle(self, start: int, end: int) -> bool:
        """Whether no command since the last barrier touched [start, end): writing it now
        needs no barrier (the pass pool prefers such ranges)."""
        w_lo, w_hi, r_lo, r_hi = self._bounds
        return not (start < w_hi and w_lo < end and self._crosses(start, end, self._written)
                    or start < r_hi and r_lo < end and self._crosses(start, end, self._read))

    def _sync(self, reads, writes) -> int:
        """Emit a barrier if this command touches what an unbarriered command wrote, or
        writes what one read (or too many ranges are tracked); then note its own ranges.
        Returns the bytes they span. A range outside the bounds of the written (read) ones
        is cleared without a look at each: most are (fresh outputs, parameters)."""
        w_lo, w_hi, r_lo, r_hi = self._bounds
        written, read, crosses = self._written, self._read, self._crosses
        hazard = len(written) + len(read) > MAX_TRACKED
        if not hazard:
            for s, e in writes:
                if (s < w_hi and w_lo < e and crosses(s, e, written) or
                        s < r_hi and r_lo < e and crosses(s, e, read)):
                    hazard = True
                    break
            else:
                for s, e in reads:
                    if s < w_hi and w_lo < e and crosses(s, e, written):
                        hazard = True
                        break
        if hazard:
            self._emit_barrier()
            w_lo, w_hi, r_lo, r_hi = NO_BOUNDS
        r0, r1, r_bytes = self._extent(reads)
        w0, w1, w_bytes = self._extent(writes)
        self._bounds = (w0 if w0 < w_lo else w_lo, w1 if w1 > w_hi else w_hi,
                        r0 if r0 < r_lo else r_lo, r1 if r1 > r_hi else r_hi)
        if len(reads) + len(writes) <= MAX_TRACKED:
            read += reads
            written += writes
        else:       # (an optimizer's table dispatch): noted as the range spanning them,
            if reads:                   # which finds every hazard they would, and maybe more
                read.append((r0, r1))
            if writes:
                written.append((w0, w1))
        return r_bytes + w_bytes

    def dispatch(self, pipeline, push: bytes, groups: tuple, reads, writes) -> None:
        """Record one kernel launch; ``reads``/``writes`` are [start, end) address ranges."""
        if self.cmd is None:
            self._begin()
        touched = self._touched = self._touched + self._sync(reads, writes)
        lib, cmd = self.lib, self.cmd
        if pipeline is not self._bound:
            lib.vkCmdBindPipeline(cmd, self._compute, pipeline)
            self._bound = pipeline
        lib.vkCmdPushConstants(cmd, self._layout, self._compute_stage, 0, len(push), push)
        lib.vkCmdDispatch(cmd, *groups)
        if self.timer is not None and not self.capturing:
            self.timer.dispatched(lib, cmd, pipeline)
        self.counters.dispatches += 1
        self._batch = batch = self._batch + 1
        if batch >= MAX_BATCH or touched >= SUBMIT_BYTES or (
                touched >= IDLE_SUBMIT_BYTES and self._device_short_of_work()):
            self.flush()
        if VALIDATION.pending:
            VALIDATION.raise_pending()

    def copy(self, src, src_offset: int, dst, dst_offset: int, size: int, reads=(),
             writes=()) -> None:
        """Record a buffer-to-buffer copy (VkBuffer handles and byte offsets)."""
        self._begin()
        self._sync(reads, writes)
        r = self._region
        r.srcOffset, r.dstOffset, r.size = src_offset, dst_offset, size
        self.lib.vkCmdCopyBuffer(self.cmd, src, dst, 1, r)
        self._timed("copy")
        VALIDATION.raise_pending()

    def _timed(self, kind: str) -> None:
        """A transfer command just recorded gets its timestamp where a KernelTimer runs."""
        if self.timer is not None and not self.capturing:
            self.timer.transferred(self.lib, self.cmd, kind)

    def read_by_host(self) -> None:
        """The host reads what the recorded copies wrote once the batch is done: the batch
        ends with a transfer-to-host barrier (a captured command buffer gets it now)."""
        if self.capturing:
            self.lib.vkCmdPipelineBarrier(
                self.cmd, self.vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                self.vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, self._host_barrier, 0,
                self.ffi.NULL, 0, self.ffi.NULL)
        else:
            self._host_reads = True

    def fill(self, buffer, offset: int, size: int, word: int, writes) -> None:
        """Record vkCmdFillBuffer: every 4-byte word of the range set to ``word``."""
        self._begin()
        self._sync((), writes)
        self.lib.vkCmdFillBuffer(self.cmd, buffer, offset, size, word)
        self._timed("fill")
        VALIDATION.raise_pending()

    def update(self, buffer, offset: int, data: bytes, writes) -> None:
        """Record vkCmdUpdateBuffer: ``data`` (a multiple of 4 bytes, at most 65536)
        written at ``offset`` from the command buffer itself, as push constants are."""
        self._begin()
        self._sync((), writes)
        self.lib.vkCmdUpdateBuffer(self.cmd, buffer, offset, len(data), data)
        self._timed("update")
        VALIDATION.raise_pending()

    # -- capture ----------------------------------------------------------------------------
    def begin_capture(self) -> None:
        """Submit what is recorded, then record into a fresh reusable command buffer."""
        vk = self.vk
        self.flush()
        self.cmd = vk.vkAllocateCommandBuffers(self.ctx.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=1))[0]
        LIVE["command_buffer"] += 1
        # Simultaneous use: a replay may be submitted while the previous one still runs
        # (each begins with a barrier, so they run in order).
        vk.vkBeginCommandBuffer(self.cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT))
        self.capturing = True
        self._emit_barrier()
        self._bound = None
        self._batch = self._touched = 0
        VALIDATION.raise_pending()

    def end_capture(self):
        """Close the captured command buffer and return it (not yet submitted)."""
        cmd, self.cmd, self.capturing = self.cmd, None, False
        self.vk.vkEndCommandBuffer(cmd)
        VALIDATION.raise_pending()
        return cmd

    def submit(self, captured) -> None:
        """Submit the ordinary stream's commands, then the captured command buffer."""
        self._begin()
        self.flush(then=captured)

    def free_captured(self, captured) -> None:
        """Free a captured command buffer once no submission uses it."""
        self.flush(wait=True)
        self.vk.vkFreeCommandBuffers(self.ctx.device, self.pool, 1, [captured])
        LIVE["command_buffer"] -= 1

    # -- submission --------------------------------------------------------------------------
    def flush(self, wait: bool = False, then=None) -> None:
        """Submit what has been recorded (followed by the captured command buffer
        ``then``); with ``wait``, also wait for all of it. While capturing, nothing is
        submitted: the caller ends the capture before it needs the device to run."""
        vk = self.vk
        if self.capturing:
            if wait:
                raise DeviceError("internal: a wait for the device while a step is captured")
            return
        timed = self.timer is not None and self.cmd is not None
        wait = wait or timed
        if self.cmd is not None:
            if self._host_reads:
                self.lib.vkCmdPipelineBarrier(
                    self.cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT,
                    0, 1, self._host_barrier, 0, self.ffi.NULL, 0, self.ffi.NULL)
                self._host_reads = False
            _check(self.lib.vkEndCommandBuffer(self.cmd), "vkEndCommandBuffer")
            self._submit_cmds[0] = self.cmd
            if then is not None:
                self._submit_cmds[1] = then
            self._submit_info.commandBufferCount = 1 if then is None else 2
            _check(self.lib.vkQueueSubmit(self.ctx.queue, 1, self._submit_info, self._fence),
                   "vkQueueSubmit")
            self._flight.append([self.cmd, self._fence, False, self._staged])
            self.counters.submits += 1
            self.cmd = self._fence = None
        if wait:
            while self._flight:
                self._retire_oldest()
            self._released = self._staged       # nothing submitted reads the ring now
            if timed:
                self.timer.finished()
        else:
            flight = self._flight
            while flight and (len(flight) > MAX_IN_FLIGHT or self._finished(flight[0])):
                self._retire_oldest()
        VALIDATION.raise_pending()

    def _finished(self, batch: list) -> bool:
        """Whether a submitted batch [command buffer, fence, finished, ...] has completed. A
        fence seen signalled stays so until the batch is retired, so it is asked once."""
        if not batch[2]:
            batch[2] = self.lib.vkGetFenceStatus(self.ctx.device, batch[1]) == \
                self.vk.VK_SUCCESS
        return batch[2]

    def _device_short_of_work(self) -> bool:
        """Whether the device is down to its last submitted batch (or idle) and this batch
        holds MIN_BATCH dispatches or more."""
        flight = self._flight
        return self._batch >= MIN_BATCH and (len(flight) < 2 or self._finished(flight[-2]))

    def _retire_oldest(self) -> None:
        """Wait for the oldest submitted batch (unless it is known to be finished) and
        keep its command buffer and fence for reuse. (vkBeginCommandBuffer resets the
        buffer: its pool allows that, and it is no longer pending.)"""
        cmd, fence, finished, staged = self._flight.popleft()
        self._fence_ptr[0] = fence
        if not finished:
            self._wait(fence)
        self._released = staged
        _check(self.lib.vkResetFences(self.ctx.device, 1, self._fence_ptr), "vkResetFences")
        self._idle.append((cmd, fence))

    def _wait(self, fence) -> None:
        """Wait for ``fence`` (in ``_fence_ptr``): poll its status for up to
        WAIT_POLL_SECONDS, then sleep in vkWaitForFences."""
        lib, device, not_ready = self.lib, self.ctx.device, self.vk.VK_NOT_READY
        status, clock = lib.vkGetFenceStatus, time.perf_counter
        give_up = clock() + WAIT_POLL_SECONDS
        result = status(device, fence)
        while result == not_ready and clock() < give_up:
            result = status(device, fence)
        if result == not_ready:
            result = lib.vkWaitForFences(device, 1, self._fence_ptr, self.vk.VK_TRUE,
                                         0xFFFFFFFFFFFFFFFF)
        if result != self.vk.VK_SUCCESS:
            raise DeviceError(f"waiting for the GPU failed (VkResult {result}); the "
                              "device may have been lost")

    # -- transfers ---------------------------------------------------------------------------
    def _reserve(self, nbytes: int) -> int:
        """An offset in the staging ring with ``nbytes`` free (nbytes <= ring size): after
        the last reservation, or at the ring's start once nothing recorded or in flight
        reads it. When the ring is full, waits for its oldest batches in flight, not for
        all of them: the device keeps the rest to run. A command buffer run after it is
        recorded (a captured step) must not read the ring: its uploads are the ordinary
        stream's, made for each run."""
        size = self.staging.size
        flight = self._flight
        # Batches the device has finished give their part of the ring back first (a fence
        # status each), so that once all of it is back the copy goes to the ring's start,
        # still in the host's cache.
        while flight and self._released != self._staged and self._finished(flight[0]):
            self._retire_oldest()
        while True:
            staged = self._staged
            if self._released == staged:
                staged = -(-staged // size) * size        # the ring's start
                self._released = staged
            offset = staged % size
            if offset + nbytes > size:                     # contiguous: skip the ring's end
                staged, offset = staged + size - offset, 0
            if staged + nbytes - self._released <= size:
                break
            if self._flight:
                self._retire_oldest()
            else:                         # this batch holds the space: submit it, then wait
                self.flush(wait=True)
        self._staged = staged + (nbytes + 255) // 256 * 256
        return offset

    def upload(self, alloc, data: np.ndarray) -> None:
        """Copy a host array into an allocation (through the staging ring)."""
        raw = memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        done, total = 0, raw.nbytes
        while done < total:
            n = min(total - done, self.staging.size)
            at = self._reserve(n)
            self.staging.view[at:at + n] = raw[done:done + n]
            dst = alloc.address + done
            self.copy(self.staging.buffer, at, alloc.block.buffer, alloc.offset + done, n,
                      writes=[(dst, dst + n)])
            done += n
        self.counters.h2d_bytes += total
        self.counters.h2d_calls += 1

    def download(self, alloc, nbytes: int) -> bytes:
        """The first ``nbytes`` of an allocation, after all recorded work completes."""
        out = bytearray(nbytes)
        done = 0
        while done < nbytes:
            n = min(nbytes - done, self.staging.size)
            at = self._reserve(n)
            src = alloc.address + done
            self.copy(alloc.block.buffer, alloc.offset + done, self.staging.buffer, at, n,
                      reads=[(src, src + n)])
            self._host_reads = True
            self.flush(wait=True)
            out[done:done + n] = self.staging.view[at:at + n]
            done += n
        self.counters.d2h_bytes += nbytes
        self.counters.d2h_calls += 1
        return bytes(out)

    def destroy(self) -> None:
        vk, device = self.vk, self.ctx.device
        self.flush(wait=True)
        for cmd, fence in self._made:
            vk.vkDestroyFence(device, fence, None)
        vk.vkDestroyCommandPool(device, self.pool, None)   # frees its command buffers
        LIVE["fence"] -= len(self._made)
        LIVE["command_buffer"] -= len(self._made)
        LIVE["command_pool"] -= 1
        self.staging.destroy()
        self._made.clear()
        self._idle.clear()
        VALIDATION.raise_pending()
