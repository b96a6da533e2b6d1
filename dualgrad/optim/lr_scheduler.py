"""The schedules under PyTorch's module name (``torch.optim.lr_scheduler.StepLR`` is
``dg.optim.lr_scheduler.StepLR``): see ``dualgrad.api.schedules``."""
from ..api.schedules import (ConstantLR, CosineAnnealingLR,  # noqa: F401
                             CosineAnnealingWarmRestarts, CyclicLR, ExponentialLR, LambdaLR,
                             LinearLR, LRScheduler, MultiplicativeLR, MultiStepLR, OneCycleLR,
                             PolynomialLR, ReduceLROnPlateau, SequentialLR, StepLR,
                             WarmupCosineLR)

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "WarmupCosineLR",
           "OneCycleLR", "CyclicLR", "SequentialLR", "ReduceLROnPlateau"]
