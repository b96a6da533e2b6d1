"""Optimizers and schedules (``dg.optim``): see ``dualgrad.api.optim`` and
``dualgrad.api.schedules``."""
from .api.optim import (SGD, Adam, AdamW, Optimizer, clip_grad_norm,  # noqa: F401
                        clip_grad_value)
from .api.schedules import (ConstantLR, CosineAnnealingLR, CyclicLR,  # noqa: F401
                            ExponentialLR, LinearLR, LRScheduler, MultiStepLR, OneCycleLR,
                            PolynomialLR, ReduceLROnPlateau, SequentialLR, StepLR,
                            WarmupCosineLR)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm", "clip_grad_value",
           "LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "CosineAnnealingLR", "WarmupCosineLR", "OneCycleLR", "CyclicLR",
           "SequentialLR", "ReduceLROnPlateau"]
