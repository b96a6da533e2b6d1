"""``torch.cuda``'s common names, for programs written for PyTorch: ``is_available()`` says
whether the gpu backend is active, so that ``"cuda" if torch.cuda.is_available() else "cpu"``
names where dualgrad's tensors live (select the gpu with ``dg.ag_device("gpu")``; tensors
live on the active backend, and naming "cuda" while the cpu backend is active raises).
``device_count()`` counts the Vulkan devices found (``dg.devices()``)."""
from __future__ import annotations

from ..api import device as _device
from ..api.random import manual_seed
from . import amp  # noqa: F401  (torch.cuda.amp.autocast, torch.cuda.amp.GradScaler)


def is_available() -> bool:
    """Whether the gpu backend is active (``dg.ag_device("gpu")``)."""
    return _device.active().name == "gpu"


def device_count() -> int:
    """The number of Vulkan devices found."""
    return len(_device.devices())


def synchronize(device=None) -> None:
    """Wait until every op called so far has finished (on the cpu backend they have)."""
    _device.active().synchronize()


def get_device_name(device=None) -> str:
    """The active gpu's name (with the cpu backend active, the first Vulkan device's)."""
    backend = _device.active()
    if backend.name == "gpu":
        return backend.ctx.info.get("name", "?")
    found = _device.devices()
    return found[0]["name"] if found else ""


def manual_seed_all(seed: int) -> None:
    """``dg.manual_seed``: one generator serves every device."""
    manual_seed(seed)


def memory_allocated(device=None) -> int:
    """The bytes the device pools have handed out and not had back (0 on the cpu)."""
    stats = _device.tape_mem()
    return stats["buffer_bytes"] + stats["p_buffer_bytes"]


def max_memory_allocated(device=None) -> int:
    """The most bytes handed out at once since ``reset_peak_memory_stats()``."""
    return _device.tape_mem()["peak_bytes"]


def reset_peak_memory_stats(device=None) -> None:
    _device.reset_peak_memory_stats()


def is_bf16_supported() -> bool:
    """bfloat16 tensors work on both backends."""
    return True


__all__ = ["is_available", "device_count", "synchronize", "get_device_name", "manual_seed",
           "manual_seed_all", "memory_allocated", "max_memory_allocated",
           "reset_peak_memory_stats", "is_bf16_supported", "amp"]
