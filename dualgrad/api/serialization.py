"""``dg.save(obj, f)`` and ``dg.load(f)``, as ``torch.save`` / ``torch.load`` for what a
training script saves: state dicts, tensors, arrays and the plain containers and numbers
around them.

The file is a pickle (tensors are pickled as their values: no device storage is written);
``load`` reads it onto the active backend. By default (``weights_only=True``, PyTorch's
default since 2.6) only those kinds of objects are rebuilt, so a file from elsewhere cannot
run code as it loads; ``weights_only=False`` loads any pickle (for files you trust). These
are dualgrad's files: PyTorch's ``.pt`` files are not read (weights saved as safetensors are:
``load_torch_state_dict``).
"""
from __future__ import annotations

import io
import os
import pickle

from ..errors import CheckpointError, CheckpointFileError, CheckpointNotFoundError, bad_type
from . import checks

# (module, name) pairs a weights-only load may rebuild: NumPy's arrays and dtypes,
# bfloat16's, ordered dicts and dualgrad's tensors.
_ALLOWED = {
    ("collections", "OrderedDict"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("dualgrad.api.tensor", "_unpickle"), ("dualgrad.api.tensor", "Tensor"),
    ("dualgrad.api.tensor", "Parameter"),
}
_ALLOWED_MODULES = ("numpy.dtypes", "ml_dtypes")      # (dtype classes, bfloat16)


class _WeightsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED or module.startswith(_ALLOWED_MODULES) or \
                (module == "builtins" and name in ("set", "frozenset", "complex", "slice")):
            return super().find_class(module, name)
        raise CheckpointError(f"load: the file asks to rebuild {module}.{name}, which a "
                              "weights-only load refuses (state dicts, tensors, arrays, "
                              "containers and numbers only); pass weights_only=False for a "
                              "file you trust")


def save(obj, f) -> None:
    """Write ``obj`` (a state dict, tensors, arrays, ...) to ``f``: a path or a binary file
    object."""
    if isinstance(f, (str, os.PathLike)):
        try:
            with open(f, "wb") as out:
                pickle.dump(obj, out, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as e:
            raise CheckpointFileError(f"save: cannot write {os.fspath(f)!r}: {e}") from e
        return
    if not hasattr(f, "write"):
        raise bad_type("save", "f", f, "a path or a binary file object")
    pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def load(f, map_location=None, weights_only: bool = True):
    """Read what ``save`` wrote from ``f`` (a path or a binary file object), its tensors on
    the active backend. ``map_location`` is accepted and ignored (tensors go to the active
    backend); ``weights_only`` as above."""
    weights_only = checks.flag("load", "weights_only", weights_only)
    if isinstance(f, (str, os.PathLike)):
        try:
            with open(f, "rb") as source:
                blob = source.read()
        except FileNotFoundError as e:
            raise CheckpointNotFoundError(f"load: no file {os.fspath(f)!r}") from e
        except OSError as e:
            raise CheckpointFileError(f"load: cannot read {os.fspath(f)!r}: {e}") from e
        stream = io.BytesIO(blob)
    elif hasattr(f, "read"):
        stream = f
    else:
        raise bad_type("load", "f", f, "a path or a binary file object")
    try:
        if weights_only:
            return _WeightsOnly(stream).load()
        return pickle.load(stream)
    except (pickle.UnpicklingError, EOFError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"load: the file is not one save() wrote ({e})") from e



__all__ = ["save", "load"]
