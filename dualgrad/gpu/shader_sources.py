"""Where the GLSL sources and compiled SPIR-V live, and how a source is fingerprinted."""
from __future__ import annotations

import hashlib
import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parent
SPIRV = PACKAGE / "spirv"
SHADERS = PACKAGE.parent.parent / "shaders"      # present in a source checkout only

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.M)


def source_hash(path: pathlib.Path) -> str:
    """SHA-256 of a shader source with its includes (recursively) folded in."""
    h = hashlib.sha256()

    def feed(p: pathlib.Path):
        text = p.read_text()
        h.update(p.name.encode() + b"\0" + text.encode())
        for name in _INCLUDE.findall(text):
            feed(p.parent / name)
    feed(path)
    return h.hexdigest()
