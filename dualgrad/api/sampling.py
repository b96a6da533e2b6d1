"""Draws from the distributions a tensor's values give, as PyTorch's: ``multinomial``,
``bernoulli`` and ``normal``.

The weights are read to the host and the draws made there from dualgrad's generator
(``manual_seed``) or a ``generator=``, as the factories draw theirs, so both backends
sample alike from the same values and a seed repeats the draws; the indices are uploaded
(int32). A sampling loop reads each step's weights back, which PyTorch's cpu does too.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidValueError, bad_shape, bad_value
from . import checks, random
from .creation import randn
from .logic import any as any_, gt, isnan, logical_or, lt, to
from .ops import _broadcast, _tensor, add, mul
from .tensor import Tensor, ag_tensor


def multinomial(input, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator=None) -> Tensor:
    """``num_samples`` category indices drawn from each row of ``input`` (1-D: one
    distribution; 2-D: one a row), as ``torch.multinomial``: the weights need not sum to one
    (finite, non-negative, a positive sum a row); a category of weight 0 is never drawn.
    Without ``replacement`` a row's draws are distinct, by the race PyTorch runs (the
    largest p / E, E exponential), so ``num_samples`` is at most the row's nonzero weights.
    int32 indices (PyTorch's are int64) of shape (rows, num_samples), or (num_samples,);
    no gradient. ``generator``: a ``dg.Generator`` to draw from (None: ``manual_seed``'s)."""
    fn = "multinomial"
    x = _tensor(fn, "input", input, low_precision=True)
    if x.ndim not in (1, 2):
        raise bad_shape(fn, "input", x.shape, "1 or 2 dimensions (a distribution, or one a "
                                              "row)")
    k = checks.integer(fn, "num_samples", num_samples, 1)
    replacement = checks.flag(fn, "replacement", replacement)
    draws = random.source(fn, generator)
    n = x.shape[-1]
    if not replacement and k > n:
        raise bad_value(fn, "num_samples", k, f"at most the {n} categories when drawing "
                                              "without replacement")
    p = x.numpy().astype(np.float64).reshape(-1, n)
    if n == 0 or not np.isfinite(p).all() or (p < 0).any():
        raise InvalidValueError(f"{fn}: argument 'input' holds a weight that is negative, "
                                "inf or NaN (or none at all); expected finite weights >= 0")
    if (p.sum(-1) <= 0).any():
        raise InvalidValueError(f"{fn}: argument 'input' has a row whose weights are all "
                                "0; expected a positive sum in every row")
    if not replacement and ((p > 0).sum(-1) < k).any():
        raise bad_value(fn, "num_samples", k, "at most each row's nonzero weights when "
                                              "drawing without replacement")
    picks = _with_replacement(draws, p, k) if replacement else \
        _without_replacement(draws, p, k)
    return ag_tensor(picks.reshape(x.shape[:-1] + (k,)), dtype="int32")


def _with_replacement(draws, p: np.ndarray, k: int) -> np.ndarray:
    """Each draw the first category whose running sum passes u * the row's sum."""
    cdf = np.cumsum(p, -1)
    u = draws.random((p.shape[0], k)) * cdf[:, -1:]
    picks = np.stack([np.searchsorted(c, v, side="right") for c, v in zip(cdf, u)])
    # (u * sum may round up to the sum: the row's last category of nonzero weight)
    last = p.shape[1] - 1 - np.argmax(p[:, ::-1] > 0, axis=-1)
    return np.minimum(picks, last[:, None])


def _without_replacement(draws, p: np.ndarray, k: int) -> np.ndarray:
    """The k largest p / E, E ~ Exp(1) each: the categories in the order a draw without
    replacement meets them."""
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = np.where(p > 0, p / draws.exponential(size=p.shape), -np.inf)
    return np.argsort(-keys, axis=-1, kind="stable")[:, :k]


def bernoulli(input, p=None, *, generator=None) -> Tensor:  # noqa: A002
    """0 or 1 for each element of ``input``, 1 with the probability the element holds (or
    ``p``, a number, for every element), as ``torch.bernoulli``: of input's float dtype,
    no gradient. The uniform draws come from dualgrad's generator (``manual_seed``; or
    ``generator``) and are uploaded, so both backends draw alike; the probabilities are
    checked to lie in [0, 1] (which reads that check's answer back)."""
    fn = "bernoulli"
    x = _tensor(fn, "input", input, low_precision=True)
    draws = random.source(fn, generator)
    if p is not None:
        chance = checks.number(fn, "p", p, 0.0, 1.0)
    elif x.size and bool(any_(logical_or(logical_or(lt(x, 0.0), gt(x, 1.0)),
                                         isnan(x))).item()):
        raise InvalidValueError(f"{fn}: argument 'input' holds a probability outside [0, 1] "
                                "(or NaN); expected values in [0, 1]")
    u = ag_tensor(draws.random(x.shape, dtype=np.float32))
    hit = lt(u, chance) if p is not None else lt(u, x.detach().float())
    return to(hit, x.dtype)


def normal(mean=0.0, std=1.0, size=None, *, generator=None) -> Tensor:
    """Values drawn from normal distributions, as ``torch.normal``: ``mean`` and ``std``
    tensors (broadcast together) or numbers, and ``size`` where both are numbers; float32
    (or the tensors' float dtype), std >= 0. Drawn from dualgrad's generator or
    ``generator`` (standard normals, uploaded, scaled and shifted on the device); no
    gradient flows to mean or std, as PyTorch's (write ``mean + std * randn_like(mean)``
    for one)."""
    fn = "normal"
    random.source(fn, generator)                      # (checked before anything is drawn)
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if size is not None and tensors:
        raise bad_value(fn, "size", size, "None where mean or std is a tensor (the result "
                                          "takes their shape)")
    if not tensors:
        if size is None:
            raise bad_value(fn, "size", None, "a size where mean and std are numbers")
        mu = checks.number(fn, "mean", mean)
        sigma = checks.number(fn, "std", std, 0.0)
        return add(mul(randn(size, generator=generator), sigma), mu)
    like = tensors[0]
    mu = _tensor(fn, "mean", mean, like).detach() if isinstance(mean, Tensor) else \
        checks.number(fn, "mean", mean)
    if isinstance(std, Tensor):
        sigma = _tensor(fn, "std", std, like).detach()
        if sigma.size and bool(any_(logical_or(lt(sigma, 0.0), isnan(sigma))).item()):
            raise InvalidValueError(f"{fn}: argument 'std' holds a value below 0 (or NaN); "
                                    "expected std >= 0")
    else:
        sigma = checks.number(fn, "std", std, 0.0)
    shape = _broadcast(fn, *(v.shape for v in (mu, sigma) if isinstance(v, Tensor))) \
        if len(tensors) == 2 else like.shape
    draws = randn(shape, generator=generator)
    return add(mul(to(draws, like.dtype), sigma), mu)


def _install_methods() -> None:
    Tensor.multinomial = lambda t, num_samples, replacement=False, *, generator=None: \
        multinomial(t, num_samples, replacement, generator=generator)
    Tensor.bernoulli = lambda t, p=None, *, generator=None: bernoulli(t, p,
                                                                       generator=generator)


_install_methods()

__all__ = ["multinomial", "bernoulli", "normal"]
