"""Fused optimizer updates, in place on weights and state (PyTorch's documented rules): the
twins of ``shaders/optim.comp``, one kernel per rule of ``kernel_ops.OPTIM``.

Each kernel works in float64 and rounds only where the result is stored (a state tensor, then
read back as the state now holds it, and the weight). Scalars derived from the step count
(bias corrections, step sizes) are computed once on the host in float64 and passed rounded to
the tensor dtype, exactly as the GPU receives them.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernel_ops import OPTIM_FLAGS, OPTIM_HYPER, optim_flags
from .jit import kernel

_FLAG = dict(OPTIM_FLAGS)
MAXIMIZE, BUFFER, NESTEROV, FIRST, AMSGRAD, CENTERED, RECTIFIED = (
    _FLAG[name] for name in ("maximize", "momentum_buffer", "nesterov", "first", "amsgrad",
                             "centered", "rectified"))


@kernel
def _nan_max(a, b):
    """torch.maximum's rule: NaN when either is NaN."""
    return a if (a > b or math.isnan(a)) else b


@kernel
def _grad(g, flags):
    return -np.float64(g) if flags & MAXIMIZE else np.float64(g)


@kernel
def _sgd(w, g, s0, s1, s2, flags, lr, momentum, dampening, wd):
    for i in range(w.size):
        p = np.float64(w[i])
        d = _grad(g[i], flags)
        if wd != 0.0:
            d = d + wd * p
        if flags & BUFFER:
            b = d if flags & FIRST else np.float64(s0[i]) * momentum + (1.0 - dampening) * d
            s0[i] = b
            b = np.float64(s0[i])
            d = d + momentum * b if flags & NESTEROV else b
        w[i] = p - lr * d


@kernel
def _rmsprop(w, g, s0, s1, s2, flags, alpha, one_minus_alpha, eps, l2, lr, momentum):
    for i in range(w.size):
        p = np.float64(w[i])
        d = _grad(g[i], flags) + l2 * p
        s0[i] = np.float64(s0[i]) * alpha + one_minus_alpha * d * d
        sq = np.float64(s0[i])
        if flags & CENTERED:
            s2[i] = np.float64(s2[i]) + one_minus_alpha * (d - np.float64(s2[i]))
            mean = np.float64(s2[i])
            sq = sq - mean * mean
        avg = math.sqrt(sq) + eps
        if flags & BUFFER:
            s1[i] = np.float64(s1[i]) * momentum + d / avg
            w[i] = p - lr * np.float64(s1[i])
        else:
            w[i] = p - lr * d / avg


@kernel
def _adagrad(w, g, s0, s1, s2, flags, l2, clr, eps):
    for i in range(w.size):
        p = np.float64(w[i])
        d = _grad(g[i], flags) + l2 * p
        s0[i] = np.float64(s0[i]) + d * d
        w[i] = p - clr * d / (math.sqrt(np.float64(s0[i])) + eps)


@kernel
def _adamax(w, g, s0, s1, s2, flags, one_minus_beta1, beta2, eps, l2, step_size):
    for i in range(w.size):
        p = np.float64(w[i])
        d = _grad(g[i], flags) + l2 * p
        s0[i] = np.float64(s0[i]) + one_minus_beta1 * (d - np.float64(s0[i]))
        s1[i] = _nan_max(np.float64(s1[i]) * beta2, abs(d) + eps)
        w[i] = p - step_size * np.float64(s0[i]) / np.float64(s1[i])


# Adam, NAdam and RAdam share their moments and the positions of their first six scalars.
_ADAM, _NADAM, _RADAM = 0, 1, 2


@kernel
def _moments(which, w, g, s0, s1, s2, flags, one_minus_beta1, beta2, one_minus_beta2, eps,
             l2, decay, a, b, c):
    for i in range(w.size):
        p = np.float64(w[i]) * decay                 # decoupled weight decay
        d = _grad(g[i], flags) + l2 * p              # or an L2 term
        s0[i] = np.float64(s0[i]) + one_minus_beta1 * (d - np.float64(s0[i]))
        s1[i] = np.float64(s1[i]) * beta2 + one_minus_beta2 * d * d
        m, v = np.float64(s0[i]), np.float64(s1[i])   # what the state now holds
        if which == _ADAM:                  # a = step_size, b = sqrt(bias correction 2)
            if flags & AMSGRAD:
                s2[i] = _nan_max(np.float64(s2[i]), v)
                v = np.float64(s2[i])
            w[i] = p - a * m / (math.sqrt(v) / b + eps)
        elif which == _NADAM:               # a, b: the gradient's and m's coefficients
            w[i] = p - (a * d + b * m) / (math.sqrt(v) / c + eps)
        elif flags & RECTIFIED:             # RAdam; a = step_size
            w[i] = p - a * m / (math.sqrt(v) + eps)
        else:
            w[i] = p - a * m


def rounded(hyper: dict, names, dtype) -> list:
    """The named hyperparameters rounded to `dtype`, as both backends' kernels receive them."""
    return np.array([hyper[name] for name in names], dtype).tolist()


_EMPTY = {}


def _flat(a, dtype):
    if a is None:
        empty = _EMPTY.get(dtype)
        if empty is None:
            empty = _EMPTY[dtype] = np.empty(0, dtype)
        return empty
    return a.reshape(-1)


def optim_step(rule: str, w, g, state: tuple, hyper: dict) -> None:
    """One update by ``rule`` of w and its state arrays (OPTIM_STATE's order, None for
    those the flags leave out) in place."""
    names = OPTIM_HYPER[rule]
    s = [_flat(state[k] if k < len(state) else None, w.dtype) for k in range(3)]
    args = (w.reshape(-1), g.reshape(-1), s[0], s[1], s[2], optim_flags(hyper),
            *rounded(hyper, names, w.dtype))
    if rule in ("adam", "nadam", "radam"):
        extra = [0.0] * (9 - len(names))
        _moments({"adam": _ADAM, "nadam": _NADAM, "radam": _RADAM}[rule], *args, *extra)
    else:
        _RULES[rule](*args)


_RULES = {"sgd": _sgd, "rmsprop": _rmsprop, "adagrad": _adagrad, "adamax": _adamax}
