#!/usr/bin/env python3
"""Where the tensor-core product's time goes: matmul_bf16x6.comp timed as it is, built
without its K loop's global loads (NO_LOADS: the shared tiles keep the first K step's
words) and built without its products and shared reads (NO_PRODUCTS: the global loads,
stores into shared memory and barriers alone), each in bench_gpu.py's sweep beside
PyTorch CUDA's product, the bfloat16 (autocast) product and the float32-accurate one.

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
SOURCE = ROOT / "shaders" / "matmul_bf16x6.comp"
KERNEL = "matmul_bf16x6"
PARTS = {"no_loads": "NO_LOADS", "no_products": "NO_PRODUCTS"}
# The plans' tiles for big products: one piece (bfloat16) and three (float32-accurate).
SWEEPS = {"bfloat16": ["--low", "bfloat16", "--tiles", "tc 128x128 w64 k32"],
          "float32-accurate": ["--tiles", "tc 128x128"]}


def spirv(part: str) -> pathlib.Path:
    return HERE / "spirv" / f"{KERNEL}_{part}.spv"


def build() -> None:
    glslc = shutil.which(os.environ.get("GLSLC", "glslc"))
    if glslc is None:
        raise SystemExit("kernel_parts: glslc not found (set GLSLC)")
    (HERE / "spirv").mkdir(exist_ok=True)
    for part, macro in PARTS.items():
        subprocess.run([glslc, "--target-env=vulkan1.2", "-O", f"-D{macro}=1", "-I",
                        str(SOURCE.parent), str(SOURCE), "-o", str(spirv(part))], check=True)
        print(f"built {spirv(part).relative_to(ROOT)}")


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
        be.device.pipelines.use_spirv(KERNEL, spirv(part).read_bytes())
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
    missing = [str(spirv(part)) for part in PARTS if not spirv(part).exists()]
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
