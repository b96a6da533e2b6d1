#!/usr/bin/env python3
"""Compile shaders/*.comp into dualgrad/gpu/spirv/*.spv with glslc (Vulkan 1.2 target) and
record each source's hash, includes folded in, in dualgrad/gpu/spirv/MANIFEST.json; a test
compares the manifest with the sources so a stale .spv cannot go unnoticed."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from dualgrad.gpu.shader_sources import SHADERS, SPIRV, source_hash  # noqa: E402


def main() -> int:
    glslc = shutil.which("glslc")
    if glslc is None:
        print("build_shaders: glslc not found (Debian package 'glslc')", file=sys.stderr)
        return 1
    version = subprocess.run([glslc, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    manifest = {"glslc": version, "shaders": {}}
    SPIRV.mkdir(parents=True, exist_ok=True)
    for src in sorted(SHADERS.glob("*.comp")):
        out = SPIRV / (src.stem + ".spv")
        subprocess.run([glslc, "--target-env=vulkan1.2", "-O", "-I", str(SHADERS), str(src),
                        "-o", str(out)], check=True)
        manifest["shaders"][src.stem] = source_hash(src)
        print(f"  {src.name} -> {out.relative_to(ROOT)}")
    (SPIRV / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
