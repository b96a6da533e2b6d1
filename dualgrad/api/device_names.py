"""``dg.device``: PyTorch's ``torch.device``, a device name with its type and index."""
from __future__ import annotations

from ..errors import bad_type, bad_value


class device(str):  # noqa: N801 - PyTorch's name
    """A device name, as ``torch.device``: ``dg.device("cuda")``, ``dg.device("cuda", 0)``,
    ``dg.device("cpu")``; ``.type`` and ``.index`` as PyTorch's. It is the name itself (a
    ``str``), so it goes wherever a device name does (``t.to(dev)``, ``model.to(dev)``,
    ``device=``), where naming "cuda" or "gpu" means the active gpu backend."""

    def __new__(cls, type, index=None):  # noqa: A002 - PyTorch's argument name
        if isinstance(type, device) and index is None:
            return type
        if not isinstance(type, str):
            raise bad_type("device", "type", type, "'cpu', 'cuda' or 'gpu' (or 'cuda:N')")
        kind, _, given = type.strip().lower().partition(":")
        if kind not in ("cpu", "cuda", "gpu") or (given and not given.isdigit()):
            raise bad_value("device", "type", type, "'cpu', 'cuda' or 'gpu' (or 'cuda:N')")
        if index is not None:
            if given:
                raise bad_value("device", "index", index, f"None where type ({type!r}) has "
                                                          "an index")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise bad_type("device", "index", index, "None or an int >= 0")
            given = str(index)
        self = super().__new__(cls, f"{kind}:{given}" if given else kind)
        self.type, self.index = kind, int(given) if given else None
        return self

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + \
            (f", index={self.index})" if self.index is not None else ")")


_NAMED: dict = {}


def named(name: str) -> device:
    """``device(name)``, made once a name (``t.device`` asks at every call)."""
    made = _NAMED.get(name)
    if made is None:
        made = _NAMED[name] = device(name)
    return made
