"""More of ``torch.nn.functional``'s losses, each a composition of the ops (so the gradients
are theirs), with PyTorch's formulas, arguments and reductions: the margin losses over
pairs and triplets (``margin_ranking_loss hinge_embedding_loss soft_margin_loss
cosine_embedding_loss triplet_margin_loss`` and ``pairwise_distance``) and the likelihoods
``poisson_nll_loss gaussian_nll_loss multilabel_soft_margin_loss``."""
from __future__ import annotations

import math

from ..errors import ShapeError, bad_shape
from . import checks, logic, ops
from .losses import _reduced, _reduction, _same_shape, _tensor, _weight
from .low_precision import computes_in_float32
from .reductions import norm
from .tensor import Tensor


def _signs(fn: str, target, like: Tensor) -> Tensor:
    """Targets of 1 and -1 (as floats, broadcast against ``like``)."""
    y = _tensor(fn, "target", target, like)
    try:
        ops._broadcast(fn, y.shape, like.shape)
    except ShapeError:
        raise bad_shape(fn, "target", y.shape, f"a shape that broadcasts to {like.shape}") \
            from None
    return y


@computes_in_float32
def margin_ranking_loss(input1, input2, target, margin: float = 0.0,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target (input1 - input2) + margin), reduced."""
    fn = "margin_ranking_loss"
    a, b = _same_shape(fn, input1, input2)
    y = _signs(fn, target, a)
    margin = checks.number(fn, "margin", margin)
    loss = ops.clamp(ops.add(ops.mul(ops.neg(y), ops.sub(a, b)), margin), min=0.0)
    return _reduced(loss, _reduction(fn, reduction))


@computes_in_float32
def hinge_embedding_loss(input, target, margin: float = 1.0,  # noqa: A002
                         reduction: str = "mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where it is -1 (PyTorch's sum of the
    two selections), reduced."""
    fn = "hinge_embedding_loss"
    x, y = _same_shape(fn, input, target)
    margin = checks.number(fn, "margin", margin)
    below = logic.where(logic.ne(y, 1.0), ops.clamp(ops.sub(margin, x), min=0.0), 0.0)
    kept = logic.where(logic.ne(y, -1.0), x, 0.0)
    return _reduced(ops.add(below, kept), _reduction(fn, reduction))


@computes_in_float32
def soft_margin_loss(input, target, reduction: str = "mean") -> Tensor:  # noqa: A002
    """log(1 + exp(-target input)), reduced."""
    fn = "soft_margin_loss"
    x, y = _same_shape(fn, input, target)
    return _reduced(ops.softplus(ops.neg(ops.mul(y, x))), _reduction(fn, reduction))


@computes_in_float32
def cosine_embedding_loss(input1, input2, target, margin: float = 0.0,
                          reduction: str = "mean") -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; the
    cosine along the last axis of (N, D) or (D,) inputs, with PyTorch's 1e-12 added to
    each squared norm."""
    fn = "cosine_embedding_loss"
    a, b = _same_shape(fn, input1, input2)
    if a.ndim not in (1, 2):
        raise bad_shape(fn, "input1", a.shape, "(N, D) or (D,)")
    margin = checks.number(fn, "margin", margin)
    dot = ops.sum(ops.mul(a, b), -1)
    squares = [ops.add(ops.sum(ops.mul(t, t), -1), 1e-12) for t in (a, b)]
    cos = ops.div(dot, ops.sqrt(ops.mul(squares[0], squares[1])))
    y = _signs(fn, target, cos)
    positive = logic.where(logic.eq(y, 1.0), ops.sub(1.0, cos), 0.0)
    negative = logic.where(logic.eq(y, -1.0), ops.clamp(ops.sub(cos, margin), min=0.0), 0.0)
    return _reduced(ops.add(positive, negative), _reduction(fn, reduction))


@computes_in_float32
def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The ``p``-norm of x1 - x2 + eps along the last axis, as
    ``torch.nn.functional.pairwise_distance``."""
    fn = "pairwise_distance"
    a = _tensor(fn, "x1", x1, x2)
    b = _tensor(fn, "x2", x2, a)
    eps = checks.number(fn, "eps", eps, 0.0)
    keepdim = checks.flag(fn, "keepdim", keepdim)
    return norm(ops.add(ops.sub(a, b), eps), p, dim=-1, keepdim=keepdim)


@computes_in_float32
def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False,
                        reduction: str = "mean") -> Tensor:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the
    ``pairwise_distance``; with ``swap`` the negative's distance is the smaller of its
    distances to the anchor and to the positive."""
    fn = "triplet_margin_loss"
    margin = checks.number(fn, "margin", margin, 0.0, lo_open=True)
    swap = checks.flag(fn, "swap", swap)
    to_positive = pairwise_distance(anchor, positive, p, eps)
    to_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        to_negative = ops.minimum(to_negative, pairwise_distance(positive, negative, p, eps))
    loss = ops.clamp(ops.add(ops.sub(to_positive, to_negative), margin), min=0.0)
    return _reduced(loss, _reduction(fn, reduction))


@computes_in_float32
def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,  # noqa: A002
                     eps: float = 1e-8, reduction: str = "mean") -> Tensor:
    """exp(input) - target input (``log_input``: input is the log of the rate), else
    input - target log(input + eps); ``full`` adds Stirling's term target log target -
    target + log(2 pi target) / 2 where target > 1."""
    fn = "poisson_nll_loss"
    x, y = _same_shape(fn, input, target)
    eps = checks.number(fn, "eps", eps, 0.0)
    if checks.flag(fn, "log_input", log_input):
        loss = ops.sub(ops.exp(x), ops.mul(y, x))
    else:
        loss = ops.sub(x, ops.mul(y, ops.log(ops.add(x, eps))))
    if checks.flag(fn, "full", full):
        safe = logic.where(logic.gt(y, 1.0), y, 2.0)       # (no log of 0 on the side unused)
        stirling = ops.add(ops.sub(ops.mul(safe, ops.log(safe)), safe),
                           ops.mul(ops.log(ops.mul(safe, 2 * math.pi)), 0.5))
        loss = ops.add(loss, logic.where(logic.gt(y, 1.0), stirling, 0.0))
    return _reduced(loss, _reduction(fn, reduction))


@computes_in_float32
def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,  # noqa: A002
                      reduction: str = "mean") -> Tensor:
    """(log(var) + (input - target)^2 / var) / 2 (+ log(2 pi) / 2 with ``full``), var
    clamped at ``eps`` with its gradient passed as if unclamped, as PyTorch's. ``var`` has
    input's shape, or it without the last axis or with a last axis of 1 (one variance a
    sample)."""
    fn = "gaussian_nll_loss"
    x, y = _same_shape(fn, input, target)
    v = _tensor(fn, "var", var, x)
    if v.shape == x.shape[:-1]:
        v = ops.reshape(v, v.shape + (1,))
    if v.shape != x.shape and v.shape != x.shape[:-1] + (1,):
        raise bad_shape(fn, "var", v.shape, f"{x.shape}, {x.shape[:-1]} or "
                        f"{x.shape[:-1] + (1,)}")
    eps = checks.number(fn, "eps", eps, 0.0)
    plain = v.detach()
    v = ops.add(v, ops.sub(ops.clamp(plain, min=eps), plain))   # (the clamp, gradient 1)
    diff = ops.sub(x, y)
    loss = ops.mul(ops.add(ops.log(v), ops.div(ops.mul(diff, diff), v)), 0.5)
    if checks.flag(fn, "full", full):
        loss = ops.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduced(loss, _reduction(fn, reduction))


@computes_in_float32
def multilabel_soft_margin_loss(input, target, weight=None,  # noqa: A002
                                reduction: str = "mean") -> Tensor:
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)), times ``weight`` (one a class), the
    mean over the classes (the last axis), then reduced over the samples."""
    fn = "multilabel_soft_margin_loss"
    x, y = _same_shape(fn, input, target)
    if x.ndim not in (1, 2):
        raise bad_shape(fn, "input", x.shape, "(N, C) or (C,)")
    w = _weight(fn, "weight", weight, x)
    terms = ops.add(ops.mul(y, ops.logsigmoid(x)),
                    ops.mul(ops.sub(1.0, y), ops.logsigmoid(ops.neg(x))))
    if w is not None:
        terms = ops.mul(terms, w)
    loss = ops.neg(ops.mean(terms, -1))
    return _reduced(loss, _reduction(fn, reduction))


__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "cosine_embedding_loss", "pairwise_distance", "triplet_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss"]
