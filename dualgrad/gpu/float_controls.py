"""IEEE behaviour the shaders need, asked of the driver through SPIR-V float controls.

Without them a Vulkan driver may optimise as if NaN, infinities and signed zeros did not
exist (relu(NaN) then gives 0) and may flush subnormal numbers to zero. The shaders are
compiled once; before a pipeline is made, their SPIR-V gets the execution modes
SignedZeroInfNanPreserve and DenormPreserve for 32-bit floats — each only where the device
reports support for it (Vulkan 1.2's VkPhysicalDeviceFloatControlsProperties).
"""
from __future__ import annotations

import struct

OP_EXECUTION_MODE, OP_CAPABILITY, OP_ENTRY_POINT = 16, 17, 15
# (capability, execution mode) of each control, from the SPIR-V specification
DENORM_PRESERVE = (4464, 4459)
SIGNED_ZERO_INF_NAN_PRESERVE = (4466, 4461)


def supported(info: dict) -> tuple:
    """The controls a device (as ``context.list_devices`` describes it) offers for 32-bit
    floats."""
    return tuple(control for control, key in ((SIGNED_ZERO_INF_NAN_PRESERVE, "preserves_nan"),
                                              (DENORM_PRESERVE, "preserves_denormals"))
                 if info[key])


def apply(code: bytes, controls) -> bytes:
    """SPIR-V ``code`` with an OpCapability and an OpExecutionMode (for 32-bit floats) added
    per control, after the module's own capabilities and execution modes."""
    if not controls:
        return code
    words = list(struct.unpack(f"<{len(code) // 4}I", code))
    at, last_capability, last_mode, entry = 5, None, None, None
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        if opcode == OP_CAPABILITY:
            last_capability = at + count
        elif opcode == OP_ENTRY_POINT:
            entry = words[at + 2]
            last_mode = last_mode or at + count
        elif opcode == OP_EXECUTION_MODE:
            last_mode = at + count
        at += count
    if last_capability is None or entry is None:
        raise ValueError("not a SPIR-V compute module with an entry point")
    modes = [w for cap, mode in controls for w in ((4 << 16) | OP_EXECUTION_MODE, entry, mode, 32)]
    caps = [w for cap, mode in controls for w in ((2 << 16) | OP_CAPABILITY, cap)]
    words[last_mode:last_mode] = modes                 # the later insertion point first
    words[last_capability:last_capability] = caps
    return struct.pack(f"<{len(words)}I", *words)
