"""The losses as modules (``dg.nn.CrossEntropyLoss`` ...), as PyTorch's: the arguments are
checked when the module is made; a weight given as an array becomes a tensor then, so it
is uploaded once, not at every call."""
from __future__ import annotations

from . import losses, pair_losses
from .nn import Module
from .tensor import Tensor, ag_tensor


def _tensor_or_none(weight):
    return weight if weight is None or isinstance(weight, Tensor) else ag_tensor(weight)


class _Loss(Module):
    """A loss module: its ``reduction``, checked when it is made."""

    def __init__(self, reduction: str = "mean", allowed=losses._REDUCTIONS):
        super().__init__()
        self.reduction = losses._reduction(type(self).__name__, reduction, allowed)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """``mse_loss``: (input - target)**2, reduced."""

    def forward(self, input, target):  # noqa: A002
        return losses.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """``l1_loss``: |input - target|, reduced."""

    def forward(self, input, target):  # noqa: A002
        return losses.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """``smooth_l1_loss`` with ``beta``."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction)
        self.beta = losses.checks.number("SmoothL1Loss", "beta", beta, 0.0)

    def forward(self, input, target):  # noqa: A002
        return losses.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    """``huber_loss`` with ``delta``."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        self.delta = losses.checks.number("HuberLoss", "delta", delta, 0.0, lo_open=True)

    def forward(self, input, target):  # noqa: A002
        return losses.huber_loss(input, target, self.reduction, self.delta)


class BCELoss(_Loss):
    """``binary_cross_entropy`` of probabilities, with an optional element ``weight``."""

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight = _tensor_or_none(weight)

    def forward(self, input, target):  # noqa: A002
        return losses.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``binary_cross_entropy_with_logits``, with ``weight`` and ``pos_weight``."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.weight = _tensor_or_none(weight)
        self.pos_weight = _tensor_or_none(pos_weight)

    def forward(self, input, target):  # noqa: A002
        return losses.binary_cross_entropy_with_logits(input, target, self.weight,
                                                       self.reduction, self.pos_weight)


class NLLLoss(_Loss):
    """``nll_loss`` of log-probabilities and class indices."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight = _tensor_or_none(weight)
        self.ignore_index = losses.checks.integer("NLLLoss", "ignore_index", ignore_index)

    def forward(self, input, target):  # noqa: A002
        return losses.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    """``softmax_cross_entropy`` (PyTorch's ``cross_entropy``) of logits and class indices
    or probabilities."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__(reduction)
        self.weight = _tensor_or_none(weight)
        self.ignore_index = losses.checks.integer("CrossEntropyLoss", "ignore_index",
                                                  ignore_index)
        self.label_smoothing = losses.checks.number("CrossEntropyLoss", "label_smoothing",
                                                    label_smoothing, 0.0, 1.0)

    def forward(self, input, target):  # noqa: A002
        return losses.softmax_cross_entropy(input, target, self.weight, self.ignore_index,
                                            self.label_smoothing, self.reduction)


class KLDivLoss(_Loss):
    """``kl_div`` of log-probabilities against a target distribution."""

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__(reduction, losses._REDUCTIONS + ("batchmean",))
        self.log_target = losses.checks.flag("KLDivLoss", "log_target", log_target)

    def forward(self, input, target):  # noqa: A002
        return losses.kl_div(input, target, self.reduction, self.log_target)


class CosineSimilarity(Module):
    """``cosine_similarity`` along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = losses.checks.integer("CosineSimilarity", "dim", dim)
        self.eps = losses.checks.number("CosineSimilarity", "eps", eps, 0.0)

    def forward(self, x1, x2):
        return losses.cosine_similarity(x1, x2, self.dim, self.eps)


class _Margin(_Loss):
    """A loss module with a ``margin``."""

    default_margin = 0.0

    def __init__(self, margin: float | None = None, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = pair_losses.checks.number(type(self).__name__, "margin",
                                                self.default_margin if margin is None
                                                else margin)


class MarginRankingLoss(_Margin):
    """``margin_ranking_loss``: max(0, -y (x1 - x2) + margin)."""

    def forward(self, input1, input2, target):
        return pair_losses.margin_ranking_loss(input1, input2, target, self.margin,
                                               self.reduction)


class HingeEmbeddingLoss(_Margin):
    """``hinge_embedding_loss``: x where y is 1, max(0, margin - x) where it is -1."""

    default_margin = 1.0

    def forward(self, input, target):  # noqa: A002
        return pair_losses.hinge_embedding_loss(input, target, self.margin, self.reduction)


class CosineEmbeddingLoss(_Margin):
    """``cosine_embedding_loss``: 1 - cos where y is 1, max(0, cos - margin) where -1."""

    def forward(self, input1, input2, target):
        return pair_losses.cosine_embedding_loss(input1, input2, target, self.margin,
                                                 self.reduction)


class SoftMarginLoss(_Loss):
    """``soft_margin_loss``: log(1 + exp(-y x))."""

    def forward(self, input, target):  # noqa: A002
        return pair_losses.soft_margin_loss(input, target, self.reduction)


class TripletMarginLoss(_Loss):
    """``triplet_margin_loss`` with ``margin``, ``p``, ``eps`` and ``swap``."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, reduction: str = "mean"):
        super().__init__(reduction)
        fn = "TripletMarginLoss"
        self.margin = pair_losses.checks.number(fn, "margin", margin, 0.0, lo_open=True)
        self.p, self.eps = p, pair_losses.checks.number(fn, "eps", eps, 0.0)
        self.swap = pair_losses.checks.flag(fn, "swap", swap)

    def forward(self, anchor, positive, negative):
        return pair_losses.triplet_margin_loss(anchor, positive, negative, self.margin,
                                               self.p, self.eps, self.swap, self.reduction)


class PoissonNLLLoss(_Loss):
    """``poisson_nll_loss`` with ``log_input``, ``full`` and ``eps``."""

    def __init__(self, log_input: bool = True, full: bool = False, eps: float = 1e-8,
                 reduction: str = "mean"):
        super().__init__(reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, input, target):  # noqa: A002
        return pair_losses.poisson_nll_loss(input, target, self.log_input, self.full,
                                            self.eps, self.reduction)


class GaussianNLLLoss(_Loss):
    """``gaussian_nll_loss`` with ``full`` and ``eps``; called with (input, target, var)."""

    def __init__(self, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):  # noqa: A002
        return pair_losses.gaussian_nll_loss(input, target, var, self.full, self.eps,
                                             self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """``multilabel_soft_margin_loss`` with a class ``weight``."""

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight = _tensor_or_none(weight)

    def forward(self, input, target):  # noqa: A002
        return pair_losses.multilabel_soft_margin_loss(input, target, self.weight,
                                                       self.reduction)


class PairwiseDistance(Module):
    """``pairwise_distance(x1, x2, p, eps, keepdim)``."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return pair_losses.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "NLLLoss", "CrossEntropyLoss", "KLDivLoss", "CosineSimilarity",
           "MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss",
           "SoftMarginLoss", "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "MultiLabelSoftMarginLoss", "PairwiseDistance"]
