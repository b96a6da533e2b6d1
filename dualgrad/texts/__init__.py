"""Texts shipped with the package, for examples that train on characters (an original
story of a few kilobytes, ``lighthouse``)."""
from __future__ import annotations

from importlib import resources

from ..errors import bad_value

NAMES = ("lighthouse",)


def load(name: str = "lighthouse") -> str:
    """The text ``name`` (one of ``NAMES``) as a string."""
    if name not in NAMES:
        raise bad_value("texts.load", "name", name, " or ".join(repr(n) for n in NAMES))
    return resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
