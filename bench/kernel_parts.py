#!/usr/bin/env python3
"""Where the tensor-core products' time goes: each kernel (matmul_bf16x6.comp for the
bfloat16 (autocast) product, matmul_f16x3.comp for the float32-accurate one) timed as it
is, built without its K loop's global loads (NO_LOADS: the shared tiles keep the first K
step's words) and built without its products and shared reads (NO_PRODUCTS: the global
loads, stores into shared memory and barriers alone), each in bench_gpu.py's sweep beside
PyTorch CUDA's product.

    GLSLC=.glslc/glslc python3 bench/kernel_parts.py --build   # once, where glslc is new
    python3 bench/kernel_parts.py                              # on the GPU machine

The parts' SPIR-V is built into ``bench/spirv/`` (not kept in git). Each kernel runs in a
process of its own, which puts its module in the package kernel's place before the sweep
makes any pipeline. The parts' results are wrong by design: time them, nothing else.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]
SHADERS = ROOT / "shaders"
PARTS = {"no_loads": "NO_LOADS", "no_products": "NO_PRODUCTS"}
# Each precision's kernel, and its sweep's arguments.
KERNELS = {"bfloat16": "matmul_bf16x6", "float32-accurate": "matmul_f16x3"}
# The plans' tiles for big products: one piece (bfloat16) and three (float32-accurate).
SWEEPS = {"bfloat16": ["--low", "bfloat16", "--tiles", "tc 128x128 w64 k32"],
          "float32-accurate": ["--tiles", "tc 128x128"]}


def spirv(kernel: str, part: str) -> pathlib.Path:
    return HERE / "spirv" / f"{kernel}_{part}.spv"


def build() -> None:
    glslc = shutil.which(os.environ.get("GLSLC", "glslc"))
    if glslc is None:
        raise SystemExit("kernel_parts: glslc not found (set GLSLC)")
    (HERE / "spirv").mkdir(exist_ok=True)
    for kernel in KERNELS.values():
        for part, macro in PARTS.items():
            out = spirv(kernel, part)
            subprocess.run([glslc, "--target-env=vulkan1.2", "-O", f"-D{macro}=1", "-I",
                            str(SHADERS), str(SHADERS / f"{kernel}.comp"), "-o", str(out)],
                           check=True)
            print(f"built {out.relative_to(ROOT)}")


def sweep(part: str, squares: str, precision: str) -> int:
    """bench_gpu.py's sweep, in this process, with ``part``'s module as the kernel's."""
    import bench_gpu
    import dualgrad as dg
    from dualgrad.api import device
    dg.ag_device("gpu")
    be = device.active()
    if not be.ctx.info.get("tensor_cores"):
        raise SystemExit("kernel_parts: this device has no bfloat16 cooperative matrices")
    if part != "whole":
        kernel = KERNELS[precision]
        be.device.pipelines.use_spirv(kernel, spirv(kernel, part).read_bytes())
    return bench_gpu.main(["--sweep", "--recorded", "--squares", squares, "--mlp-shapes", "",
                           *SWEEPS[precision]])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="store_true", help="compile the parts, then stop")
    p.add_argument("--squares", default="4096,8192", help="the products' sizes (n^3)")
    p.add_argument("--part", choices=["whole", *PARTS], help=argparse.SUPPRESS)
    p.add_argument("--precision", choices=list(SWEEPS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.build:
        build()
        return 0
    if args.part:
        return sweep(args.part, args.squares, args.precision)
    missing = [str(spirv(kernel, part)) for kernel in KERNELS.values() for part in PARTS
               if not spirv(kernel, part).exists()]
    if missing:
        raise SystemExit(f"kernel_parts: {', '.join(missing)} missing (run with --build "
                         "first)")
    for precision in SWEEPS:
        for part in ("whole", *PARTS):
            print(f"[{precision}: {part}]", flush=True)
            run = subprocess.run([sys.executable, __file__, "--part", part, "--precision",
                                  precision, "--squares", args.squares])
            if run.returncode:
                return run.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
