"""Backend selection: ``ag_device()``, the active backend, device release and rescue."""
from __future__ import annotations

import contextlib
import sys
import threading

from ..errors import DeviceUnavailable, bad_type, bad_value

_lock = threading.RLock()
_cpu = None
_gpu = None            # the gpu backend while selected (one device at a time)
_active = None


class _Override(threading.local):
    """A per-thread override of the active backend (``using``). The class attribute is
    every thread's default: reading it costs no missed lookup, and ``active`` runs once
    or more for every op."""
    backend = None


_local = _Override()


def _cpu_backend():
    global _cpu
    if _cpu is None:
        from ..cpu import CpuBackend
        _cpu = CpuBackend()
    return _cpu


def active():
    """The backend ops run on."""
    override = _local.backend
    if override is not None:
        return override
    return _active if _active is not None else _cpu_backend()


@contextlib.contextmanager
def using(backend):
    """Run ops on ``backend`` in this thread for the ``with`` block, without selecting it:
    nothing is released or rescued on entry or exit. Tensors made inside must be used only
    inside such blocks for the same backend (the lockstep harness keeps one model per
    backend this way)."""
    previous = _local.backend
    _local.backend = backend
    try:
        yield backend
    finally:
        _local.backend = previous


def cpu_backend():
    """The cpu backend (always available)."""
    return _cpu_backend()


def _parse(name: str):
    """'cpu' | 'gpu' | 'gpu:N' -> (kind, index or None)."""
    if not isinstance(name, str):
        raise bad_type("ag_device", "name", name, "'cpu', 'gpu' or 'gpu:N'")
    kind, _, index = name.strip().lower().partition(":")
    if kind == "cpu" and not index:
        return "cpu", None
    if kind == "gpu":
        if not index:
            return "gpu", None
        if index.isdigit():
            return "gpu", int(index)
    raise bad_value("ag_device", "name", name, "'cpu', 'gpu' or 'gpu:N' with N a device index")


def ag_device(name: str | None = None) -> str:
    """Select the backend: ``"cpu"`` (the default), ``"gpu"`` (the best Vulkan device, or
    the one ``DUALGRAD_VK_DEVICE`` names) or ``"gpu:N"``. Returns the previous backend's
    name; with no argument, returns the active backend's name and changes nothing.

    Leaving the gpu (selecting ``"cpu"`` or another device) rescues every live tensor's
    value from the device into host memory, then frees the device pools.
    """
    global _active, _gpu
    with _lock:
        previous = active().name
        if name is None:
            return previous
        kind, index = _parse(name)
        if kind == "cpu":
            _leave_gpu()
            _active = _cpu_backend()
            return previous
        from ..gpu import GpuBackend          # imported only when asked for
        if _gpu is not None and (index is None or _gpu.device_index == index):
            _active = _gpu
            return previous
        backend = GpuBackend.open(index)      # raises DeviceUnavailable before any change
        _leave_gpu()
        _gpu = _active = backend
        _notice_software_device(backend.ctx.info)
        return previous


def is_placement(fn: str, value) -> bool:
    """Whether ``value`` names where a tensor lives, as PyTorch's ``.to(device)`` takes it:
    "cpu", "gpu", "cuda" or "cuda:N". Tensors live on the active backend, so "cpu" (the
    host, where ``numpy()`` reads any tensor) and the active backend's name are accepted as
    they are; naming the gpu while the cpu backend is active raises, saying how to select
    it."""
    if not isinstance(value, str):
        return False
    kind, _, index = value.strip().lower().partition(":")
    if kind not in ("cpu", "gpu", "cuda") or (index and not index.isdigit()):
        return False
    if kind != "cpu" and active().name == "cpu":
        raise bad_value(fn, "device", value, "'cpu' while the cpu backend is active: tensors "
                        "live on the active backend; select the gpu for the whole program "
                        "with dg.ag_device('gpu')")
    return True


_software_noticed = False


def _notice_software_device(info: dict) -> None:
    """Say once per process that a software Vulkan device (lavapipe) emulates a GPU on the
    CPU: right for testing, but slower than the cpu backend."""
    global _software_noticed
    if info.get("type") == "cpu" and not _software_noticed:
        _software_noticed = True
        print(f"dualgrad: the gpu device '{info.get('name', '?')}' is a software emulation "
              "on the CPU, meant for testing (results hold, speed does not; the cpu backend "
              "is faster)", file=sys.stderr, flush=True)


def _leave_gpu() -> None:
    global _gpu, _active
    if _gpu is not None:
        residency.rescue(_gpu)
        _gpu.release()
        _gpu = None
        _active = None


def gpu_status() -> tuple:
    """(devices, reason): the Vulkan devices found, and why there are none when empty."""
    try:
        from ..gpu.context import list_devices
        return list_devices(), ""
    except DeviceUnavailable as exc:
        return [], str(exc)
    except ImportError as exc:         # the gpu backend's own modules failed to import
        return [], f"the gpu backend cannot be imported: {exc}"


def devices() -> list:
    """The Vulkan devices found: a list of dicts (index, name, type, memory_mib,
    api_version, driver). Empty when there is no Vulkan loader or no device."""
    return gpu_status()[0]


def tape_mem() -> dict:
    """Device pool usage: ``buffer_bytes`` and ``n_buffers`` for the pass pool (bytes and
    count of live allocations: a tensor's storage returns when the program and the tape
    no longer hold it), ``p_buffer_bytes`` and ``p_n_buffers`` for the persistent pool,
    the bytes reserved from the driver for each, and ``peak_bytes``: the most that the
    pools together had handed out at once since ``reset_peak_memory_stats()`` (or since
    the device was opened), as PyTorch's ``max_memory_allocated``. Zeros on cpu."""
    return active().memory()


def reset_peak_memory_stats() -> None:
    """Start ``tape_mem()["peak_bytes"]`` again from the bytes in use now (PyTorch's
    ``torch.cuda.reset_peak_memory_stats``). Nothing on cpu."""
    active().reset_peak_memory()


def transfer_stats() -> dict:
    """Bytes and calls host-to-device (``h2d_*``) and device-to-host (``d2h_*``), and queue
    submits, since the last ``reset_transfer_stats()``. Zeros on cpu."""
    return active().transfers()


def reset_transfer_stats() -> None:
    """Zero the counters ``transfer_stats()`` reports."""
    active().reset_transfers()


from . import residency  # noqa: E402  (it imports this module)
