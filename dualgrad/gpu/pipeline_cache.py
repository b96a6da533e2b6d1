"""The pipeline cache on disk: the driver's compiled pipelines, kept between processes so a
second start does not compile them again.

One file per device and driver (vendor, device, driver version and the driver's cache UUID
in its name) in ``DUALGRAD_CACHE_DIR``, by default ``$XDG_CACHE_HOME/dualgrad`` or
``~/.cache/dualgrad``; ``DUALGRAD_CACHE_DIR=""`` turns it off. The file is the driver's
cache data behind a header of ours, a magic and the data's SHA-256: a truncated or damaged
file is never handed to the driver, only replaced. It is written at exit when the process
made new pipelines, through a temporary file renamed into place, so a process killed while
writing leaves the previous file whole. A cache that cannot be read or written costs only
the compile time; it never fails a computation.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import sys

from ..paths import cache_directory

MAGIC = b"dualgrad-pipelines-1\n"
_DIGEST = 32                          # bytes of SHA-256


def file_for(properties) -> pathlib.Path | None:
    """The cache file of a device with these VkPhysicalDeviceProperties (None: off)."""
    where = cache_directory()
    if where is None:
        return None
    uuid = bytes(properties.pipelineCacheUUID).hex()
    return where / (f"pipelines-{properties.vendorID:04x}-{properties.deviceID:04x}-"
                    f"{properties.driverVersion:08x}-{uuid}.bin")


def load(path: pathlib.Path | None) -> bytes:
    """The driver's data stored at ``path``, or b"" when there is none or it is damaged."""
    if path is None:
        return b""
    try:
        raw = path.read_bytes()
    except OSError:
        return b""
    head = len(MAGIC) + _DIGEST
    data = raw[head:]
    if raw[:len(MAGIC)] != MAGIC or raw[len(MAGIC):head] != hashlib.sha256(data).digest():
        return b""
    return data


def save(path: pathlib.Path | None, data: bytes) -> bool:
    """Store the driver's ``data`` at ``path`` atomically; False (and a line on stderr)
    when it cannot be written."""
    if path is None or not data:
        return False
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(MAGIC + hashlib.sha256(data).digest() + data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return True
    except OSError as exc:
        print(f"dualgrad: the pipeline cache was not saved to {path} ({exc})", file=sys.stderr)
        try:
            tmp.unlink()
        except OSError:
            pass
        return False
