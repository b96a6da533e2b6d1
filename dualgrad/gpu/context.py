"""The Vulkan context: instance, device choice, logical device, the compute queue.

The process has one VkInstance, made at first need, and one Context per physical device it
opens, kept for the life of the process: selecting the cpu frees the device's memory (the
backend's pools) but not the device, so switching back is cheap and drivers are not asked
to create and destroy devices over and over. Device choice: discrete > integrated > virtual
> cpu-type (lavapipe), or the device ``DUALGRAD_VK_DEVICE`` names (an index or a substring
of the name).

With ``DUALGRAD_VK_VALIDATION=1`` the instance enables the Khronos validation layer and a
debug messenger. A Python exception cannot cross the C callback, so the callback only
records each warning or error; the recorder raises them as ``ValidationError`` at its next
safe point (after recording a command, after a submit or a wait), and any still pending at
exit are printed rather than lost.
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import threading

from ..errors import DeviceUnavailable, InvalidValueError, ValidationError
from . import features

_INSTALL_HINT = ("install a Vulkan loader and driver (on Debian: apt-get install libvulkan1 "
                 "mesa-vulkan-drivers; the latter gives lavapipe, a software device)")
_TYPE_NAMES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
_TYPE_RANK = {2: 0, 1: 1, 3: 2, 4: 3, 0: 4}
API_VERSION = (1, 2)


def load_vulkan():
    """The ``vulkan`` module, or DeviceUnavailable saying what to install."""
    try:
        import vulkan
    except OSError as exc:          # the package is there, the loader library is not
        raise DeviceUnavailable(f"no Vulkan loader ({exc}); {_INSTALL_HINT}") from None
    except ImportError as exc:
        raise DeviceUnavailable(f"the Python package 'vulkan' is missing ({exc}); "
                                "pip install 'vulkan>=1.3.275.1'") from None
    return vulkan


def _version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


VALIDATION_ENV = "DUALGRAD_VK_VALIDATION"
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS = "VK_EXT_debug_utils"
# VkDebugUtilsMessageSeverityFlagBitsEXT / TypeFlagBitsEXT values from the specification.
_WARNING, _ERROR = 0x100, 0x1000
_GENERAL, _VALIDATION, _PERFORMANCE = 0x1, 0x2, 0x4

# Live Vulkan objects by kind ("buffer", "memory", "command_buffer", ...), counted where they
# are made and destroyed, so that a leak shows as growth (see live_objects()).
LIVE = collections.Counter()


def live_objects() -> dict:
    """How many Vulkan objects of each kind dualgrad holds now (blocks of memory, buffers,
    command buffers, fences, command pools)."""
    return {kind: n for kind, n in LIVE.items()}


def validation_requested() -> bool:
    """Whether DUALGRAD_VK_VALIDATION asks for the validation layer ("1"; "0" or unset: no)."""
    value = os.environ.get(VALIDATION_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise InvalidValueError(f"environment variable {VALIDATION_ENV} is {value!r}; "
                                "expected 1 (validation on) or 0 (off)")
    return value == "1"


class ValidationLog:
    """Messages from the validation layer: recorded by the C callback (which must not
    raise), raised by ``raise_pending()`` at the next safe point."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pending: list = []
        self.seen = 0

    def record(self, text: str) -> None:
        with self.lock:
            self.pending.append(text)
            self.seen += 1

    def raise_pending(self) -> None:
        """Raise every recorded, not yet raised message as one ValidationError."""
        if not self.pending:
            return
        with self.lock:
            messages, self.pending = self.pending, []
        if messages:
            raise ValidationError(f"Vulkan validation reported {len(messages)} message(s):\n" +
                                  "\n".join(messages), messages)

    def report_unraised(self) -> None:
        """At exit: messages nobody raised go to stderr instead of vanishing."""
        with self.lock:
            messages, self.pending = self.pending, []
        for text in messages:
            print(f"dualgrad: unraised Vulkan validation message: {text}", file=sys.stderr)


VALIDATION = ValidationLog()
atexit.register(VALIDATION.report_unraised)


def validation_messages() -> int:
    """How many validation warnings and errors have been reported in this process."""
    return VALIDATION.seen


def _on_message(vk, severity, types, data, user_data) -> int:
    try:
        kind = "error" if severity & _ERROR else "warning"
        name = vk.ffi.string(data.pMessageIdName).decode(errors="replace") \
            if data.pMessageIdName else "?"
        text = vk.ffi.string(data.pMessage).decode(errors="replace") if data.pMessage else ""
        VALIDATION.record(f"[{kind}] {name}: {text}")
    except BaseException as exc:  # noqa: BLE001 - nothing may escape into C
        VALIDATION.record(f"[error] (message unreadable: {exc!r})")
    return 0                      # VK_FALSE: the call that triggered it goes ahead


def _messenger_info(vk):
    """A VkDebugUtilsMessengerCreateInfoEXT for warnings and errors of every type. Built by
    hand: the package's constructor would route the callback through a module global."""
    callback = vk.ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT",
                               lambda *args: _on_message(vk, *args))
    info = vk.ffi.new("VkDebugUtilsMessengerCreateInfoEXT*")
    info.sType = vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT
    info.messageSeverity = _WARNING | _ERROR
    info.messageType = _GENERAL | _VALIDATION | _PERFORMANCE
    info.pfnUserCallback = callback
    return info, callback


def _check_layer(vk) -> None:
    names = {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}
    if VALIDATION_LAYER not in names:
        raise DeviceUnavailable(
            f"{VALIDATION_ENV}=1 asks for the Vulkan validation layer, but "
            f"{VALIDATION_LAYER} is not installed (on Debian: apt-get install "
            f"vulkan-validationlayers); unset {VALIDATION_ENV} to run without it")


def _create_validated_instance(vk):
    """An instance with the validation layer and a debug messenger that covers its own
    creation and destruction (chained in pNext) and everything after (created on it)."""
    _check_layer(vk)
    info, callback = _messenger_info(vk)
    handle = _create_instance(vk, [VALIDATION_LAYER], [DEBUG_UTILS], info)
    create = vk.vkGetInstanceProcAddr(handle, "vkCreateDebugUtilsMessengerEXT")
    messenger = create(handle, info, None)
    return handle, (info, callback, messenger)       # kept alive for the process


def _create_instance(vk, layers=(), extensions=(), pnext=None):
    app = vk.VkApplicationInfo(pApplicationName="dualgrad", applicationVersion=1,
                               pEngineName="dualgrad", engineVersion=1,
                               apiVersion=vk.VK_MAKE_VERSION(*API_VERSION, 0))
    info = vk.VkInstanceCreateInfo(pNext=pnext if pnext is not None else vk.ffi.NULL,
                                   pApplicationInfo=app,
                                   enabledLayerCount=len(layers),
                                   ppEnabledLayerNames=list(layers) or vk.ffi.NULL,
                                   enabledExtensionCount=len(extensions),
                                   ppEnabledExtensionNames=list(extensions) or vk.ffi.NULL)
    try:
        return vk.vkCreateInstance(info, None)
    except Exception as exc:  # noqa: BLE001 - any failure here means "no usable Vulkan"
        raise DeviceUnavailable(f"cannot create a Vulkan instance ({type(exc).__name__}: "
                                f"{exc}); {_INSTALL_HINT}") from None


def _describe(vk, instance, index: int, pd) -> dict:
    props = vk.vkGetPhysicalDeviceProperties(pd)
    mem = vk.vkGetPhysicalDeviceMemoryProperties(pd)
    local = sum(mem.memoryHeaps[i].size for i in range(mem.memoryHeapCount)
                if mem.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
    bda = vk.VkPhysicalDeviceBufferDeviceAddressFeatures()
    vk.vkGetPhysicalDeviceFeatures2(pd, vk.VkPhysicalDeviceFeatures2(pNext=bda))
    driver = vk.VkPhysicalDeviceDriverProperties()
    vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=driver))
    compute = [i for i, q in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(pd))
               if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
    floats = vk.VkPhysicalDeviceFloatControlsProperties()
    vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=floats))
    subgroups = vk.VkPhysicalDeviceSubgroupProperties()
    vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=subgroups))
    scans = bool(subgroups.supportedOperations & vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT and
                 subgroups.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
    atomics = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT()
    has_atomics = FLOAT_ATOMICS in {e.extensionName for e in
                                    vk.vkEnumerateDeviceExtensionProperties(pd, None)}
    if has_atomics:
        vk.vkGetPhysicalDeviceFeatures2(pd, vk.VkPhysicalDeviceFeatures2(pNext=atomics))
    api = props.apiVersion
    usable = bool(compute) and bool(bda.bufferDeviceAddress) and scans and \
        (api >> 22, (api >> 12) & 0x3FF) >= API_VERSION
    return {"index": index, "name": props.deviceName,
            "type": _TYPE_NAMES.get(props.deviceType, "other"),
            "type_code": props.deviceType, "memory_mib": local // (1 << 20),
            "api_version": _version(api),
            "driver": (vk.ffi.string(driver.driverName).decode() + " " +
                       vk.ffi.string(driver.driverInfo).decode()).strip(),
            "usable": usable, "queue_family": compute[0] if compute else None,
            "preserves_nan": bool(floats.shaderSignedZeroInfNanPreserveFloat32),
            "preserves_denormals": bool(floats.shaderDenormPreserveFloat32),
            "tensor_cores": usable and features.bf16_tensor_cores(vk, instance, pd),
            "host_import": _host_import_alignment(vk, pd),
            "float_atomics": has_atomics and bool(atomics.shaderBufferFloat32AtomicAdd)}


# Adding float32 atomically to buffers: attention's backward accumulates dq so.
FLOAT_ATOMICS = "VK_EXT_shader_atomic_float"


HOST_IMPORT = "VK_EXT_external_memory_host"


def _host_import_alignment(vk, pd) -> int:
    """The alignment of host memory the device can import (VK_EXT_external_memory_host:
    it then copies into a process's own arrays), or 0 where it cannot."""
    try:
        names = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
        if HOST_IMPORT not in names:
            return 0
        props = vk.VkPhysicalDeviceExternalMemoryHostPropertiesEXT()
        vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=props))
        return int(props.minImportedHostPointerAlignment)
    except Exception:  # noqa: BLE001 - an optional feature: without it, buffers of our own
        return 0


_lock = threading.Lock()
_instance = None
_messenger = None
_found = None
_contexts: dict = {}


def instance():
    """(vulkan module, the process's VkInstance), made at first call; with validation when
    DUALGRAD_VK_VALIDATION=1."""
    global _instance, _messenger
    with _lock:
        if _instance is None:
            validate = validation_requested()
            vk = load_vulkan()
            if validate:
                handle, _messenger = _create_validated_instance(vk)
            else:
                handle = _create_instance(vk)
            _instance = (vk, handle)
        return _instance


def validating() -> bool:
    """Whether this process's instance runs under the validation layer."""
    return _messenger is not None


def list_devices() -> list:
    """Every Vulkan device the loader reports (usable or not), as dicts."""
    global _found
    vk, handle = instance()
    with _lock:
        if _found is None:
            physical = vk.vkEnumeratePhysicalDevices(handle)
            _found = [(_describe(vk, handle, i, pd), pd) for i, pd in enumerate(physical)]
        return [dict(info) for info, _ in _found]


def choose(found: list, index: int | None) -> dict:
    """The device to open: ``index`` if given, else DUALGRAD_VK_DEVICE, else the best type."""
    if not found:
        raise DeviceUnavailable(f"no Vulkan device found; {_INSTALL_HINT}")
    wanted = os.environ.get("DUALGRAD_VK_DEVICE", "").strip() if index is None else str(index)
    if wanted:
        if wanted.isdigit():
            matches = [d for d in found if d["index"] == int(wanted)]
        else:
            matches = [d for d in found if wanted.lower() in d["name"].lower()]
        if not matches:
            names = ", ".join(f"[{d['index']}] {d['name']}" for d in found)
            raise DeviceUnavailable(f"no Vulkan device matches {wanted!r}; found: {names}")
        device = matches[0]
        if not device["usable"]:
            raise DeviceUnavailable(f"Vulkan device [{device['index']}] {device['name']} "
                                    "lacks Vulkan 1.2, a compute queue, buffer device "
                                    "addresses or subgroup arithmetic")
        return device
    usable = [d for d in found if d["usable"]]
    if not usable:
        raise DeviceUnavailable("no Vulkan device offers Vulkan 1.2 with a compute queue, "
                                "buffer device addresses and subgroup arithmetic; "
                                f"{_INSTALL_HINT}")
    return min(usable, key=lambda d: (_TYPE_RANK.get(d["type_code"], 9), d["index"]))


class Context:
    """A physical and logical device, its compute queue and its pipelines. ``lock``
    serialises every use of the queue and the command recorder across threads."""

    @classmethod
    def get(cls, index: int | None = None) -> "Context":
        """The context of the device ``index`` (or the one ``choose`` picks), opened once."""
        info = choose(list_devices(), index)
        with _lock:
            ctx = _contexts.get(info["index"])
        if ctx is None:
            ctx = cls(info)
            with _lock:
                ctx = _contexts.setdefault(info["index"], ctx)
        return ctx

    def __init__(self, info: dict):
        from .pipelines import Pipelines
        vk, self.instance = instance()
        self.vk = vk
        self.lock = threading.RLock()
        self.info = info
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[info["index"]]
        self.properties = vk.vkGetPhysicalDeviceProperties(self.physical)
        self.limits = self.properties.limits
        self.memory_properties = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self.queue_family = info["queue_family"]
        # bfloat16 tensor cores for big matrix products, where the device has them and
        # DUALGRAD_VK_TENSOR_CORES does not turn them off (features.py)
        # (the variable is read first so that a bad value is refused on every device)
        self.tensor_cores = features.requested() and bool(info["tensor_cores"])
        self.host_import = info["host_import"]       # the alignment, or 0: see HostBuffer
        self.float_atomics = info.get("float_atomics", False)
        self.device = self._create_device()
        self.queue = vk.vkGetDeviceQueue(self.device, self.queue_family, 0)
        self.pipelines = Pipelines(self)
        VALIDATION.raise_pending()

    def _create_device(self):
        vk = self.vk
        head = vk.VkPhysicalDeviceBufferDeviceAddressFeatures(bufferDeviceAddress=vk.VK_TRUE)
        extensions, chain = [], []    # chain: structs only pointers refer to, kept alive here
        if self.tensor_cores:
            extensions, head, chain = features.device_chain(vk, head)
        if self.host_import:
            extensions = extensions + [HOST_IMPORT]
        if self.float_atomics:
            head = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT(
                pNext=head, shaderBufferFloat32AtomicAdd=vk.VK_TRUE)
            chain = [*chain, head]
            extensions = extensions + [FLOAT_ATOMICS]
        features2 = vk.VkPhysicalDeviceFeatures2(pNext=head)
        priorities = vk.ffi.new("float[]", [1.0])
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.queue_family,
                                                queueCount=1, pQueuePriorities=priorities)
        info = vk.VkDeviceCreateInfo(pNext=features2, queueCreateInfoCount=1,
                                     pQueueCreateInfos=[queue_info],
                                     enabledExtensionCount=len(extensions),
                                     ppEnabledExtensionNames=extensions or vk.ffi.NULL)
        try:
            return vk.vkCreateDevice(self.physical, info, None)
        except Exception as exc:  # noqa: BLE001
            raise DeviceUnavailable(f"cannot open Vulkan device {self.info['name']} "
                                    f"({type(exc).__name__}: {exc})") from None

    @property
    def name(self) -> str:
        return self.info["name"]
