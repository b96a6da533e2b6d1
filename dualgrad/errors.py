"""The exception types dualgrad raises on purpose, and the helpers that word them.

Every error is a :class:`DualgradError` *and* the built-in a caller would expect, so both
``except dg.DualgradError`` and ``except ValueError`` work. Messages name the function, the
argument, the value received and what was expected.
"""
from __future__ import annotations


class DualgradError(Exception):
    """Base class of every error dualgrad raises on purpose."""


class ShapeError(DualgradError, ValueError):
    """A tensor or array has the wrong shape, rank or broadcasting."""


class InvalidValueError(DualgradError, ValueError):
    """An argument has the right type but a value outside what is accepted."""


class IndexOutOfRange(InvalidValueError, IndexError):
    """An index past the end of its axis: an IndexError, as PyTorch's (so ``for row in t``
    stops there), and an InvalidValueError."""


class AxisOutOfRange(InvalidValueError, IndexError):
    """An axis (``dim``) past a tensor's rank: an IndexError, as PyTorch's "Dimension out
    of range", and an InvalidValueError."""


class IndexShapeError(ShapeError, IndexError):
    """An index of the wrong shape for the tensor it indexes (a mask whose sizes are not
    those of the dimensions it covers, index arrays that do not broadcast together): an
    IndexError, as PyTorch's, and a ShapeError."""


class CallOrderError(InvalidValueError, RuntimeError):
    """A call out of its order (GradScaler's unscale_() or step() twice before update()):
    a RuntimeError, as PyTorch's, and an InvalidValueError."""


class ArgumentTypeError(DualgradError, TypeError):
    """An argument has the wrong type (including an unsupported dtype)."""


class DeviceUnavailable(DualgradError, RuntimeError):
    """The requested backend cannot be used on this machine."""


class DeadTensorError(DualgradError, RuntimeError):
    """A tensor's device memory was freed (its pass pool was reset)."""


class GraphFreedError(DualgradError, RuntimeError):
    """backward() met a graph that an earlier backward() already used and freed (pass
    ``retain_graph=True`` to the earlier one to go through it again)."""


class DeviceError(DualgradError, RuntimeError):
    """The device reported a failure while running work."""


class ValidationError(DeviceError):
    """The Vulkan validation layer (``DUALGRAD_VK_VALIDATION=1``) reported a warning or an
    error; ``messages`` holds each message's text."""

    def __init__(self, text: str, messages=()):
        super().__init__(text)
        self.messages = list(messages)


class DeviceOutOfMemory(DualgradError, MemoryError):
    """Device memory (or the configured budget) is exhausted."""


class TensorTooLarge(DeviceOutOfMemory):
    """A tensor has more elements than the backend's kernels can index (the gpu backend's:
    ``2**31 - 1``). A ``DeviceOutOfMemory``, so that code which falls back on a smaller
    batch or the cpu backend when the device is full does the same here."""


class GradcheckError(DualgradError, AssertionError):
    """``gradcheck`` found a gradient that disagrees with finite differences."""


class CheckpointError(DualgradError, ValueError):
    """A checkpoint file is corrupted, not a checkpoint, or does not fit the model."""


class CheckpointFileError(DualgradError, OSError):
    """A checkpoint's path cannot be read or written (a directory, no permission), as
    ``open()`` would say; ``errno`` and ``filename`` are set."""


class CheckpointNotFoundError(CheckpointFileError, FileNotFoundError):
    """The checkpoint to load, or the directory to save one into, does not exist."""


class DistributedError(DualgradError, RuntimeError):
    """A data-parallel run cannot go on: MPI is missing, ``init()`` was not called, or a
    collective across processes failed."""


class DistributedTimeout(DistributedError, TimeoutError):
    """A collective across processes did not complete in time: another process stopped,
    failed or is stuck."""


class DistributedMismatch(DistributedError, ValueError):
    """The processes of a run disagree: a different world size than asked for, a
    different model (parameter names, shapes or dtypes) or a different backend."""


class DualgradWarning(UserWarning):
    """Something works but probably not as meant (filter with ``warnings``' category)."""


def describe(value) -> str:
    """A short, readable rendering of a value for an error message."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bad_value(fn: str, arg: str, value, expected: str) -> InvalidValueError:
    return InvalidValueError(f"{fn}: argument '{arg}' is {describe(value)}; expected {expected}")


def bad_axis(fn: str, arg: str, value, expected: str) -> AxisOutOfRange:
    return AxisOutOfRange(f"{fn}: argument '{arg}' is {describe(value)}; expected {expected}")


def bad_type(fn: str, arg: str, value, expected: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{fn}: argument '{arg}' has type {type(value).__name__}; expected {expected}")


def bad_shape(fn: str, arg: str, shape, expected: str) -> ShapeError:
    return ShapeError(f"{fn}: argument '{arg}' has shape {tuple(shape)}; expected {expected}")
