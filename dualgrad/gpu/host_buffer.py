"""Host-visible buffers the device copies gradients into and out of directly, and the fence
that says when such a copy has landed: a data-parallel step all-reduces one bucket on the
host while the device runs the rest of the backward pass (``Device.stage_out``)."""
from __future__ import annotations

import numpy as np

from ..errors import DeviceError
from .context import LIVE
from .memory import Block


class HostBuffer:
    """``size`` elements of ``dtype`` in mapped host-visible memory (``array``: its NumPy
    view), with a fence of its own that signals when the copies staged into it have landed
    (``wait``). One staging at a time: the caller waits before staging again."""

    def __init__(self, ctx, size: int, dtype: np.dtype, memory_type: int):
        self.ctx, self.dtype = ctx, np.dtype(dtype)
        nbytes = size * self.dtype.itemsize
        self.block = Block(ctx, max(nbytes, 256), memory_type, mapped=True)
        vk = ctx.vk
        self.fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(), None)
        LIVE["fence"] += 1
        self._fence_ptr = vk.ffi.new("VkFence*", self.fence)
        self.array = np.frombuffer(self.block.view, self.dtype, size)
        self.armed = False          # a submission will signal the fence

    @property
    def address(self) -> int:
        return self.block.address

    def arm(self, queue) -> None:
        """Signal the fence once everything submitted to ``queue`` so far has run (a
        submission of no command buffers; the caller holds the queue's lock)."""
        lib, vk = self.ctx.vk.lib, self.ctx.vk
        if self.armed:
            raise DeviceError("internal: a host buffer staged into twice without a wait")
        lib.vkResetFences(self.ctx.device, 1, self._fence_ptr)
        result = lib.vkQueueSubmit(queue, 0, vk.ffi.NULL, self.fence)
        if result != vk.VK_SUCCESS:
            raise DeviceError(f"vkQueueSubmit failed (VkResult {result}); the device may "
                              "have been lost")
        self.armed = True

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the staged copies have landed, waiting up to ``timeout`` seconds
        (None: as long as it takes). The driver call releases the interpreter's lock."""
        if not self.armed:
            return True
        vk = self.ctx.vk
        ns = 0xFFFFFFFFFFFFFFFF if timeout is None else max(0, int(timeout * 1e9))
        result = vk.lib.vkWaitForFences(self.ctx.device, 1, self._fence_ptr, vk.VK_TRUE, ns)
        if result == vk.VK_TIMEOUT:
            return False
        if result != vk.VK_SUCCESS:
            raise DeviceError(f"waiting for the GPU failed (VkResult {result}); the device "
                              "may have been lost")
        self.armed = False
        return True

    def close(self) -> None:
        """Free the memory and the fence (after waiting for a staging still in flight)."""
        if self.block is None:
            return
        self.wait()
        self.ctx.vk.vkDestroyFence(self.ctx.device, self.fence, None)
        LIVE["fence"] -= 1
        self.array = None
        self.block.destroy()
        self.block = None
