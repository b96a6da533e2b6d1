"""``dg.nn.utils``: ``torch.nn.utils``'s gradient clipping and parameter vectors, and
``rnn.pad_sequence``, under PyTorch's names."""
from __future__ import annotations

from ...api.indexing import concat
from ...api.ops import reshape
from ...api.optim import clip_grad_norm, clip_grad_value
from ...api.tensor import Tensor
from ...errors import ShapeError, bad_type
from . import rnn  # noqa: F401  (dg.nn.utils.rnn.pad_sequence)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0):
    """``dg.clip_grad_norm``: the gradients scaled in place so their joint norm is at most
    ``max_norm``; returns the norm before clipping."""
    return clip_grad_norm(parameters, max_norm, norm_type)


def clip_grad_value_(parameters, clip_value: float) -> None:
    """``dg.clip_grad_value``: every gradient clamped to [-clip_value, clip_value]."""
    clip_grad_value(parameters, clip_value)


def _listed(fn: str, parameters) -> list:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for k, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise bad_type(fn, f"parameters[{k}]", p, "a Tensor (a Parameter)")
    return params


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and joined into one vector (gradients flow back)."""
    params = _listed("parameters_to_vector", parameters)
    return concat([reshape(p, (p.size,)) for p in params], 0)


def vector_to_parameters(vec, parameters) -> None:
    """Each parameter set, in place, to its slice of ``vec`` (a 1-D tensor holding them all,
    in order): outside a tape, as the other in-place writes."""
    params = _listed("vector_to_parameters", parameters)
    if not isinstance(vec, Tensor):
        raise bad_type("vector_to_parameters", "vec", vec, "a 1-D Tensor")
    total = sum(p.size for p in params)
    if vec.ndim != 1 or vec.size != total:
        raise ShapeError(f"vector_to_parameters: argument 'vec' has shape {vec.shape}; "
                         f"expected ({total},), the parameters' element count")
    at = 0
    for p in params:
        p.copy_(reshape(vec[at:at + p.size], p.shape))
        at += p.size


__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "rnn"]
