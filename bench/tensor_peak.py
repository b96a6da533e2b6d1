#!/usr/bin/env python3
"""The tensor cores' bfloat16 rate as a Vulkan shader reaches it, against cuBLAS's bfloat16
product in the same process: the ceiling a product kernel built on cooperative matrices
(VK_KHR_cooperative_matrix, 16 x 16 x 16 a subgroup) works under.

    GLSLC=.glslc/glslc python3 bench/tensor_peak.py --build   # once, where glslc is new
    python3 bench/tensor_peak.py                              # on the GPU machine

The shader (``bench/shaders/tensor_peak.comp``) runs each warp's RM x RN accumulators
through STEPS products: with its operands in registers (the instruction's own rate), and
with each step's operand blocks read from shared memory first (the product kernel's warp
without global loads or barriers). Its SPIR-V is built into ``bench/spirv/`` (not kept
in git: ``--build`` makes it with a glslc that knows GL_EXT_bfloat16).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]
SOURCE = HERE / "shaders" / "tensor_peak.comp"
SPIRV = HERE / "spirv" / "tensor_peak.spv"
NAME = "bench_tensor_peak"
WARPS = 4


def build() -> None:
    glslc = shutil.which(os.environ.get("GLSLC", "glslc"))
    if glslc is None:
        raise SystemExit("tensor_peak: glslc not found (set GLSLC)")
    SPIRV.parent.mkdir(exist_ok=True)
    subprocess.run([glslc, "--target-env=vulkan1.3", "-O", str(SOURCE), "-o", str(SPIRV)],
                   check=True)
    print(f"built {SPIRV.relative_to(HERE.parent)}")


def ours(blocks: tuple, steps: int, from_shared: int, groups: int, calls: int) -> float:
    """TFLOP/s of the shader: ``groups`` workgroups of WARPS warps, ``calls`` dispatches a
    wait, the median of five waits."""
    import dualgrad as dg
    from dualgrad.api import device
    dg.ag_device("gpu")
    be = device.active()
    dev = be.device
    if not be.ctx.info.get("tensor_cores"):
        raise SystemExit("tensor_peak: this device has no bfloat16 cooperative matrices")
    pipelines = dev.pipelines
    if NAME not in pipelines._modules:     # (the module from here, not the package's spirv)
        vk, code = be.ctx.vk, SPIRV.read_bytes()
        pipelines._modules[NAME] = vk.vkCreateShaderModule(
            be.ctx.device, vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None)
    src = dev.upload(np.random.default_rng(0).integers(
        0, 2 ** 14, 512, dtype=np.uint32).view(np.float32), persistent=True)
    dst = dev.empty((groups * WARPS * 256,), persistent=True)
    rm, rn = blocks
    spec = (rm, rn, steps, from_shared, WARPS * 32)

    def run():
        for k in range(calls):
            dev.launch(NAME, spec, struct.pack("<QQI", src.address, dst.address, k),
                       (groups, 1, 1), [src], [dst])
        with be.ctx.lock:
            dev.rec.flush(wait=True)
    run()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    flops = 2.0 * 16 ** 3 * rm * rn * steps * WARPS * groups * calls
    return flops / sorted(times)[2] / 1e12


def cublas(size: int) -> float | None:
    """cuBLAS's bfloat16 product size^3 in TFLOP/s (None without PyTorch's CUDA)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    a, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / 10)
    return 2.0 * size ** 3 / sorted(times)[2] / 1e12


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="store_true", help="compile the shader, then stop")
    p.add_argument("--blocks", default="4x4,4x2,2x2",
                   help="a warp's accumulators RMxRN, comma-separated")
    p.add_argument("--steps", type=int, default=2048)
    p.add_argument("--groups", type=int, default=132 * 8, help="workgroups of 4 warps")
    p.add_argument("--calls", type=int, default=4)
    args = p.parse_args(argv)
    if args.build:
        build()
        return 0
    if not SPIRV.exists():
        raise SystemExit(f"tensor_peak: {SPIRV} is missing (run with --build first)")
    peer = cublas(8192)
    print("bfloat16 products on the tensor cores, TFLOP/s"
          + (f" (cuBLAS bfloat16 8192^3: {peer:.0f})" if peer else ""))
    print(f"  {'a warp':<8} {'operands in registers':>22} {'blocks from shared':>20}")
    for spec in args.blocks.split(","):
        rm, rn = (int(v) for v in spec.split("x"))
        rates = [ours((rm, rn), args.steps, shared, args.groups, args.calls)
                 for shared in (0, 1)]
        print(f"  {spec:<8} {rates[0]:>22.0f} {rates[1]:>20.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
