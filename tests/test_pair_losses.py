"""The margin and likelihood losses (dualgrad/api/pair_losses.py) on both backends,
against their formulas in float64 NumPy (PyTorch's, as its documentation states them),
with gradients by float64 finite differences, and their modules."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualgrad as dg
import dualgrad.nn.functional as F

RNG = np.random.default_rng(61)
A, B, C = (RNG.standard_normal((4, 6)).astype(np.float32) for _ in range(3))
SIGNS = np.array([1.0, -1.0, 1.0, -1.0], np.float32)
SIGNS2 = np.where(RNG.standard_normal((4, 6)) > 0, 1.0, -1.0).astype(np.float32)
W = A.astype(np.float64), B.astype(np.float64), C.astype(np.float64)


def _distance(x, y, p=2.0, eps=1e-6):
    return (np.abs(x - y + eps) ** p).sum(-1) ** (1 / p)


def _log_sigmoid(v):
    return -np.logaddexp(0.0, -v)


CASES = [
    ("margin_ranking_loss", lambda t: F.margin_ranking_loss(t(A[:, 0]), t(B[:, 0]), SIGNS, 0.3),
     np.maximum(0, -SIGNS * (W[0][:, 0] - W[1][:, 0]) + 0.3).mean()),
    ("hinge_embedding_loss", lambda t: F.hinge_embedding_loss(t(A), SIGNS2, margin=0.5),
     np.where(SIGNS2 == 1, W[0], np.maximum(0, 0.5 - W[0])).mean()),
    ("soft_margin_loss", lambda t: F.soft_margin_loss(t(A), SIGNS2, reduction="sum"),
     np.log1p(np.exp(-SIGNS2 * W[0])).sum()),
    ("cosine_embedding_loss", lambda t: F.cosine_embedding_loss(t(A), t(B), SIGNS, 0.1),
     np.where(SIGNS == 1, 1 - (W[0] * W[1]).sum(1) / np.sqrt(
         ((W[0] ** 2).sum(1) + 1e-12) * ((W[1] ** 2).sum(1) + 1e-12)),
         np.maximum(0, (W[0] * W[1]).sum(1) / np.sqrt(
             ((W[0] ** 2).sum(1) + 1e-12) * ((W[1] ** 2).sum(1) + 1e-12)) - 0.1)).mean()),
    ("pairwise_distance", lambda t: F.pairwise_distance(t(A), t(B), 3.0),
     _distance(W[0], W[1], 3.0)),
    ("triplet_margin_loss", lambda t: F.triplet_margin_loss(t(A), t(B), t(C), 0.5, swap=True),
     np.maximum(0, 0.5 + _distance(W[0], W[1]) - np.minimum(
         _distance(W[0], W[2]), _distance(W[1], W[2]))).mean()),
    ("poisson_nll_loss", lambda t: F.poisson_nll_loss(t(A), np.abs(B) * 3, full=True),
     (np.exp(W[0]) - 3 * np.abs(W[1]) * W[0] + np.where(
         3 * np.abs(W[1]) > 1, 3 * np.abs(W[1]) * np.log(3 * np.abs(W[1])) - 3 * np.abs(W[1]) +
         0.5 * np.log(2 * math.pi * 3 * np.abs(W[1])), 0)).mean()),
    ("poisson_nll_loss rate", lambda t: F.poisson_nll_loss(t(np.abs(A)), np.abs(B), False),
     (np.abs(W[0]) - np.abs(W[1]) * np.log(np.abs(W[0]) + 1e-8)).mean()),
    ("gaussian_nll_loss", lambda t: F.gaussian_nll_loss(t(A), B, t(np.abs(C[:, 0]) + 0.1),
                                                       full=True),
     (0.5 * (np.log(np.abs(W[2][:, :1]) + 0.1) + (W[0] - W[1]) ** 2 /
             (np.abs(W[2][:, :1]) + 0.1)) + 0.5 * math.log(2 * math.pi)).mean()),
    ("multilabel_soft_margin_loss",
     lambda t: F.multilabel_soft_margin_loss(t(A), (B > 0).astype(np.float32),
                                             weight=np.abs(C[0])),
     (-((W[1] > 0) * _log_sigmoid(W[0]) + (W[1] <= 0) * _log_sigmoid(-W[0])) *
      np.abs(W[2][0])).mean(1).mean()),
]


@pytest.mark.parametrize("name, call, want", CASES, ids=[c[0] for c in CASES])
def test_losses_follow_their_formulas(device, name, call, want):
    got = call(lambda v: dg.ag_tensor(v)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name, call, want", CASES, ids=[c[0] for c in CASES])
def test_loss_gradients_in_float64(name, call, want):
    # each loss as a function of its tensor arguments (the float32 constants as they are)
    used = []

    def as_tensor(v):
        used.append(v)
        return dg.ag_tensor(v, dtype="float64")
    call(as_tensor)
    arrays = tuple(u.astype(np.float64) for u in used)

    def fn(*ts):
        it = iter(ts)
        return call(lambda v: next(it))
    assert dg.gradcheck(fn, arrays)


def test_the_gaussian_variance_clamp_passes_its_gradient():
    """PyTorch clamps var at eps without the clamp's gradient: d/dvar is the unclamped
    formula's even where var < eps."""
    var = dg.ag_tensor(np.array([1e-9, 2.0]), requires_grad=True, dtype="float64")
    with dg.with_grad_tape():
        loss = F.gaussian_nll_loss(dg.ones(2, dtype="float64"), dg.zeros(2, dtype="float64"),
                                   var, eps=1e-6, reduction="sum")
        loss.backward()
    clamped = np.array([1e-6, 2.0])
    np.testing.assert_allclose(var.grad.numpy(), 0.5 * (1 / clamped - 1 / clamped ** 2))


def test_loss_modules(device):
    a, b, c = (dg.ag_tensor(v) for v in (A, B, C))
    assert dg.nn.TripletMarginLoss(margin=0.5, swap=True)(a, b, c).item() == \
        F.triplet_margin_loss(a, b, c, 0.5, swap=True).item()
    assert dg.nn.HingeEmbeddingLoss()(a, SIGNS2).item() == F.hinge_embedding_loss(a, SIGNS2).item()
    assert dg.nn.MarginRankingLoss(0.2, "sum")(a[:, 0], b[:, 0], SIGNS).item() == \
        F.margin_ranking_loss(a[:, 0], b[:, 0], SIGNS, 0.2, "sum").item()
    assert dg.nn.PairwiseDistance(keepdim=True)(a, b).shape == (4, 1)
    assert dg.nn.GaussianNLLLoss()(a, b, dg.ones(4)).shape == ()
    with pytest.raises(dg.InvalidValueError, match=r"^TripletMarginLoss: argument 'margin'"):
        dg.nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(dg.ShapeError, match=r"^gaussian_nll_loss: argument 'var'"):
        F.gaussian_nll_loss(a, b, dg.ones(3))
