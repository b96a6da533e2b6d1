"""The losses as modules (``dg.nn.CrossEntropyLoss`` ...), as PyTorch's: the arguments are
checked when the module is made; a weight given as an array becomes a tensor then, so it
is uploaded once, not at every call."""
from __future__ import annotations

from . import losses
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


__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "NLLLoss", "CrossEntropyLoss", "KLDivLoss", "CosineSimilarity"]
