"""``torch.amp``'s names: ``dg.amp.autocast(device_type, dtype=...)`` and
``dg.amp.GradScaler``, the same as ``dg.autocast`` and ``dg.GradScaler``."""
from .api.amp import GradScaler
from .api.autocast import autocast, is_autocast_enabled

__all__ = ["autocast", "GradScaler", "is_autocast_enabled"]
