"""The backend contract: the primitives the front end calls, one set per backend.

The front end (``dualgrad.api``) holds autograd, the gradient rules, optimizers and layers,
and never asks which backend is active: it calls these methods on ``active()``. A backend
implements them over its own *storage handle* type — a C-contiguous NumPy array on cpu, a
sub-allocated device buffer on gpu. A handle has ``.shape`` and ``.dtype``.

Kernels never see Tensors or autograd. Every kernel has a twin with the same name on the other
backend, and the differential tests hold each pair together within ``dualgrad.testing``'s
tolerance table.
"""
from __future__ import annotations

import abc

import numpy as np

# The scalars of the fused optimizer kernels, in the order the kernels take them. The front
# end computes them per step in float64 (dualgrad.api.optim); backends round them to the
# tensor dtype. 1 - beta is passed rather than formed from the rounded beta: float32(0.999)
# is 1.3e-8 off, which is 1.3e-5 of 1 - 0.999.
ADAM_HYPER = ("beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "eps", "l2", "decay",
              "step_size", "bc2_sqrt")
SGD_HYPER = ("lr", "momentum", "dampening", "wd")


class Backend(abc.ABC):
    """Abstract base of the cpu and gpu backends."""

    name: str = "?"

    # -- residency: Tensor <-> storage -------------------------------------------------------
    @abc.abstractmethod
    def supports(self, dtype: np.dtype) -> bool:
        """Whether tensors of this dtype can live on this backend."""

    @abc.abstractmethod
    def handle(self, t):
        """The storage of tensor ``t`` on this backend. A host value is moved here at first use
        (a parameter into the persistent pool) and stays; a freed one raises DeadTensorError."""

    @abc.abstractmethod
    def adopt(self, t, h) -> None:
        """Make ``h`` the storage of ``t`` (the host cache, if any, is dropped)."""

    @abc.abstractmethod
    def host_value(self, t) -> np.ndarray:
        """``t``'s current value as a host array (downloaded and cached where resident).
        The caller must not modify it."""

    def reset_pass(self) -> None:
        """Free the pass pool (activations and other per-step tensors)."""

    def release(self) -> None:
        """Give the device up: rescue every live tensor's value to the host, free the pools."""

    def memory(self) -> dict:
        """Pool statistics in the keys of ``dg.tape_mem()``."""
        return dict(buffer_bytes=0, n_buffers=0, p_buffer_bytes=0, p_n_buffers=0,
                    reserved_bytes=0, p_reserved_bytes=0)

    def transfers(self) -> dict:
        """Transfer counters in the keys of ``dg.transfer_stats()``."""
        return dict(h2d_bytes=0, h2d_calls=0, d2h_bytes=0, d2h_calls=0, submits=0)

    def reset_transfers(self) -> None:
        """Zero the transfer counters."""

    # -- step capture ------------------------------------------------------------------------
    def capture(self, run, args: list):
        """Run the training step ``run(args)`` once and return ``(its result, a replay
        object)`` (see ``EagerReplay`` for the replay interface). This default records
        nothing: each replay runs the step again, which is what the cpu backend does."""
        return run(args), EagerReplay(self, run)

    def replay_dropout(self, recorded: tuple, seed: int, step: int) -> None:
        """Before a replay: the dropout mask recorded with (seed, step) ``recorded`` is
        drawn with ``seed`` and ``step`` this time. Nothing to do where steps are not
        recorded."""

    # -- storage ----------------------------------------------------------------------------
    @abc.abstractmethod
    def empty(self, shape: tuple, dtype: np.dtype, persistent: bool = False):
        """Uninitialised storage."""

    @abc.abstractmethod
    def upload(self, array: np.ndarray, persistent: bool = False):
        """New storage holding a copy of a C-contiguous host array."""

    @abc.abstractmethod
    def write(self, h, array: np.ndarray) -> None:
        """Overwrite existing storage with a host array of the same shape, in place."""

    @abc.abstractmethod
    def download(self, h) -> np.ndarray:
        """A host copy of the storage's value."""

    @abc.abstractmethod
    def is_live(self, h) -> bool:
        """False once the pool holding ``h`` has been reset or released."""

    @abc.abstractmethod
    def indices(self, array: np.ndarray):
        """Storage for integer indices (class targets, embedding ids), already validated."""

    @abc.abstractmethod
    def fill(self, h, value: float) -> None:
        """Set every element to ``value``, in place."""

    @abc.abstractmethod
    def copy(self, dst, src) -> None:
        """Copy ``src`` into ``dst`` (same size), in place."""

    @abc.abstractmethod
    def reshape(self, h, shape: tuple):
        """The same elements read with another shape (no copy)."""

    # -- kernels ----------------------------------------------------------------------------
    @abc.abstractmethod
    def unary(self, op: str, x, a: float = 0.0, b: float = 0.0, out=None):
        """Elementwise op(x); a, b are the op's scalar parameters (clamp bounds, scalars)."""

    @abc.abstractmethod
    def unary_backward(self, op: str, x, y, g, a: float = 0.0, b: float = 0.0, out=None):
        """dL/dx of y = op(x), given g = dL/dy; into ``out`` (storage of g's size, which
        may be g's own, returned) where given."""

    @abc.abstractmethod
    def binary(self, op: str, a, b, out=None):
        """a op b with NumPy broadcasting (up to 4-D); ``out`` may alias ``a``."""

    @abc.abstractmethod
    def binary_backward(self, op: str, a, b, g):
        """(dL/da, dL/db), both in the broadcast shape."""

    @abc.abstractmethod
    def reduce(self, op: str, x, axes: tuple, keepdims: bool = False, out=None):
        """sum / mean / max over ``axes`` (non-negative, sorted), into ``out`` (storage of
        the result's size, returned) where given."""

    @abc.abstractmethod
    def reduce_backward(self, op: str, x, y, g, axes: tuple):
        """dL/dx of y = reduce(op, x, axes, keepdims=True), given g (keepdims shape)."""

    @abc.abstractmethod
    def permute(self, x, axes: tuple):
        """A contiguous copy of x with its axes permuted (up to 4-D)."""

    @abc.abstractmethod
    def matmul(self, a, b, trans_a: bool = False, trans_b: bool = False, bias=None,
               out=None, relu: bool = False, mask=None, sums=None):
        """op(a) @ op(b), 2-D or batched 3-D; a 2-D operand is shared by the batch. With
        ``bias`` (one value per output column), each output is the product's value plus its
        column's bias: one float32 addition, as binary("add") would make it; with ``relu``,
        then unary("relu") of it; with ``mask`` (of the product's shape), then
        unary_backward("relu", mask, mask, it): kept where mask > 0, else 0 (the gradient
        through a relu whose output is ``mask``). Into ``out`` (storage of the product's
        size, returned) where given. ``sums`` (storage of op(a)'s shape less its last axis):
        op(a)'s row sums written there too, as reduce("sum") of them (a linear layer's bias
        gradient beside its weight gradient)."""

    @abc.abstractmethod
    def softmax(self, x):
        """Softmax over the last axis."""

    @abc.abstractmethod
    def log_softmax(self, x):
        """Log-softmax over the last axis."""

    @abc.abstractmethod
    def softmax_backward(self, y, g):
        """dL/dx of y = softmax(x)."""

    @abc.abstractmethod
    def log_softmax_backward(self, y, g):
        """dL/dx of y = log_softmax(x)."""

    @abc.abstractmethod
    def softmax_cross_entropy(self, logits, targets, grad=None):
        """(mean loss of shape (), per-row log-sum-exp) for 2-D logits and index targets;
        ``grad`` (storage of logits' shape), where given, also receives dL/dlogits for
        dL/dloss = 1: what ``softmax_cross_entropy_backward`` makes for g = 1."""

    @abc.abstractmethod
    def softmax_cross_entropy_backward(self, logits, targets, lse, g):
        """dL/dlogits, given g = dL/dloss of shape ()."""

    @abc.abstractmethod
    def layer_norm(self, x, gamma, beta, eps: float):
        """(y, mean, rstd) of layer normalisation over the last axis."""

    @abc.abstractmethod
    def layer_norm_backward(self, x, gamma, mean, rstd, g):
        """(dx, dgamma, dbeta)."""

    @abc.abstractmethod
    def embedding(self, table, idx):
        """Rows of ``table`` looked up by ``idx``: shape idx.shape + (table.shape[1],)."""

    @abc.abstractmethod
    def embedding_backward(self, idx, g, num_rows: int):
        """dL/dtable: each looked-up row's gradient added into the row, in position order."""

    @abc.abstractmethod
    def dropout(self, x, p: float, seed: int, step: int):
        """x * mask / (1 - p), the mask a function of (seed, step, element index) alone; the
        backward of dropout is the same kernel applied to the gradient."""

    @abc.abstractmethod
    def adam_step(self, w, g, m, v, hyper: dict) -> None:
        """One fused Adam/AdamW update of w, m, v in place; ``hyper`` has ADAM_HYPER's keys."""

    @abc.abstractmethod
    def adam_steps(self, params, hyper: dict) -> None:
        """adam_step of every (w, g, m, v) in ``params``, all with the same ``hyper``: the
        same results, in one dispatch where the backend can (an optimizer's parameters)."""

    @abc.abstractmethod
    def sgd_step(self, w, g, buf, hyper: dict) -> None:
        """One fused SGD update of w (and the momentum buffer ``buf``, or None) in place;
        ``hyper`` has SGD_HYPER's keys and the flags ``nesterov`` and ``first``."""

    @abc.abstractmethod
    def sgd_steps(self, params, hyper: dict) -> None:
        """sgd_step of every (w, g, buf) in ``params``, all with the same ``hyper``: the
        same results, in one dispatch where the backend can."""


class EagerReplay:
    """A step that is not recorded: each replay runs it again. ``reason`` says why."""

    replayable = False

    def __init__(self, backend: Backend, run, reason: str = "", capture=None,
                 once: bool = False):
        self.backend, self.run, self.reason = backend, run, reason
        self._capture = capture            # a recording that was given up, to free
        self.once = once                   # the reason was passing: record the next call

    def usable(self, backend: Backend) -> bool:
        """Whether a call on ``backend`` can use this object."""
        return not self.once and backend is self.backend

    def replay(self, args: list, hooks: list):
        """Run the step for the new arguments (``hooks``: what a recorded replay would
        redo on the host; running the step does it all itself)."""
        return self.run(args)

    def close(self) -> None:
        """Free what the object holds."""
        if self._capture is not None:
            self._capture.close()
            self._capture = None
