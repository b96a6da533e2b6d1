"""``torch.cuda.amp``'s names: ``autocast(enabled=True, dtype=float16, cache_enabled=True)``
(``dg.autocast("cuda", ...)``: float16 unless ``dtype`` says otherwise) and ``GradScaler``."""
from __future__ import annotations

from ..api.amp import GradScaler
from ..api.autocast import autocast as _autocast


def autocast(enabled: bool = True, dtype=None, cache_enabled=None) -> _autocast:
    """``dg.autocast("cuda", dtype, enabled)``, as ``torch.cuda.amp.autocast``."""
    return _autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


__all__ = ["autocast", "GradScaler"]
