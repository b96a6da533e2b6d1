"""Host-visible buffers the device copies gradients into and out of directly, and the fence
that says when such a copy has landed: a data-parallel step all-reduces one bucket on the
host while the device runs the rest of the backward pass (``Device.stage_out``)."""
from __future__ import annotations

import numpy as np

from ..errors import DeviceError
from .context import LIVE
from .memory import BUFFER_USAGE_SHADER_DEVICE_ADDRESS, MEMORY_ALLOCATE_DEVICE_ADDRESS, Block


class HostBuffer:
    """``size`` elements of ``dtype`` in host-visible memory (``array``: its NumPy view),
    with a fence of its own that signals when the copies staged into it have landed
    (``wait``). One staging at a time: the caller waits before staging again.

    Given ``array`` (the caller's host memory, aligned as the device asks), the device
    imports those pages (VK_EXT_external_memory_host) where it can, and ``array`` is the
    buffer itself: the host has nothing to copy. Else the buffer is mapped memory of its
    own."""

    def __init__(self, ctx, size: int, dtype: np.dtype, memory_type: int, array=None):
        self.ctx, self.dtype = ctx, np.dtype(dtype)
        nbytes = size * self.dtype.itemsize
        self.block = None
        if array is not None and importable(ctx, array, size, self.dtype):
            try:
                self.block, self.array = Imported(ctx, array), array
            except Exception:  # noqa: BLE001 - a driver may refuse some pages: own memory
                self.block = None
        if self.block is None:
            self.block = Block(ctx, max(nbytes, 256), memory_type, mapped=True)
            self.array = np.frombuffer(self.block.view, self.dtype, size)
        vk = ctx.vk
        self.fence = vk.vkCreateFence(ctx.device, vk.VkFenceCreateInfo(), None)
        LIVE["fence"] += 1
        self._fence_ptr = vk.ffi.new("VkFence*", self.fence)
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


def importable(ctx, array: np.ndarray, size: int, dtype: np.dtype) -> bool:
    """Whether the device can import ``array``'s pages: it offers the extension, and the
    array (of ``size`` elements of ``dtype``, contiguous) starts and ends on its
    alignment."""
    align = ctx.host_import
    return bool(align) and array.dtype == dtype and array.shape == (size,) and \
        array.flags.c_contiguous and array.nbytes > 0 and \
        array.ctypes.data % align == 0 and array.nbytes % align == 0


class Imported:
    """Host pages of the caller's imported as device memory, bound to a buffer with a
    device address (Block's attributes, without a mapping: the host has the array)."""

    def __init__(self, ctx, array: np.ndarray):
        vk = ctx.vk
        self.ctx, self.size = ctx, array.nbytes
        self.buffer = self.memory = None
        self.view = None
        self.counted = False
        kind = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT
        pointer = vk.ffi.cast("void *", array.ctypes.data)
        try:
            query = vk.vkGetDeviceProcAddr(ctx.device, "vkGetMemoryHostPointerPropertiesEXT")
            found = vk.VkMemoryHostPointerPropertiesEXT()   # (with its sType, which the
            query(ctx.device, kind, pointer, found)         # wrapper's own lacks)
            usable = found.memoryTypeBits
            usage = (vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                     BUFFER_USAGE_SHADER_DEVICE_ADDRESS)
            self.buffer = vk.vkCreateBuffer(ctx.device, vk.VkBufferCreateInfo(
                pNext=vk.VkExternalMemoryBufferCreateInfo(handleTypes=kind), size=self.size,
                usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
            reqs = vk.vkGetBufferMemoryRequirements(ctx.device, self.buffer)
            types = usable & reqs.memoryTypeBits
            if not types or reqs.size > self.size:
                raise DeviceError("the device cannot import this host memory")
            flags = vk.VkMemoryAllocateFlagsInfo(flags=MEMORY_ALLOCATE_DEVICE_ADDRESS)
            info = vk.VkImportMemoryHostPointerInfoEXT(pNext=flags, handleType=kind,
                                                       pHostPointer=pointer)
            self.memory = vk.vkAllocateMemory(ctx.device, vk.VkMemoryAllocateInfo(
                pNext=info, allocationSize=self.size,
                memoryTypeIndex=(types & -types).bit_length() - 1), None)
            vk.vkBindBufferMemory(ctx.device, self.buffer, self.memory, 0)
            address = vk.VkBufferDeviceAddressInfo(buffer=self.buffer)
            self.address = int(vk.lib.vkGetBufferDeviceAddress(ctx.device,
                                                               vk.ffi.addressof(address)))
            LIVE["buffer"] += 1
            LIVE["memory"] += 1
            self.counted = True
        except BaseException:
            self.destroy()
            raise

    def destroy(self) -> None:
        vk, device = self.ctx.vk, self.ctx.device
        if self.buffer is not None:
            vk.vkDestroyBuffer(device, self.buffer, None)
        if self.memory is not None:
            vk.vkFreeMemory(device, self.memory, None)
        if self.counted:
            LIVE["buffer"] -= 1
            LIVE["memory"] -= 1
            self.counted = False
        self.buffer = self.memory = None
