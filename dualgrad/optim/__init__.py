"""Optimizers and schedules (``dg.optim``): see ``dualgrad.api.optim``, ``dualgrad.api.optimizers`` and
``dualgrad.api.schedules``."""
from ..api.optim import Optimizer, clip_grad_norm, clip_grad_value  # noqa: F401
from ..api.optimizers import (SGD, Adagrad, Adam, Adamax, AdamW, NAdam, RAdam,  # noqa: F401
                             RMSprop)
from . import lr_scheduler  # noqa: F401  (PyTorch's module name for the schedules)
from .lr_scheduler import (ConstantLR, CosineAnnealingLR,  # noqa: F401
                           CosineAnnealingWarmRestarts, CyclicLR, ExponentialLR, LambdaLR,
                           LinearLR, LRScheduler, MultiplicativeLR, MultiStepLR, OneCycleLR,
                           PolynomialLR, ReduceLROnPlateau, SequentialLR, StepLR,
                           WarmupCosineLR)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam",
           "RAdam", "clip_grad_norm", "clip_grad_value",
           "LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "WarmupCosineLR",
           "OneCycleLR", "CyclicLR", "SequentialLR", "ReduceLROnPlateau", "lr_scheduler"]
