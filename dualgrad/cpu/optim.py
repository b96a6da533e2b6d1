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
from . import split
from .jit import kernel

_FLAG = dict(OPTIM_FLAGS)
MAXIMIZE, BUFFER, NESTEROV, FIRST, AMSGRAD, CENTERED, RECTIFIED = (
    _FLAG[name] for name in ("maximize", "momentum_buffer", "nesterov", "first", "amsgrad",
                             "centered", "rectified"))


@kernel
def _nan_max(a, b):
    """torch.maximum's rule: NaN when either is NaN."""
    return a if (a > b or math.isnan(a)) else b


# Each kernel takes w, g, s0, s1, s2 (empty where the flags leave a slot out), then ``sign``
# (-1 under maximize: the gradient's sign flipped, exactly), the flags and the rule's scalars.
# Options are loop-invariant branches, which the compiler moves out of the loop.
@kernel
def _sgd(w, g, s0, s1, s2, sign, flags, lr, momentum, dampening, wd):
    for i in range(w.size):
        p = np.float64(w[i])
        d = sign * np.float64(g[i]) + wd * p
        if flags & BUFFER:
            b = d if flags & FIRST else np.float64(s0[i]) * momentum + (1.0 - dampening) * d
            s0[i] = b
            b = np.float64(s0[i])
            d = d + momentum * b if flags & NESTEROV else b
        w[i] = p - lr * d


@kernel
def _rmsprop(w, g, s0, s1, s2, sign, flags, alpha, one_minus_alpha, eps, l2, lr, momentum):
    for i in range(w.size):
        p = np.float64(w[i])
        d = sign * np.float64(g[i]) + l2 * p
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
def _adagrad(w, g, s0, s1, s2, sign, flags, l2, clr, eps):
    for i in range(w.size):
        p = np.float64(w[i])
        d = sign * np.float64(g[i]) + l2 * p
        s0[i] = np.float64(s0[i]) + d * d
        w[i] = p - clr * d / (math.sqrt(np.float64(s0[i])) + eps)


@kernel
def _adamax(w, g, s0, s1, s2, sign, flags, one_minus_beta1, beta2, eps, l2, step_size):
    for i in range(w.size):
        p = np.float64(w[i])
        d = sign * np.float64(g[i]) + l2 * p
        s0[i] = np.float64(s0[i]) + one_minus_beta1 * (d - np.float64(s0[i]))
        s1[i] = _nan_max(np.float64(s1[i]) * beta2, abs(d) + eps)
        w[i] = p - step_size * np.float64(s0[i]) / np.float64(s1[i])


# Adam, NAdam and RAdam share their moments (m, v as the state now holds them).
@kernel
def _moments(w, g, s0, s1, i, sign, one_minus_beta1, beta2, one_minus_beta2, l2, decay):
    """(the decayed weight, the gradient, m, v) of element i, m and v stored."""
    p = np.float64(w[i]) * decay                     # decoupled weight decay
    d = sign * np.float64(g[i]) + l2 * p             # or an L2 term
    m = s0.dtype.type(np.float64(s0[i]) + one_minus_beta1 * (d - np.float64(s0[i])))
    v = s1.dtype.type(np.float64(s1[i]) * beta2 + one_minus_beta2 * d * d)
    s0[i] = m
    s1[i] = v
    return p, d, np.float64(m), np.float64(v)


@kernel
def _adam(w, g, s0, s1, s2, sign, flags, one_minus_beta1, beta2, one_minus_beta2, eps, l2,
          decay, step_size, bc2_sqrt):
    for i in range(w.size):
        p, d, m, v = _moments(w, g, s0, s1, i, sign, one_minus_beta1, beta2, one_minus_beta2,
                              l2, decay)
        if flags & AMSGRAD:
            s2[i] = _nan_max(np.float64(s2[i]), v)
            v = np.float64(s2[i])
        w[i] = p - step_size * m / (math.sqrt(v) / bc2_sqrt + eps)


@kernel
def _nadam(w, g, s0, s1, s2, sign, flags, one_minus_beta1, beta2, one_minus_beta2, eps, l2,
           decay, grad_coef, m_coef, bc2_sqrt):
    for i in range(w.size):
        p, d, m, v = _moments(w, g, s0, s1, i, sign, one_minus_beta1, beta2, one_minus_beta2,
                              l2, decay)
        w[i] = p - (grad_coef * d + m_coef * m) / (math.sqrt(v) / bc2_sqrt + eps)


@kernel
def _radam(w, g, s0, s1, s2, sign, flags, one_minus_beta1, beta2, one_minus_beta2, eps, l2,
           decay, step_size):
    for i in range(w.size):
        p, d, m, v = _moments(w, g, s0, s1, i, sign, one_minus_beta1, beta2, one_minus_beta2,
                              l2, decay)
        if flags & RECTIFIED:
            w[i] = p - step_size * m / (math.sqrt(v) + eps)
        else:
            w[i] = p - step_size * m


# An element's update costs about what WORK elements of a flat elementwise op do (``split``'s
# measure): its weight, gradient and state read and written, a square root and a division
# in float64. (Adam over 0.8M elements: 1.5 ms on one core.)
WORK = 4


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
    those the flags leave out) in place; on every core when they are big."""
    s = [_flat(state[k] if k < len(state) else None, w.dtype) for k in range(3)]
    flags = optim_flags(hyper)
    sign = -1.0 if flags & MAXIMIZE else 1.0
    split.run(_RULES[rule], (w.reshape(-1), g.reshape(-1), *s), sign, flags,
              *rounded(hyper, OPTIM_HYPER[rule], w.dtype), work=WORK * w.size,
              busy=w.size >= split.SPLIT_MIN)


def optim_steps(rule: str, params, hyper: dict) -> None:
    """optim_step of every (w, g, state) in ``params``. Parameters too small to be cut
    across the cores on their own are shared out instead, consecutive ones to a part of
    about equal elements: each update is its own, so the results are those of one after
    another. Only an update as big as a flat op that is cut makes the pool ``busy``: a
    small model whose other kernels run on one thread keeps BLAS's threads for its
    products (2.3 ms a step of the MLP 784-256-256-10, 2.9 with them held)."""
    params = list(params)
    small = [p for p in params if WORK * p[0].size < split.SPLIT_MIN]
    for p in params:
        if WORK * p[0].size >= split.SPLIT_MIN:      # (cut on its own, on every core)
            optim_step(rule, *p, hyper)
    total = WORK * sum(p[0].size for p in small)
    cores = min(split.cores(), split.MAX_PARTS)
    if total < split.SPLIT_MIN or cores < 2 or len(small) < 2:
        for p in small:
            optim_step(rule, *p, hyper)
        return
    parts = cores * split.PIECES
    cuts, done = [0], 0                 # part k ends where k / parts of the elements are
    for i, p in enumerate(small):
        done += WORK * p[0].size
        if done * parts >= total * len(cuts) and i + 1 < len(small):
            cuts.append(i + 1)
    cuts.append(len(small))

    def part(lo, hi):
        for k in range(cuts[lo], cuts[hi]):
            optim_step(rule, *small[k], hyper)
    split.run_ranges(part, [(k, k + 1) for k in range(len(cuts) - 1)], busy=False)


_RULES = {"sgd": _sgd, "rmsprop": _rmsprop, "adagrad": _adagrad, "adamax": _adamax,
          "adam": _adam, "nadam": _nadam, "radam": _radam}
