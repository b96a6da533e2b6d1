"""Loss functions, as ``torch.nn.functional``'s: the same arguments, reductions ("mean",
"sum", "none") and formulas.

``softmax_cross_entropy`` with class indices and no options is one fused kernel; the rest
are compositions of the ops (so their gradients follow), with targets picked by the
``gather`` kernel. Everything a loss derives from its targets is made on the device, so a
loss inside ``capture_step`` records and replays (per-sample weights, the count of targets
that are not ignored).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import bad_axis, bad_shape, bad_value
from . import checks, device, logic, ops, tape
from .low_precision import computes_in_float32
from .ops import _constant, _make, _tensor, gather_rows
from .residency import adopt, handle
from .tensor import Tensor

SEEDED_LOGITS = 1 << 22         # softmax_cross_entropy makes its gradient in the forward
                                # for logits up to this many elements (16 MiB of float32)
_REDUCTIONS = ("mean", "sum", "none")


def _reduction(fn: str, reduction, allowed=_REDUCTIONS) -> str:
    if reduction not in allowed:
        raise bad_value(fn, "reduction", reduction,
                        "one of " + ", ".join(repr(r) for r in allowed))
    return reduction


def _reduced(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return ops.mean(loss)
    return ops.sum(loss) if reduction == "sum" else loss


def _same_shape(fn: str, pred, target) -> tuple:
    pred = _tensor(fn, "input", pred, target)
    target = _tensor(fn, "target", target, pred)
    if target.shape != pred.shape:
        raise bad_shape(fn, "target", target.shape, f"input's shape {pred.shape}")
    return pred, target


def _weight(fn: str, name: str, weight, like: Tensor, shape=None) -> Tensor | None:
    """An optional weight tensor, broadcastable to ``like`` (or of ``shape``)."""
    if weight is None:
        return None
    w = _tensor(fn, name, weight, like)
    if shape is not None and w.shape != shape:
        raise bad_shape(fn, name, w.shape, f"{shape}")
    try:
        np.broadcast_shapes(w.shape, like.shape)
    except ValueError:
        raise bad_shape(fn, name, w.shape, f"a shape that broadcasts to {like.shape}") from None
    return w


# ---------------------------------------------------------------------------------------------
# Regression

@computes_in_float32
def mse_loss(input, target, reduction: str = "mean") -> Tensor:  # noqa: A002
    """(input - target)**2, reduced: the mean over all elements by default."""
    input, target = _same_shape("mse_loss", input, target)
    reduction = _reduction("mse_loss", reduction)
    diff = ops.sub(input, target)
    return _reduced(ops.mul(diff, diff), reduction)


@computes_in_float32
def l1_loss(input, target, reduction: str = "mean") -> Tensor:  # noqa: A002
    """|input - target|, reduced; its gradient at 0 is 0."""
    input, target = _same_shape("l1_loss", input, target)
    return _reduced(ops.abs(ops.sub(input, target)), _reduction("l1_loss", reduction))


def _huber(input, target, bound: float, quadratic: float, linear: float) -> Tensor:
    """quadratic d**2 where |d| < bound, else linear (|d| - bound / 2) (d = input -
    target): the Huber and smooth L1 losses, as PyTorch's. A select, not a sum of a
    quadratic and a linear part, so the gradient of a small d is not rounded against
    the linear part's 1."""
    a = ops.abs(ops.sub(input, target))
    return logic.where(logic.lt(a, bound), ops.mul(ops.mul(a, a), quadratic),
                       ops.mul(ops.sub(a, 0.5 * bound), linear))


@computes_in_float32
def smooth_l1_loss(input, target, reduction: str = "mean", beta: float = 1.0) -> Tensor:  # noqa: A002
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta 0
    is the L1 loss."""
    input, target = _same_shape("smooth_l1_loss", input, target)
    reduction = _reduction("smooth_l1_loss", reduction)
    beta = checks.number("smooth_l1_loss", "beta", beta, 0.0)
    if beta == 0.0:
        return _reduced(ops.abs(ops.sub(input, target)), reduction)
    return _reduced(_huber(input, target, beta, 0.5 / beta, 1.0), reduction)


@computes_in_float32
def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0) -> Tensor:  # noqa: A002
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""
    input, target = _same_shape("huber_loss", input, target)
    reduction = _reduction("huber_loss", reduction)
    delta = checks.number("huber_loss", "delta", delta, 0.0, lo_open=True)
    return _reduced(_huber(input, target, delta, 0.5, delta), reduction)


# ---------------------------------------------------------------------------------------------
# Binary targets

@computes_in_float32
def binary_cross_entropy(input, target, weight=None, reduction: str = "mean") -> Tensor:  # noqa: A002
    """-(y log p + (1 - y) log(1 - p)) for probabilities p = ``input`` and targets y, each
    log clamped at -100 as PyTorch's; ``weight`` rescales each element (broadcast)."""
    fn = "binary_cross_entropy"
    input, target = _same_shape(fn, input, target)
    reduction = _reduction(fn, reduction)
    w = _weight(fn, "weight", weight, input)
    loss = _binary_cross_entropy_terms(input, target)
    return _reduced(loss if w is None else ops.mul(loss, w), reduction)


def _binary_cross_entropy_terms(p: Tensor, y: Tensor) -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) elementwise, each log clamped at -100, with
    PyTorch's gradients: (p - y) / max(p (1 - p), 1e-12) for p, finite where p is 0 or 1
    (where the clamped logs' own would meet 0 times inf), and log(1 - p) - log p for y
    (of the clamped logs: finite, where PyTorch's unclamped ones give inf)."""
    backend = device.active()
    hp, hy = handle(backend, p), handle(backend, y)
    log_p = backend.unary("clamp", backend.unary("log", hp), -100.0, math.inf)
    log_q = backend.unary("clamp", backend.unary("log1p", backend.unary("neg", hp)), -100.0,
                          math.inf)
    loss = backend.unary("neg", backend.binary(
        "add", backend.binary("mul", hy, log_p),
        backend.binary("mul", backend.unary("rsub_scalar", hy, 1.0), log_q)))

    def backward(g, needs):
        gp = gy = None
        if needs[0]:
            spread = backend.binary("mul", hp, backend.unary("rsub_scalar", hp, 1.0))
            gp = backend.binary("mul", g, backend.binary(
                "div", backend.binary("sub", hp, hy),
                backend.unary("clamp", spread, 1e-12, math.inf)))
        if needs[1]:
            gy = backend.binary("mul", g, backend.binary("sub", log_q, log_p))
        return gp, gy
    return _make(loss, (p, y), backward, backend)


@computes_in_float32
def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean",  # noqa: A002
                                     pos_weight=None) -> Tensor:
    """binary_cross_entropy(sigmoid(input), target) computed from the logits without
    overflow, as -(pos_weight y logsigmoid(x) + (1 - y) logsigmoid(-x)): each term keeps
    its accuracy where the other vanishes. ``pos_weight`` (broadcast along the last axis)
    weighs the positive targets, ``weight`` each element."""
    fn = "binary_cross_entropy_with_logits"
    input, target = _same_shape(fn, input, target)
    reduction = _reduction(fn, reduction)
    w = _weight(fn, "weight", weight, input)
    pw = _weight(fn, "pos_weight", pos_weight, input)
    positive = ops.mul(target, ops.logsigmoid(input))
    if pw is not None:
        positive = ops.mul(positive, pw)
    negative = ops.mul(ops.sub(1.0, target), ops.logsigmoid(ops.neg(input)))
    loss = ops.neg(ops.add(positive, negative))
    return _reduced(loss if w is None else ops.mul(loss, w), reduction)


# ---------------------------------------------------------------------------------------------
# Class targets

def _picked(fn: str, name: str, logp: Tensor, target, weight, ignore_index: int) -> tuple:
    """(-w[t] logp[i, t] per row, w[t] per row, the targets on the device (n, 1)): the
    weighted negative log-likelihoods of the targets and their weights, 0 for ignored rows,
    all on the device."""
    n, c = logp.shape
    t = ops.class_indices(fn, name, target, n, c, ignore_index)
    backend = device.active()
    hidx = backend.reshape(backend.indices(t), (n, 1))
    per_class = _constant((1, c), 1.0, logp.dtype) if weight is None else weight
    w = _gathered(per_class, hidx, ignore_index, n)
    nll = ops.neg(ops.mul(ops.reshape(gather_rows(logp, hidx, ignore_index), (n,)), w))
    return nll, w, hidx


def _class_weight(fn: str, weight, like: Tensor) -> Tensor | None:
    if weight is None:
        return None
    w = _tensor(fn, "weight", weight, like)
    if w.shape != (like.shape[1],):
        raise bad_shape(fn, "weight", w.shape, f"({like.shape[1]},): one weight per class")
    return w


def _rows_classes(fn: str, name: str, x: Tensor) -> None:
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise bad_shape(fn, name, x.shape,
                        "(batch, classes), (classes,) or (batch, classes, d1, ...) with at "
                        "least one row and one class")


def _as_rows(fn: str, name: str, x: Tensor, target) -> tuple:
    """PyTorch's other forms of class scores as rows (rows, classes): one sample (C,) with
    a 0-d target, and (N, C, d1, ...) with targets (N, d1, ...) (or, as probabilities, of
    x's shape), the classes moved last. Returns (x, target, the shape a loss per row
    takes back for reduction "none", or None where x was 2-D)."""
    if x.ndim == 2:
        return x, target, None
    if x.ndim < 2:
        if x.ndim == 0:
            raise bad_shape(fn, name, x.shape, "(batch, classes), (classes,) or (batch, "
                                               "classes, d1, ...)")
        lead, perm = (), None
    else:
        lead, perm = (x.shape[0],) + x.shape[2:], (0,) + tuple(range(2, x.ndim)) + (1,)
    probabilities = _probabilities(target)
    t = target if isinstance(target, Tensor) else np.asarray(target)
    expected = x.shape if probabilities else lead
    if tuple(t.shape) != expected:
        raise bad_shape(fn, "target" if name == "input" else "targets", t.shape,
                        f"{expected} for {name} of shape {x.shape}")
    c = x.shape[0] if perm is None else x.shape[1]

    def rows(a, classes: bool):
        if classes and perm is not None:
            a = ops.transpose(a, perm) if isinstance(a, Tensor) else np.transpose(a, perm)
        shape = (-1, c) if classes else (-1,)
        return ops.reshape(a, shape) if isinstance(a, Tensor) else a.reshape(shape)
    return rows(x, True), rows(t, probabilities), lead


def _per_row_shape(loss: Tensor, shape, reduction: str) -> Tensor:
    """A per-row loss (reduction "none") in the shape of the scores' samples."""
    return ops.reshape(loss, shape) if reduction == "none" and shape is not None else loss


@computes_in_float32
def nll_loss(input, target, weight=None, ignore_index: int = -100,  # noqa: A002
             reduction: str = "mean") -> Tensor:
    """-w[t] input[i, t] for log-probabilities ``input`` (batch, classes) and class indices
    ``target``; rows whose target is ``ignore_index`` count for nothing. "mean" divides by
    the sum of the weights of the targets counted (their number without ``weight``). As
    in PyTorch, input may also be (classes,) with a 0-d target, or (batch, classes, d1,
    ...) with targets (batch, d1, ...)."""
    fn = "nll_loss"
    input = _tensor(fn, "input", input)
    reduction = _reduction(fn, reduction)
    input, target, samples = _as_rows(fn, "input", input, target)
    _rows_classes(fn, "input", input)
    ignore_index = checks.integer(fn, "ignore_index", ignore_index)
    nll, w, _ = _picked(fn, "target", input, target, _class_weight(fn, weight, input),
                        ignore_index)
    if reduction == "mean":
        return ops.div(ops.sum(nll), ops.sum(w))
    return _per_row_shape(_reduced(nll, reduction), samples, reduction)


@computes_in_float32
def softmax_cross_entropy(logits, targets, weight=None, ignore_index: int = -100,
                          label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
    """Cross-entropy of softmax(logits) against ``targets``, as PyTorch's ``cross_entropy``:
    ``logits`` (batch, classes); ``targets`` integer class indices (batch,), or class
    probabilities (batch, classes) as an array or tensor. Also PyTorch's other forms:
    (classes,) with a 0-d target, and (batch, classes, d1, ...) (e.g. a segmentation's
    scores per pixel) with targets (batch, d1, ...), "none" giving a loss of that shape.
    ``weight`` (classes,) rescales each class, rows whose target is ``ignore_index`` count
    for nothing, and ``label_smoothing`` mixes the targets with the uniform distribution.
    With "mean", class-index losses divide by the weights of the targets counted,
    probability losses by the number of samples. Without options, one fused kernel: the
    softmax is never materialised in the forward pass."""
    fn = "softmax_cross_entropy"
    logits = _tensor(fn, "logits", logits)
    reduction = _reduction(fn, reduction)
    logits, targets, samples = _as_rows(fn, "logits", logits, targets)
    _rows_classes(fn, "logits", logits)
    return _per_row_shape(_cross_entropy_rows(fn, logits, targets, weight, ignore_index,
                                              label_smoothing, reduction), samples, reduction)


def _cross_entropy_rows(fn, logits, targets, weight, ignore_index, label_smoothing,
                        reduction) -> Tensor:
    ignore_index = checks.integer(fn, "ignore_index", ignore_index)
    smoothing = checks.number(fn, "label_smoothing", label_smoothing, 0.0, 1.0)
    w = _class_weight(fn, weight, logits)
    n, c = logits.shape
    if _probabilities(targets):
        return _soft_target_loss(fn, logits, targets, w, smoothing, reduction)
    if w is None and smoothing == 0.0 and reduction == "mean" and \
            not _any_ignored(targets, ignore_index):
        return _fused_cross_entropy(logits, targets)
    logp = ops.log_softmax(logits, -1)
    nll, per_row, hidx = _picked(fn, "targets", logp, targets, w, ignore_index)
    nll = _reduced(nll, "sum") if reduction == "mean" else _reduced(nll, reduction)
    if smoothing:
        # PyTorch's: (1 - e) nll + e/C * -sum_c w_c logp_c, the second counted for the rows
        # counted by the first
        terms = logp if w is None else ops.mul(logp, ops.reshape(w, (1, c)))
        mask = per_row if w is None else \
            _gathered(_constant((1, c), 1.0, logits.dtype), hidx, ignore_index, n)
        smooth = ops.mul(ops.neg(ops.sum(terms, 1)), mask)
        smooth = _reduced(smooth, "sum") if reduction == "mean" else _reduced(smooth, reduction)
        nll = ops.add(ops.mul(nll, 1.0 - smoothing), ops.mul(smooth, smoothing / c))
    return ops.div(nll, ops.sum(per_row)) if reduction == "mean" else nll


def _gathered(per_class: Tensor, hidx, ignore_index: int, n: int) -> Tensor:
    """per_class[t] for each row's target t (0 where ignored), as a constant: the weights
    take no gradient."""
    backend = device.active()
    h = backend.gather(backend.reshape(handle(backend, per_class), (1, per_class.size)), hidx,
                       ignore_index)
    return adopt(backend, Tensor((n,), per_class.dtype), backend.reshape(h, (n,)))


def _probabilities(targets) -> bool:
    """Whether ``targets`` are class probabilities (a float tensor or array)."""
    if isinstance(targets, Tensor):
        return targets.dtype.kind == "f"
    try:
        return np.asarray(targets).dtype.kind == "f"
    except (TypeError, ValueError):
        return False


def _any_ignored(targets, ignore_index) -> bool:
    array = np.asarray(targets)
    return array.dtype.kind in "iu" and bool((array == ignore_index).any())


def _soft_target_loss(fn, logits, targets, w, smoothing, reduction) -> Tensor:
    q = _tensor(fn, "targets", targets, logits)
    if q.shape != logits.shape:
        raise bad_shape(fn, "targets", q.shape,
                        f"logits' shape {logits.shape} (class probabilities), or "
                        f"({logits.shape[0]},) integer class indices")
    n, c = logits.shape
    if smoothing:
        q = ops.add(ops.mul(q, 1.0 - smoothing), smoothing / c)
    if w is not None:
        q = ops.mul(q, ops.reshape(w, (1, c)))
    loss = ops.neg(ops.sum(ops.mul(ops.log_softmax(logits, -1), q), 1))
    return _reduced(loss, reduction)


def _fused_cross_entropy(logits: Tensor, targets) -> Tensor:
    targets = ops.class_indices("softmax_cross_entropy", "targets", targets, logits.shape[0],
                                logits.shape[1])
    backend = device.active()
    hx, ht = handle(backend, logits), backend.indices(targets)
    # Where the loss is recorded, its forward also makes the logits' gradient for a seed of
    # one, which backward() from the loss takes as it is: a dispatch and the seed fewer a
    # step. (Not past SEEDED_LOGITS: there the dispatch is a small part of the kernels'
    # time, and a loss summed with others would hold that storage unused.)
    seeded = tape.recording() and logits.requires_grad and logits.size <= SEEDED_LOGITS
    unit = backend.empty(logits.shape, logits.dtype) if seeded else None
    loss, lse = backend.softmax_cross_entropy(hx, ht, unit)

    def backward(g, needs):
        return (backend.softmax_cross_entropy_backward(hx, ht, lse, g),)
    return _make(loss, (logits,), backward, backend, seeded=None if unit is None else (unit,))


# ---------------------------------------------------------------------------------------------
# Distributions and similarity

# t log t is taken as 0 at t = 0 by computing log(max(t, _TINY)): the smallest normal float32
# (a device may flush a subnormal to 0, whose log is -inf; t log t below it is < 1e-36)
_TINY = float(np.finfo(np.float32).tiny)


@computes_in_float32
def kl_div(input, target, reduction: str = "mean", log_target: bool = False) -> Tensor:  # noqa: A002
    """target (log target - input) for log-probabilities ``input``, as PyTorch's kl_div
    (0 where target is 0); ``log_target``: the target is given as log-probabilities.
    "batchmean" divides the sum by the batch size (the KL divergence); "mean" by the
    number of elements, as PyTorch's default."""
    fn = "kl_div"
    input, target = _same_shape(fn, input, target)
    reduction = _reduction(fn, reduction, _REDUCTIONS + ("batchmean",))
    checks.flag(fn, "log_target", log_target)
    if log_target:
        loss = ops.mul(ops.exp(target), ops.sub(target, input))
    else:
        loss = ops.mul(target, ops.sub(ops.log(ops.maximum(target, _TINY)), input))
    if reduction == "batchmean":
        batch = input.shape[0] if input.ndim else 1
        return ops.div(ops.sum(loss), float(batch))
    return _reduced(loss, reduction)


@computes_in_float32
def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """(x1 / max(|x1|, eps)) . (x2 / max(|x2|, eps)) along ``dim`` (x1 and x2 broadcast),
    as PyTorch's: each norm clamped on its own (where a norm is below eps, it is eps, and
    the gradient is the one of that function)."""
    fn = "cosine_similarity"
    x1 = _tensor(fn, "x1", x1, x2)
    x2 = _tensor(fn, "x2", x2, x1)
    eps = checks.number(fn, "eps", eps, 0.0)
    rank = max(x1.ndim, x2.ndim)
    dim = checks.integer(fn, "dim", dim)
    if not -rank <= dim < max(rank, 1):
        raise bad_axis(fn, "dim", dim, f"a dimension in [-{rank}, {rank})")
    unit1, unit2 = (ops.div(x, ops.clamp(ops.sqrt(ops.sum(ops.mul(x, x), dim, True)), min=eps))
                    for x in (x1, x2))
    return ops.sum(ops.mul(unit1, unit2), dim)


__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "nll_loss", "softmax_cross_entropy", "kl_div",
           "cosine_similarity"]
