"""Optional device features: bfloat16 and float16 cooperative matrices (tensor cores) for
matmul.

Where a device multiplies 16 x 16 bfloat16 and float16 matrices into float32 ones within a
subgroup of 32 (VK_KHR_cooperative_matrix with VK_KHR_shader_bfloat16), large matrix
products run on them: float32 ones through matmul_f16x3.comp, at float32 accuracy
(matmul_tc.glsl and the tolerance table say why), autocast's through matmul_bf16x6.comp
(and convolutions); elsewhere, and with ``DUALGRAD_VK_TENSOR_CORES=0``, every product runs
on the float32 fma kernel, matmul.comp.

The ``vulkan`` package (1.3.275) predates VK_KHR_shader_bfloat16, so that extension's
feature struct is laid out here by hand, from the specification.
"""
from __future__ import annotations

import os

from ..errors import InvalidValueError

ENV = "DUALGRAD_VK_TENSOR_CORES"
EXTENSIONS = ("VK_KHR_cooperative_matrix", "VK_KHR_shader_bfloat16")
_BF16_FEATURES = 1000141000       # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR
_COOPMAT_PROPERTIES = 1000506001  # VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
_BF16, _F16, _F32 = 1000141000, 0, 1     # VkComponentTypeKHR
_SUBGROUP_SCOPE = 3               # VK_SCOPE_SUBGROUP_KHR
# The struct: sType, (padding), pNext, then shaderBFloat16Type, shaderBFloat16DotProduct,
# shaderBFloat16CooperativeMatrix (VkBool32 each), as 32-bit words.
_BF16_TYPE, _BF16_COOPMAT = 4, 6


def requested() -> bool:
    """Whether DUALGRAD_VK_TENSOR_CORES allows them ("1" or unset: yes; "0": no)."""
    value = os.environ.get(ENV, "").strip()
    if value not in ("", "0", "1"):
        raise InvalidValueError(f"environment variable {ENV} is {value!r}; expected 1 "
                                "(use tensor cores where the device has them) or 0 (never)")
    return value != "0"


def _bf16_struct(vk, bools=(0, 0)):
    words = vk.ffi.new("uint32_t[8]")
    words[0] = _BF16_FEATURES
    words[_BF16_TYPE], words[_BF16_COOPMAT] = bools
    return words


def _has_matrices(vk, instance, pd) -> bool:
    """Whether the device lists 16x16x16 bf16 x bf16 + f32 -> f32 and f16 x f16 + f32 -> f32
    subgroup matrices."""
    ffi = vk.ffi
    address = vk.lib.vkGetInstanceProcAddr(
        instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if address == ffi.NULL:
        return False
    query = ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", address)
    count = ffi.new("uint32_t*")
    if query(pd, count, ffi.NULL) < 0 or not count[0]:
        return False
    props = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        props[i].sType = _COOPMAT_PROPERTIES
    if query(pd, count, props) < 0:
        return False
    listed = {(p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.ResultType, p.scope)
              for p in props[0:count[0]]}
    return all((16, 16, 16, t, t, _F32, _F32, _SUBGROUP_SCOPE) in listed for t in (_BF16, _F16))


def bf16_tensor_cores(vk, instance, pd) -> bool:
    """Whether the physical device can run matmul_bf16x6.comp and matmul_f16x3.comp: both
    extensions, their features, the Vulkan memory model and 16-bit floats the shaders
    declare, the bf16 and f16 matrix shapes, and subgroups of exactly 32 invocations (the
    shaders' warps)."""
    names = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
    if not all(e in names for e in EXTENSIONS):
        return False
    bf16 = _bf16_struct(vk)
    coop = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(pNext=vk.ffi.cast("void*", bf16))
    model = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=coop)
    half = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=model)
    vk.vkGetPhysicalDeviceFeatures2(pd, vk.VkPhysicalDeviceFeatures2(pNext=half))
    sizes = vk.VkPhysicalDeviceSubgroupSizeControlProperties()
    vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=sizes))
    return bool(bf16[_BF16_TYPE] and bf16[_BF16_COOPMAT] and coop.cooperativeMatrix
                and model.vulkanMemoryModel and half.shaderFloat16
                and sizes.minSubgroupSize == sizes.maxSubgroupSize == 32
                and _has_matrices(vk, instance, pd))


def device_chain(vk, head):
    """(extensions, pNext chain ending in ``head``, objects to keep alive) that enable what
    the tensor-core kernels need at device creation."""
    bf16 = _bf16_struct(vk, (1, 1))
    words = vk.ffi.cast("void**", bf16 + 2)        # bf16's pNext
    words[0] = vk.ffi.addressof(head)
    coop = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(
        pNext=vk.ffi.cast("void*", bf16), cooperativeMatrix=vk.VK_TRUE)
    model = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=coop,
                                                         vulkanMemoryModel=vk.VK_TRUE)
    half = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=model, shaderFloat16=vk.VK_TRUE)
    return list(EXTENSIONS), half, [bf16, coop, model, half, head]
