"""Where dualgrad keeps what it makes on disk: one cache directory, for the cpu kernels
Numba compiles and the gpu pipelines the driver compiles, never inside the installed
package (a reinstall would leave such files behind)."""
from __future__ import annotations

import os
import pathlib

CACHE_ENV = "DUALGRAD_CACHE_DIR"


def cache_directory() -> pathlib.Path | None:
    """``DUALGRAD_CACHE_DIR``, by default ``$XDG_CACHE_HOME/dualgrad`` or
    ``~/.cache/dualgrad``; None when the variable is set empty (no disk caches)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit is not None:
        return pathlib.Path(explicit) if explicit else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "dualgrad"


def writable_subdirectory(name: str) -> pathlib.Path | None:
    """``cache_directory() / name``, made if need be; None where there is no cache directory
    or it cannot be written (a cache is then simply not kept)."""
    where = cache_directory()
    if where is None:
        return None
    path = where / name
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return None
    return path
