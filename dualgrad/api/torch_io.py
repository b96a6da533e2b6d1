"""Weights from PyTorch: ``load_torch_state_dict(model, source)`` reads a ``state_dict``
saved in the safetensors format (``safetensors.torch.save_file(model.state_dict(), path)``
on the PyTorch side) and loads it into a dualgrad model whose layers carry PyTorch's
names (Linear, Conv1d/2d, ConvTranspose2d, BatchNorm, LayerNorm, GroupNorm, RMSNorm,
Embedding, MultiheadAttention, TransformerEncoderLayer, Sequential, ModuleList and
ModuleDict do), without PyTorch installed.

The format is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the bytes, row-major. Floating-point tensors (float64,
float32, float16, bfloat16) become float32; integer ones (a batch norm's
num_batches_tracked is int64) become int32 where they fit.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..errors import CheckpointError, CheckpointFileError, CheckpointNotFoundError, bad_type
from .nn import Module

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def _bfloat16(raw: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as float32: they are a float32's upper half."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path) -> dict:
    """name -> NumPy array of every tensor in a safetensors file (bfloat16 as float32)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise CheckpointNotFoundError(e.errno, e.strerror, os.fspath(path)) from None
    except OSError as e:
        raise CheckpointFileError(e.errno, e.strerror, os.fspath(path)) from None
    where = f"load_torch_state_dict: {os.fspath(path)!r}"
    if len(data) < 8:
        raise CheckpointError(f"{where} is not a safetensors file (shorter than its header)")
    size = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{where} is not a safetensors file (no JSON header)") from None
    body = memoryview(data)[8 + size:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            kind, shape, (start, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{where}: tensor {name!r} has a malformed entry") from None
        if kind != "BF16" and kind not in _DTYPES:
            raise CheckpointError(f"{where}: tensor {name!r} has dtype {kind}, which dualgrad "
                                  "does not read")
        dtype = np.dtype("<u2" if kind == "BF16" else _DTYPES[kind])
        try:
            shape = tuple(int(n) for n in shape)
        except (TypeError, ValueError):
            raise CheckpointError(f"{where}: tensor {name!r} has shape {shape!r}") from None
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= start <= end <= len(body) or end - start != count * dtype.itemsize:
            raise CheckpointError(f"{where}: tensor {name!r}'s bytes {start}..{end} do not "
                                  f"hold {kind} {tuple(shape)}")
        value = np.frombuffer(body[start:end], dtype).reshape(shape)
        out[name] = _bfloat16(value) if kind == "BF16" else value.copy()
    return out


def _converted(name: str, value: np.ndarray) -> np.ndarray:
    if value.dtype.kind == "f":
        return value.astype(np.float32)
    if value.dtype.kind in "iu":
        if value.size and (value.min() < -2 ** 31 or value.max() >= 2 ** 31):
            raise CheckpointError(f"load_torch_state_dict: tensor {name!r} holds integers past "
                                  "int32's range")
        return value.astype(np.int32)
    return value


def load_torch_state_dict(model: Module, source, strict: bool = True) -> None:
    """Load PyTorch weights into ``model``: ``source`` is the path of a safetensors file of
    a PyTorch ``state_dict``, or a dict name -> array (from ``read_safetensors`` or
    anywhere). Names must be PyTorch's (dualgrad's layers use them); with ``strict``,
    missing and unexpected names are errors. Every tensor is checked (name, shape) before
    any weight changes."""
    if not isinstance(model, Module):
        raise bad_type("load_torch_state_dict", "model", model, "a dg.nn.Module")
    if isinstance(source, dict):
        state = source
    elif isinstance(source, (str, os.PathLike)):
        state = read_safetensors(source)
    else:
        raise bad_type("load_torch_state_dict", "source", source,
                       "a path to a safetensors file or a dict name -> array")
    converted = {name: _converted(name, np.asarray(value)) for name, value in state.items()}
    try:
        model.load_state_dict(converted, strict=strict)
    except ValueError as e:
        raise CheckpointError(f"load_torch_state_dict: {e}") from None


__all__ = ["load_torch_state_dict", "read_safetensors"]
