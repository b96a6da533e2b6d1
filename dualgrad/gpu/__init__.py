"""The gpu backend: Vulkan compute shaders with resident parameters.

Importing this package needs no Vulkan loader; opening a device does (``GpuBackend.open``).
"""
from .backend import GpuBackend

__all__ = ["GpuBackend"]
