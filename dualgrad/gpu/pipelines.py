"""Compute pipelines: SPIR-V modules, one shared layout, a cache keyed by specialization.

Every kernel takes its arguments as push constants (buffer device addresses and scalars),
so all pipelines share one layout with no descriptor sets; a pipeline is identified by its
shader name and its specialization constants (op codes, flags). Compiled pipelines are kept
on disk between processes (``pipeline_cache``).
"""
from __future__ import annotations

import atexit
import struct

from ..errors import CallOrderError
from . import float_controls, pipeline_cache
from .shader_sources import SPIRV

PUSH_BYTES = 128                  # the minimum every Vulkan device guarantees


class Pipelines:
    def __init__(self, ctx):
        self.ctx = ctx
        vk = ctx.vk
        self._modules: dict = {}
        self._pipelines: dict = {}
        self._keep: list = []      # cffi objects that must outlive their use
        self.controls = float_controls.supported(ctx.info)
        push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                                      size=PUSH_BYTES)
        self.layout = vk.vkCreatePipelineLayout(ctx.device, vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=0, pushConstantRangeCount=1, pPushConstantRanges=[push]), None)
        self.cache_file = pipeline_cache.file_for(ctx.properties)
        initial = pipeline_cache.load(self.cache_file)
        self.loaded_bytes = len(initial)
        self.created = 0              # pipelines made by this process
        self.cache = vk.vkCreatePipelineCache(ctx.device, vk.VkPipelineCacheCreateInfo(
            initialDataSize=len(initial),
            pInitialData=vk.ffi.from_buffer(initial) if initial else vk.ffi.NULL), None)
        atexit.register(self.save_cache)

    def cache_data(self) -> bytes:
        """The driver's pipeline cache data as it stands."""
        vk, lib = self.ctx.vk, self.ctx.vk.lib
        size = vk.ffi.new("size_t*")
        lib.vkGetPipelineCacheData(self.ctx.device, self.cache, size, vk.ffi.NULL)
        buf = vk.ffi.new("char[]", size[0])
        if lib.vkGetPipelineCacheData(self.ctx.device, self.cache, size, buf) < 0:
            return b""
        return bytes(vk.ffi.buffer(buf, size[0]))

    def save_cache(self) -> bool:
        """Write the cache file if this process made pipelines (at exit, or when called)."""
        if not self.created or self.cache_file is None:
            return False
        with self.ctx.lock:
            data = self.cache_data()
        saved = pipeline_cache.save(self.cache_file, data)
        if saved:
            self.created = 0
        return saved

    def _module(self, name: str):
        module = self._modules.get(name)
        if module is None:
            module = self._modules[name] = self._new_module(
                (SPIRV / f"{name}.spv").read_bytes())
        return module

    def _new_module(self, spirv: bytes):
        vk = self.ctx.vk
        code = float_controls.apply(spirv, self.controls)
        return vk.vkCreateShaderModule(self.ctx.device, vk.VkShaderModuleCreateInfo(
            codeSize=len(code), pCode=code), None)

    def use_spirv(self, name: str, spirv: bytes) -> None:
        """Shader ``name`` from the SPIR-V given, in place of the package's
        ``spirv/{name}.spv`` (a benchmark's variant of a kernel), its float controls applied
        as the package's are. Only before the shader's module is made (by this or by a
        first pipeline of it)."""
        if name in self._modules:
            raise CallOrderError(f"use_spirv: shader {name!r} already has its module")
        self._modules[name] = self._new_module(spirv)

    def get(self, name: str, spec: tuple = ()):
        """The pipeline of shader ``name`` with specialization constants 0.. = ``spec``."""
        key = (name, spec)
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            pipeline = self._pipelines[key] = self._create(name, spec)
        return pipeline

    def _create(self, name: str, spec: tuple):
        vk = self.ctx.vk
        entries = [vk.VkSpecializationMapEntry(constantID=i, offset=4 * i, size=4)
                   for i in range(len(spec))]
        data = vk.ffi.new("char[]", struct.pack(f"<{len(spec)}I", *spec) or b"\0")
        info = vk.VkSpecializationInfo(mapEntryCount=len(spec), pMapEntries=entries or
                                       vk.ffi.NULL, dataSize=4 * len(spec), pData=data)
        stage = vk.VkPipelineShaderStageCreateInfo(
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=self._module(name), pName="main",
            pSpecializationInfo=info if spec else vk.ffi.NULL)
        create = vk.VkComputePipelineCreateInfo(stage=stage, layout=self.layout)
        self._keep.extend((entries, data, info, stage))
        pipeline = vk.vkCreateComputePipelines(self.ctx.device, self.cache, 1, [create], None)[0]
        self.created += 1
        return pipeline
