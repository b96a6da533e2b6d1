"""Fused optimizer updates, in place on weights and state (PyTorch's documented rules).

Scalars derived from the step count (bias corrections, step size) are computed once on the
host in float64 and passed rounded to the tensor dtype, exactly as the GPU receives them.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernel_ops import ADAM_HYPER, SGD_HYPER
from .jit import kernel


@kernel
def _adam(w, g, m, v, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, l2, decay,
          step_size, bc2_sqrt):
    for i in range(w.size):
        p = np.float64(w[i]) * decay                 # AdamW decays the weight itself
        grad = np.float64(g[i]) + l2 * p             # Adam adds an L2 term to the gradient
        mi = np.float64(m[i]) + one_minus_beta1 * (grad - np.float64(m[i]))
        vi = np.float64(v[i]) * beta2 + one_minus_beta2 * grad * grad
        m[i] = mi
        v[i] = vi
        mi, vi = np.float64(m[i]), np.float64(v[i])   # what the state now holds
        w[i] = p - step_size * mi / (math.sqrt(vi) / bc2_sqrt + eps)


@kernel
def _sgd(w, g, buf, lr, momentum, dampening, wd, nesterov, first):
    for i in range(w.size):
        p = np.float64(w[i])
        d = np.float64(g[i])
        if wd != 0.0:
            d = d + wd * p
        if momentum != 0.0:
            b = d if first else np.float64(buf[i]) * momentum + (1.0 - dampening) * d
            buf[i] = b
            b = np.float64(buf[i])
            d = d + momentum * b if nesterov else b
        w[i] = p - lr * d


def rounded(hyper: dict, names, dtype) -> list:
    """The named hyperparameters rounded to `dtype`, as both backends' kernels receive them."""
    return np.array([hyper[name] for name in names], dtype).tolist()


def adam_step(w, g, m, v, hyper: dict) -> None:
    """One Adam / AdamW update of w, m and v in place."""
    _adam(w.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1),
          *rounded(hyper, ADAM_HYPER, w.dtype))


def sgd_step(w, g, buf, hyper: dict) -> None:
    """One SGD update of w (and of the momentum buffer, when momentum is used) in place."""
    flat_buf = buf.reshape(-1) if buf is not None else np.empty(0, w.dtype)
    _sgd(w.reshape(-1), g.reshape(-1), flat_buf, *rounded(hyper, SGD_HYPER, w.dtype),
         bool(hyper["nesterov"]), bool(hyper["first"]))
