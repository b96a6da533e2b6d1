"""The backend-agnostic front end: tensors, autograd, ops, layers, optimizers, checkpoints.
Nothing here imports Vulkan or Numba; kernels run on ``device.active()``."""
