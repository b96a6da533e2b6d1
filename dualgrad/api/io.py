"""Checkpoints: a model's parameters, an optimizer's state and a schedule in one safetensors
file, written atomically and verified by a checksum when read.

Layout: tensors ``model/<name>`` and ``optim/<index>/<state name>``; the safetensors metadata
holds JSON for everything else (optimizer hyperparameters and step counts, module extra
state such as dropout counters, dualgrad's generator state, the caller's ``extra``) and a
SHA-256 over all of it, tensors included.
"""
from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import struct

import numpy as np
import safetensors.numpy

from . import random
from ..errors import (ArgumentTypeError, CheckpointError, CheckpointFileError,
                      CheckpointNotFoundError, bad_type)
from .nn import Module
from .optim import Optimizer
from .tensor import BFLOAT16

FORMAT = "dualgrad-checkpoint/1"


def _digest(tensors: dict, meta: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    for key in sorted(meta):
        h.update(f"{key}={meta[key]}|".encode())
    return h.hexdigest()


def save_checkpoint(path, model: Module, optimizer: Optimizer | None = None,
                    scheduler=None, extra: dict | None = None, scaler=None) -> None:
    """Write ``model`` (and ``optimizer``, ``scheduler``, a ``GradScaler``'s state, and a
    JSON-serialisable ``extra``) to ``path``. The file is written beside the target, flushed to disk and renamed over
    it, so a crash mid-save leaves the previous checkpoint intact; the next save removes
    what such a crash left. Everything is checked first: a missing directory
    (FileNotFoundError), a directory in the way (IsADirectoryError's errno), values JSON
    cannot hold (TypeError), each naming the argument."""
    if not isinstance(model, Module):
        raise bad_type("save_checkpoint", "model", model, "a dg.nn.Module")
    if optimizer is not None and not isinstance(optimizer, Optimizer):
        raise bad_type("save_checkpoint", "optimizer", optimizer, "a dualgrad optimizer")
    path = _target(path)
    try:
        extra_text = json.dumps(extra if extra is not None else {})
    except (TypeError, ValueError) as exc:
        raise ArgumentTypeError(f"save_checkpoint: argument 'extra' holds a value JSON cannot "
                                f"hold ({exc}); expected numbers, strings, lists and dicts "
                                "of them") from None
    # (a bfloat16 buffer as float32, which holds its values exactly: NumPy has no bfloat16
    # for safetensors to read back; loading rounds it to the buffer's type again, exactly)
    tensors = {f"model/{k}": v.astype(np.float32) if v.dtype == BFLOAT16 else v
               for k, v in model.state_dict().items()}
    meta = {"format": FORMAT,
            "model_extra": json.dumps(model.extra_state()),
            "generator": json.dumps(random.get_state()),
            "extra": extra_text}
    if optimizer is not None:
        sd = optimizer.state_dict()
        scalars = {}
        for i, entry in sd["state"].items():
            for k, v in entry.items():
                if isinstance(v, np.ndarray):
                    tensors[f"optim/{i}/{k}"] = v
                else:
                    scalars.setdefault(str(i), {})[k] = v
        meta["optimizer"] = json.dumps({"kind": type(optimizer).__name__,
                                        "param_groups": sd["param_groups"],
                                        "param_names": sd["param_names"], "scalars": scalars})
    if scheduler is not None:
        meta["scheduler"] = json.dumps(scheduler.state_dict())
    if scaler is not None:
        meta["scaler"] = json.dumps(scaler.state_dict())
    meta["checksum"] = _digest(tensors, meta)
    blob = safetensors.numpy.save(tensors, metadata=meta)
    _write_atomically(path, blob)


def _target(path) -> str:
    """``path`` as a string, after checking where a checkpoint would go: its directory
    exists and it is not a directory itself."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise bad_type("save_checkpoint", "path", path, "a file path") from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CheckpointNotFoundError(
            errno.ENOENT, f"save_checkpoint: argument 'path' is in a directory that does not "
            f"exist ({folder!r})", path)
    if os.path.isdir(path):
        raise CheckpointFileError(errno.EISDIR, "save_checkpoint: argument 'path' is a "
                                  "directory; expected a file path", path)
    return path


def _temporary(path: str) -> str:
    """The name a save of ``path`` writes first: hidden, beside it, with this process's
    id, so that a later save can tell its own from a killed one's (``_remove_stale``)."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.tmp")


def _remove_stale(path: str) -> None:
    """Remove what saves of ``path`` killed midway left (their processes are gone)."""
    folder, name = os.path.split(os.path.abspath(path))
    for tmp in glob.glob(os.path.join(glob.escape(folder), f".{glob.escape(name)}.*.tmp")):
        pid = tmp[len(os.path.join(folder, f".{name}.")):-len(".tmp")]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:               # another user's process: alive
        pass
    return True


def _write_atomically(path: str, blob: bytes) -> None:
    _remove_stale(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = _temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)   # (the umask's)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:                             # make the rename itself durable
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def read_checkpoint(path) -> tuple:
    """(tensors, metadata) of a checkpoint file, after verifying its format and checksum."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise bad_type("load_checkpoint", "path", path, "a file path") from None
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        raise CheckpointNotFoundError(errno.ENOENT, "load_checkpoint: argument 'path' names "
                                      "no file", path) from None
    except OSError as exc:
        raise CheckpointFileError(exc.errno, f"load_checkpoint: argument 'path' cannot be "
                                  f"read ({exc.strerror})", path) from None
    try:
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        meta = header.get("__metadata__", {})
        tensors = safetensors.numpy.load(blob)
    except Exception as exc:  # noqa: BLE001 - any parse failure means a damaged file
        raise CheckpointError(f"load_checkpoint: {path!r} is not a readable checkpoint "
                              f"(truncated or corrupted: {exc})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"load_checkpoint: {path!r} is not a dualgrad checkpoint "
                              f"(format {meta.get('format')!r}; expected {FORMAT!r})")
    expected = meta.get("checksum")
    body = {k: v for k, v in meta.items() if k != "checksum"}
    if expected != _digest(tensors, body):
        raise CheckpointError(f"load_checkpoint: {path!r} failed its checksum: the file is "
                              "corrupted")
    return tensors, meta


def load_checkpoint(path, model: Module, optimizer: Optimizer | None = None,
                    scheduler=None, strict: bool = True, scaler=None) -> dict:
    """Restore what ``save_checkpoint`` wrote into ``model`` (and ``optimizer``,
    ``scheduler``, ``scaler``), keeping parameters resident on gpu, and restore dualgrad's
    generator.
    Everything is checked against the model before anything changes. Returns ``extra``."""
    if not isinstance(model, Module):
        raise bad_type("load_checkpoint", "model", model, "a dg.nn.Module")
    tensors, meta = read_checkpoint(path)
    model_state = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    opt_state = None
    if optimizer is not None:
        if "optimizer" not in meta:
            raise CheckpointError(f"load_checkpoint: {path!r} holds no optimizer state")
        info = json.loads(meta["optimizer"])
        if info["kind"] != type(optimizer).__name__:
            raise CheckpointError(f"load_checkpoint: {path!r} holds {info['kind']} state; "
                                  f"the optimizer is {type(optimizer).__name__}")
        state = {}
        for k, v in tensors.items():
            if k.startswith("optim/"):
                _, i, name = k.split("/", 2)
                state.setdefault(i, {})[name] = v
        for i, scalars in info["scalars"].items():
            state.setdefault(i, {}).update(scalars)
        # (a checkpoint of an earlier format holds one "hyper" dict for the only group)
        groups = {k: info[k] for k in ("param_groups", "hyper") if k in info}
        opt_state = {"state": state, "param_names": info["param_names"], **groups}
    if scheduler is not None and "scheduler" not in meta:
        raise CheckpointError(f"load_checkpoint: {path!r} holds no scheduler state")
    if scaler is not None:
        if "scaler" not in meta:
            raise CheckpointError(f"load_checkpoint: {path!r} holds no GradScaler state")
        from .amp import GradScaler
        GradScaler(enabled=scaler.is_enabled()).load_state_dict(json.loads(meta["scaler"]))
    try:
        _check_model(model, model_state, strict)
        if opt_state is not None:
            _check_optimizer(optimizer, opt_state)
    except CheckpointError:
        raise
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"load_checkpoint: {path!r} does not fit: {exc}") from None
    model.load_state_dict(model_state, strict=strict)
    if opt_state is not None:
        optimizer.load_state_dict(opt_state)
    if scheduler is not None:
        scheduler.load_state_dict(json.loads(meta["scheduler"]))
    if scaler is not None:
        scaler.load_state_dict(json.loads(meta["scaler"]))
    model.load_extra_state(json.loads(meta.get("model_extra", "{}")))
    random.set_state(json.loads(meta["generator"]))
    return json.loads(meta.get("extra", "{}"))


def _check_model(model: Module, state: dict, strict: bool) -> None:
    params = model._state_tensors()
    if strict and set(params) != set(state):
        raise CheckpointError(
            "load_checkpoint: the checkpoint is for another model: missing "
            f"{sorted(set(params) - set(state))}, unexpected {sorted(set(state) - set(params))}")
    for name, value in state.items():
        if name in params and tuple(value.shape) != params[name].shape:
            raise CheckpointError(f"load_checkpoint: parameter '{name}' has shape "
                                  f"{tuple(value.shape)} in the checkpoint and "
                                  f"{params[name].shape} in the model")


def _check_optimizer(optimizer: Optimizer, state: dict) -> None:
    if len(state["param_names"]) != len(optimizer.params):
        raise CheckpointError(f"load_checkpoint: the optimizer state is for "
                              f"{len(state['param_names'])} parameters; the optimizer has "
                              f"{len(optimizer.params)}")
    for i, entry in state["state"].items():
        if not 0 <= int(i) < len(optimizer.params):
            raise CheckpointError(f"load_checkpoint: optimizer state for parameter {i}; the "
                                  f"optimizer has {len(optimizer.params)}")
        p = optimizer.params[int(i)]
        for k, v in entry.items():
            if isinstance(v, np.ndarray) and tuple(v.shape) != p.shape:
                raise CheckpointError(f"load_checkpoint: optimizer state {i}/{k} has shape "
                                      f"{tuple(v.shape)}; the parameter has {p.shape}")
