#!/usr/bin/env python3
"""Write shaders/opcodes.glsl from dualgrad/kernel_ops.py, then compile shaders/*.comp into
dualgrad/gpu/spirv/*.spv with glslc (Vulkan 1.2 target) and record each source's hash,
includes folded in, and the compiler that built it in dualgrad/gpu/spirv/MANIFEST.json;
tests compare the header with the registry and the manifest with the sources, so neither
can go stale unnoticed.

Only shaders whose source changed since their .spv was built are compiled (``--all``: every
one), with ``$GLSLC`` (default: glslc on PATH). A shader that needs a newer glslc than the
system's (the tensor-core kernels: GL_EXT_bfloat16) is built with the one
scripts/fetch-glslc.sh fetches: ``GLSLC=.glslc/glslc make shaders``.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from dualgrad.gpu.shader_sources import SHADERS, SPIRV, source_hash, source_text  # noqa: E402
from dualgrad.kernel_ops import glsl_header  # noqa: E402

MANIFEST = SPIRV / "MANIFEST.json"
NEWER = ("GL_EXT_bfloat16", "GL_KHR_cooperative_matrix")   # unknown to Debian 12's glslang


def write_header() -> None:
    """shaders/opcodes.glsl as the registry renders it (rewritten only when it differs)."""
    header = SHADERS / "opcodes.glsl"
    text = glsl_header()
    if not header.exists() or header.read_text() != text:
        header.write_text(text)
        print(f"  {header.relative_to(ROOT)} written from dualgrad/kernel_ops.py")


def main(argv) -> int:
    write_header()
    glslc = shutil.which(os.environ.get("GLSLC", "glslc"))
    if glslc is None:
        print("build_shaders: glslc not found (Debian package 'glslc'; or set GLSLC)",
              file=sys.stderr)
        return 1
    version = subprocess.run([glslc, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    old = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    hashes = dict(old.get("shaders", {}))
    compilers = dict(old.get("compilers", {n: old.get("glslc", "?") for n in hashes}))
    SPIRV.mkdir(parents=True, exist_ok=True)
    failed = []
    sources = sorted(SHADERS.glob("*.comp"))
    for src in sources:
        name, out = src.stem, SPIRV / (src.stem + ".spv")
        digest = source_hash(src)
        if "--all" not in argv and hashes.get(name) == digest and out.exists():
            continue
        run = subprocess.run([glslc, "--target-env=vulkan1.2", "-O", "-I", str(SHADERS),
                              str(src), "-o", str(out)], capture_output=True, text=True)
        if run.returncode:
            hint = ("\n  (it needs a newer glslc: scripts/fetch-glslc.sh, then "
                    "GLSLC=.glslc/glslc make shaders)"
                    if any(ext in source_text(src) for ext in NEWER) else "")
            print(f"  {src.name}: FAILED\n{run.stderr.rstrip()}{hint}", file=sys.stderr)
            failed.append(src.name)
            continue
        hashes[name], compilers[name] = digest, version
        print(f"  {src.name} -> {out.relative_to(ROOT)} ({version})")
    names = {src.stem for src in sources}
    manifest = {"shaders": {n: h for n, h in hashes.items() if n in names},
                "compilers": {n: c for n, c in compilers.items() if n in names}}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
