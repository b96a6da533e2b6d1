"""Device memory: large blocks from the driver, sub-allocated by two pools.

- ``ArenaPool`` (scope "pass"): a bump allocator over its blocks whose allocations return
  when their last reference goes, to be handed out again for the same size (a training
  step asks for the same sizes again and again: activations going as the backward pass
  consumes them make room for their gradients). ``reset()`` frees everything at once and
  bumps the generation, so allocations made before it are dead.
- ``FreeListPool`` (scope "persistent"): first-fit with coalescing; an allocation returns to
  the free list when its last reference goes.

Drivers cap the number of ``vkAllocateMemory`` calls (often near 4096), so tensors never get
their own: a block is one VkDeviceMemory bound to one VkBuffer, and kernels address
sub-allocations by buffer device address (block address + offset).

The pools of a device share a ``Budget``: the bytes they may reserve together
(``DUALGRAD_GPU_MEMORY_LIMIT``, unlimited by default). When a new block would exceed it, or
the driver refuses one, the budget first reclaims blocks that hold nothing live and retries
once; then the allocation raises ``DeviceOutOfMemory`` and no pool has changed.
"""
from __future__ import annotations

import bisect
import collections
import math
import os
import re
import threading

import numpy as np

from ..errors import DeviceError, DeviceOutOfMemory, InvalidValueError
from .context import LIVE

# Core Vulkan 1.2 flags the `vulkan` package leaves undefined (None); values from the spec.
BUFFER_USAGE_SHADER_DEVICE_ADDRESS = 0x00020000
MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x00000002

ALIGN = 256                       # bytes; keeps every allocation 16-byte-vector aligned
BLOCK = 64 << 20                  # default block size
MIB = 1 << 20
LIMIT_ENV = "DUALGRAD_GPU_MEMORY_LIMIT"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def parse_limit(text: str | None) -> int | None:
    """Bytes from DUALGRAD_GPU_MEMORY_LIMIT's syntax: an integer with an optional K, M or G
    suffix (powers of 1024); empty or None means no limit."""
    if text is None or not text.strip():
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text, re.IGNORECASE)
    if match is None or int(match[1]) == 0:
        raise InvalidValueError(f"environment variable {LIMIT_ENV} is {text!r}; expected a "
                                "positive number of bytes, optionally with a K, M or G suffix "
                                "(e.g. 512M)")
    return int(match[1]) * _UNITS[match[2].upper()]


def limit_from_env() -> int | None:
    """The memory budget DUALGRAD_GPU_MEMORY_LIMIT asks for, in bytes (None: unlimited)."""
    return parse_limit(os.environ.get(LIMIT_ENV))


class Block:
    """One VkDeviceMemory bound to one VkBuffer, with its device address (and a host
    mapping when ``mapped``)."""

    def __init__(self, ctx, size: int, memory_type: int, mapped: bool = False):
        vk = ctx.vk
        self.ctx, self.size = ctx, size
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                 BUFFER_USAGE_SHADER_DEVICE_ADDRESS)
        self.buffer = self.memory = self.view = None
        self.counted = False       # whether LIVE counts it (once fully made)
        try:
            # A driver may refuse the buffer itself (lavapipe does past 4 GiB) or its memory.
            self.buffer = vk.vkCreateBuffer(ctx.device, vk.VkBufferCreateInfo(
                size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
            reqs = vk.vkGetBufferMemoryRequirements(ctx.device, self.buffer)
            flags = vk.VkMemoryAllocateFlagsInfo(flags=MEMORY_ALLOCATE_DEVICE_ADDRESS)
            self.memory = vk.vkAllocateMemory(ctx.device, vk.VkMemoryAllocateInfo(
                pNext=flags, allocationSize=reqs.size, memoryTypeIndex=memory_type), None)
            vk.vkBindBufferMemory(ctx.device, self.buffer, self.memory, 0)
            # The package's wrapper returns its argument, not the address: call the loader.
            info = vk.VkBufferDeviceAddressInfo(buffer=self.buffer)
            self.address = int(vk.lib.vkGetBufferDeviceAddress(ctx.device,
                                                               vk.ffi.addressof(info)))
            if self.address % 16:         # matmul.comp loads four floats at once (vec4)
                raise DeviceError(f"the driver placed a buffer at {self.address:#x}, not "
                                  "16-byte aligned; dualgrad's kernels need 16")
            self.view = vk.vkMapMemory(ctx.device, self.memory, 0, size, 0) if mapped else None
            LIVE["buffer"] += 1
            LIVE["memory"] += 1
            self.counted = True
        except BaseException as exc:
            self.destroy()
            if type(exc).__name__ in ("VkErrorOutOfDeviceMemory", "VkErrorOutOfHostMemory"):
                raise MemoryError(str(exc) or type(exc).__name__) from None
            raise

    def destroy(self) -> None:
        vk, device = self.ctx.vk, self.ctx.device
        if self.view is not None:
            vk.vkUnmapMemory(device, self.memory)
            self.view = None
        if self.buffer is not None:
            vk.vkDestroyBuffer(device, self.buffer, None)
            self.buffer = None
        if self.memory is not None:
            vk.vkFreeMemory(device, self.memory, None)
            self.memory = None
        if self.counted:
            LIVE["buffer"] -= 1
            LIVE["memory"] -= 1
            self.counted = False


class Allocation:
    """A range of a block. ``live`` until its pool is reset (arena) or released."""

    __slots__ = ("pool", "block", "offset", "nbytes", "generation", "address", "writes",
                 "__weakref__")

    def __init__(self, pool, block: Block, offset: int, nbytes: int, generation: int):
        self.pool, self.block, self.offset, self.nbytes = pool, block, offset, nbytes
        self.generation = generation
        self.address = block.address + offset
        self.writes = 0         # in-place writes noted (``DeviceArray.wrote``): host copies
                                # of the range made before the last one are stale

    @property
    def live(self) -> bool:
        return self.pool.is_live(self)


class ReturnedAllocation(Allocation):
    """An allocation that goes back to its pool's free list when its last reference goes
    (the persistent pool's; an arena's are freed all at once, and skip the call)."""

    __slots__ = ()

    def __del__(self):
        pool = self.pool
        if pool is not None:
            pool.dropped(self)


class PassAllocation(Allocation):
    """An arena's allocation: when its last reference goes within its generation, its
    range is queued for reuse (on the arena's ``_pending``, filed at its next allocation)."""

    __slots__ = ()

    def __del__(self):
        pool = self.pool
        if pool.generation == self.generation:
            pool._pending.append((self.block, self.offset, self.nbytes, self.generation))


class DeviceArray:
    """The gpu backend's storage handle: an allocation read with a shape and dtype.
    Reshaped views share the allocation."""

    __slots__ = ("alloc", "shape", "dtype", "host", "size", "nbytes", "address", "span")

    def __init__(self, alloc: Allocation, shape: tuple, dtype, host=None, size=None):
        self.alloc, self.shape = alloc, shape if type(shape) is tuple else tuple(shape)
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.host = host           # host copy of index arrays (the embedding backward uses it)
        # Computed once: every dispatch reads them (math.prod, not np.prod: a hot path).
        if size is None:
            size = int(math.prod(self.shape))
        self.size = size
        self.nbytes = nbytes = size * self.dtype.itemsize
        # The device address range [start, end) it occupies (for hazard tracking).
        self.address = start = alloc.address
        self.span = (start, start + (nbytes or 1))

    @property
    def scope(self) -> str:
        return self.alloc.pool.scope

    @property
    def writes(self) -> int:
        """In-place writes noted on the storage so far, through any view of it."""
        return self.alloc.writes

    def wrote(self) -> None:
        """Note an in-place write: every view's host copy made before it is stale."""
        self.alloc.writes += 1

    @property
    def live(self) -> bool:
        alloc = self.alloc                  # (Allocation.live, inline: every op asks)
        return alloc.pool.is_live(alloc)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, scope={self.scope})"


class Budget:
    """The bytes the pools of one device may reserve from the driver together (None: no
    limit), and ``reclaim``, what to try before an allocation fails: by default returning
    blocks that hold nothing live; the backend first waits for the queue, since submitted
    work may still use a block. It also meters the bytes its pools have handed out
    (``in_use``) and the most at once since ``reset_peak()`` (``peak``)."""

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self.pools: list = []
        self.reclaim = self.trim_pools
        # Smaller blocks under a small budget, so that one pool cannot take all of it.
        self.block_size = BLOCK if limit is None else min(BLOCK, max(MIB, limit // 8))
        self.in_use = self.peak = 0
        self._meter = threading.Lock()     # (pools of several threads note their changes)

    def note(self, delta: int) -> None:
        """``delta`` bytes handed out (or, negative, returned) by one of the pools."""
        with self._meter:
            self.in_use = now = self.in_use + delta
            if now > self.peak:
                self.peak = now

    def reset_peak(self) -> None:
        with self._meter:
            self.peak = self.in_use

    def reserved(self) -> int:
        return sum(p.reserved_bytes for p in self.pools)

    def block_size_for(self, need: int, preferred: int):
        """The size of a new block for ``need`` bytes within the budget (None: no room)."""
        size = max(preferred, _round_up(need, MIB))
        if self.limit is None:
            return size
        room = self.limit - self.reserved()
        return None if need > room else min(size, max(need, room))

    def trim_pools(self) -> int:
        """Give every block that holds nothing live back to the driver; the bytes freed."""
        return sum(pool.trim() for pool in list(self.pools))

    def describe(self) -> str:
        totals: dict = {}
        for pool in self.pools:
            reserved, used, n = totals.get(pool.scope, (0, 0, 0))
            totals[pool.scope] = (reserved + pool.reserved_bytes, used + pool.used_bytes, n + 1)
        text = "; ".join(f"{scope} pool{'s' if n > 1 else ''} {reserved} bytes reserved, "
                         f"{used} in use" for scope, (reserved, used, n) in totals.items())
        limit = "no limit" if self.limit is None else f"{LIMIT_ENV}={self.limit} bytes"
        return f"{text or 'no pools'} ({limit})"


class Pool:
    """Common bookkeeping: blocks from the driver, bytes and counts in use."""

    scope = "?"

    def __init__(self, ctx, memory_type: int, block_size: int | None = None,
                 budget: Budget | None = None):
        self.budget = budget if budget is not None else Budget()
        self.ctx, self.memory_type = ctx, memory_type
        self.block_size = block_size or self.budget.block_size
        self.blocks: list = []
        self.used_bytes = 0
        self.count = 0
        self.released = False
        self.owner = None          # the backend whose tensors' storage it holds
        self.lock = threading.RLock()
        self.budget.pools.append(self)

    @property
    def reserved_bytes(self) -> int:
        return sum(b.size for b in self.blocks)

    def _new_block(self, need: int) -> Block:
        """A new block of at least ``need`` bytes, or DeviceOutOfMemory with no change."""
        for retry in (False, True):
            size = self.budget.block_size_for(need, self.block_size)
            if size is None:
                reason = f"no room is left under {LIMIT_ENV}"
            else:
                try:
                    block = Block(self.ctx, size, self.memory_type)
                except MemoryError as exc:
                    reason = f"the driver refused a {size}-byte block ({exc})"
                else:
                    self.blocks.append(block)
                    return block
            if retry or not self.budget.reclaim():
                break
        raise DeviceOutOfMemory(f"device out of memory: a {need}-byte {self.scope} allocation "
                                f"needs a new block and {reason}; {self.budget.describe()}")

    def trim(self) -> int:
        """Destroy the blocks that hold nothing live; the bytes given back."""
        return 0

    def _drop_blocks(self, blocks: list) -> int:
        for block in blocks:
            self.blocks.remove(block)
            block.destroy()
        return sum(b.size for b in blocks)

    def release(self) -> None:
        """Free every block; every allocation becomes dead."""
        with self.lock:
            self.released = True
            for block in self.blocks:
                block.destroy()
            self.blocks.clear()
            self.budget.note(-self.used_bytes)
            self.used_bytes = self.count = 0
            if self in self.budget.pools:
                self.budget.pools.remove(self)

    def dropped(self, alloc: Allocation) -> None:
        """An allocation's last reference went away."""


class ArenaPool(Pool):
    """The pass pool: bump allocation, each allocation's range reused once its last
    reference goes, and everything freed at once by ``reset()``.

    A dropped range goes to a free list of its size (queued first: drops arrive from
    ``__del__`` at any time, in any thread), and an allocation of that size takes the
    longest-dropped one, unless ``idle`` (the recorder's) says a command since the last
    barrier touched it: a write there would cost a barrier, so it bumps instead. When no
    block has room, a larger free range is split before a new block is asked for. Reuse
    is safe without more: the recorder orders a command that writes a range after the
    commands that read it (it tracks reads and writes by address)."""

    scope = "pass"

    def __init__(self, ctx, memory_type: int, block_size: int | None = None,
                 budget: Budget | None = None, idle=None):
        super().__init__(ctx, memory_type, block_size, budget)
        self.generation = 0
        self.idle = idle           # idle(start, end): no command since a barrier touched it
        self._block = 0            # index of the block being filled
        self._offset = 0           # (everything past it is untouched in this generation)
        self._free: dict = {}      # size -> deque of (block, offset): dropped, oldest first
        self._pending: list = []   # (block, offset, size, generation) dropped, not yet filed

    def alloc(self, nbytes: int, fresh: bool = False) -> Allocation:
        """``nbytes`` of the pass; ``fresh``: in a range no allocation of this generation
        has used (a recorded step's argument, uploaded before its commands run)."""
        need = (nbytes + ALIGN - 1) // ALIGN * ALIGN or ALIGN   # _round_up, inline: hot
        with self.lock:
            if self._pending:
                self._file_drops()
            block = None
            spans = None if fresh else self._free.get(need)
            if spans:
                block, offset = spans[0]
                idle, start = self.idle, block.address + offset
                if idle is None or idle(start, start + need):
                    spans.popleft()
                else:
                    block = None
            if block is None:
                end = self._offset + need       # (the common case, inline: a hot path)
                blocks = self.blocks
                if blocks and end <= blocks[self._block].size:
                    block, offset = blocks[self._block], self._offset
                    self._offset = end
                else:
                    block, offset = self._bump(need, fresh)
            self.used_bytes += need
            self.count += 1
            self.budget.note(need)
            return PassAllocation(self, block, offset, need, self.generation)

    def _bump(self, need: int, fresh: bool) -> tuple:
        blocks, i, offset = self.blocks, self._block, self._offset
        while i < len(blocks):
            block = blocks[i]
            if offset + need <= block.size:
                self._block, self._offset = i, offset + need
                return block, offset
            i, offset = i + 1, 0
        split = None if fresh else self._split(need)
        if split is not None:
            return split
        block = self._new_block(need)
        self._block, self._offset = len(blocks) - 1, need
        return block, 0

    def _split(self, need: int):
        """The start of the smallest free range larger than ``need`` (its rest filed as
        free), or None."""
        sizes = [size for size, spans in self._free.items() if size > need and spans]
        if not sizes:
            return None
        size = min(sizes)
        block, offset = self._free[size].popleft()
        self._file(block, offset + need, size - need)
        return block, offset

    def _file(self, block, offset: int, size: int) -> None:
        spans = self._free.get(size)
        if spans is None:
            spans = self._free[size] = collections.deque()
        spans.append((block, offset))

    def _file_drops(self) -> None:
        pending, generation = self._pending, self.generation
        if self.released:
            pending.clear()
            return
        dropped = pending[:]            # (in the order they came; more may come meanwhile)
        del pending[:len(dropped)]
        freed = 0
        for block, offset, size, made in dropped:
            if made == generation:
                freed += size
                self.count -= 1
                self._file(block, offset, size)
        self.used_bytes -= freed
        self.budget.note(-freed)

    def stats(self) -> tuple:
        """(bytes in use, live allocations) after filing queued drops."""
        with self.lock:
            if self._pending:
                self._file_drops()
            return self.used_bytes, self.count

    def reset(self) -> None:
        with self.lock:
            self.generation += 1
            self._block = self._offset = 0
            self.budget.note(-self.used_bytes)
            self.used_bytes = self.count = 0
            self._free.clear()
            self._pending.clear()

    def renew(self) -> None:
        """Start a new generation without freeing anything: handles made so far read as
        dead while their memory stays in use (a replayed step reuses its recorded
        addresses)."""
        with self.lock:
            self.generation += 1
            self._free.clear()
            self._pending.clear()

    def trim(self) -> int:
        # Blocks past the one being filled hold nothing of the current generation.
        with self.lock:
            return self._drop_blocks(self.blocks[self._block + 1:])

    def is_live(self, alloc: Allocation) -> bool:
        return not self.released and alloc.generation == self.generation

    def release(self) -> None:
        super().release()
        self._free.clear()
        self._pending.clear()


class FreeListPool(Pool):
    """The persistent pool: first-fit over per-block free lists, coalescing on free.
    Frees arrive from ``Allocation.__del__`` (at any time, from any thread); they are
    queued and applied at the next allocation."""

    scope = "persistent"

    def __init__(self, ctx, memory_type: int, block_size: int | None = None,
                 budget: Budget | None = None):
        super().__init__(ctx, memory_type, block_size, budget)
        self._free: dict = {}      # block -> sorted list of [offset, size]
        self._pending: list = []

    def alloc(self, nbytes: int) -> Allocation:
        need = _round_up(max(nbytes, 1), ALIGN)
        with self.lock:
            self._apply_frees()
            for block in self.blocks:
                found = self._take(block, need)
                if found is not None:
                    return self._allocation(block, found, need)
            block = self._new_block(need)
            self._free[block] = [[0, block.size]]
            return self._allocation(block, self._take(block, need), need)

    def _allocation(self, block, offset, need) -> Allocation:
        self.used_bytes += need
        self.count += 1
        self.budget.note(need)
        return ReturnedAllocation(self, block, offset, need, 0)

    def _take(self, block, need: int):
        spans = self._free[block]
        for i, (offset, size) in enumerate(spans):
            if size >= need:
                if size == need:
                    del spans[i]
                else:
                    spans[i] = [offset + need, size - need]
                return offset
        return None

    def dropped(self, alloc: Allocation) -> None:
        if not self.released:
            self._pending.append((alloc.block, alloc.offset, alloc.nbytes))

    def _apply_frees(self) -> None:
        while self._pending:
            block, offset, size = self._pending.pop()
            if block not in self._free:
                continue
            self.used_bytes -= size
            self.count -= 1
            self.budget.note(-size)
            spans = self._free[block]
            i = bisect.bisect_left(spans, [offset, 0])
            spans.insert(i, [offset, size])
            if i + 1 < len(spans) and offset + size == spans[i + 1][0]:   # merge right
                spans[i][1] += spans.pop(i + 1)[1]
            if i > 0 and spans[i - 1][0] + spans[i - 1][1] == offset:      # merge left
                spans[i - 1][1] += spans.pop(i)[1]

    def trim(self) -> int:
        with self.lock:
            self._apply_frees()
            empty = [b for b in self.blocks if self._free[b] == [[0, b.size]]]
            for block in empty:
                del self._free[block]
            return self._drop_blocks(empty)

    def stats(self) -> tuple:
        """(bytes in use, live allocations) after applying queued frees."""
        with self.lock:
            self._apply_frees()
            return self.used_bytes, self.count

    def is_live(self, alloc: Allocation) -> bool:
        return not self.released

    def release(self) -> None:
        super().release()
        self._free.clear()
        self._pending.clear()
