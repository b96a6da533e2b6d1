"""Where the GLSL sources and compiled SPIR-V live, and how a source is fingerprinted."""
from __future__ import annotations

import hashlib
import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parent
SPIRV = PACKAGE / "spirv"
SHADERS = PACKAGE.parent.parent / "shaders"      # present in a source checkout only

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.M)


def _folded(path: pathlib.Path):
    """(file name, text) of a shader source, then of its includes, recursively."""
    text = path.read_text()
    yield path.name, text
    for name in _INCLUDE.findall(text):
        yield from _folded(path.parent / name)


def source_hash(path: pathlib.Path) -> str:
    """SHA-256 of a shader source with its includes (recursively) folded in."""
    h = hashlib.sha256()
    for name, text in _folded(path):
        h.update(name.encode() + b"\0" + text.encode())
    return h.hexdigest()


def source_text(path: pathlib.Path) -> str:
    """A shader source's text with its includes' (recursively) after it."""
    return "\n".join(text for _, text in _folded(path))
