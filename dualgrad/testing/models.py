"""Small reference models and data for lockstep runs: a classifier MLP, a regression, and a
sequence classifier with Embedding, LayerNorm and Dropout. Each ``*_run`` returns the
arguments of ``lockstep``'s model factory and batches for ``steps`` steps."""
from __future__ import annotations

import numpy as np

from .. import nn
from ..api import ops


def mlp_classifier():
    """784 -> 64 -> 64 -> 10 with ReLU: the shape of an MNIST classifier, made small."""
    return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def regression():
    """13 -> 32 -> 1 with Tanh, trained with mean squared error."""
    return nn.Sequential(nn.Linear(13, 32), nn.Tanh(), nn.Linear(32, 1))


class SequenceClassifier(nn.Module):
    """Token embeddings, averaged over the sequence, then LayerNorm, GELU, Dropout, Linear."""

    def __init__(self, vocab: int = 50, dim: int = 24, classes: int = 5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.hidden = nn.Linear(dim, dim)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens):
        h = ops.mean(self.embed(tokens), axis=1)
        return self.out(self.drop(self.act(self.hidden(self.norm(h)))))


def classifier_batches(steps: int, batch: int = 32, seed: int = 0) -> list:
    """(x, labels) batches for ``mlp_classifier``: labels a fixed linear function of x."""
    rng = np.random.default_rng(seed)
    proj = rng.standard_normal((784, 10)).astype(np.float32)
    out = []
    for _ in range(steps):
        x = rng.uniform(0, 1, (batch, 784)).astype(np.float32)
        out.append((x, np.argmax(x @ proj, axis=1)))
    return out


def regression_batches(steps: int, batch: int = 32, seed: int = 0) -> list:
    """(x, y) batches for ``regression``: y a smooth function of x plus noise."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(13)
    out = []
    for _ in range(steps):
        x = rng.standard_normal((batch, 13)).astype(np.float32)
        y = np.sin(x @ w)[:, None] + 0.05 * rng.standard_normal((batch, 1))
        out.append((x, y.astype(np.float32)))
    return out


def sequence_batches(steps: int, batch: int = 16, length: int = 7, seed: int = 0) -> list:
    """(tokens, labels) batches for ``SequenceClassifier``: the label is the most frequent
    token's class."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        tokens = rng.integers(0, 50, (batch, length))
        out.append((tokens, np.array([np.bincount(t).argmax() % 5 for t in tokens])))
    return out


# name -> (model factory, batches for n steps)
MODELS = {
    "mlp_classifier": (mlp_classifier, classifier_batches),
    "regression": (regression, regression_batches),
    "sequence_classifier": (SequenceClassifier, sequence_batches),
}
