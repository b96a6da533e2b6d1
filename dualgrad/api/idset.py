"""A set of objects held weakly and told apart by identity: tensors compare elementwise
(``==`` makes a boolean tensor), so weakref.WeakSet, which compares its members, cannot
hold them."""
from __future__ import annotations

import weakref


class WeakIdSet:
    """add, discard, clear, iteration and len over weakly held objects, by identity."""

    __slots__ = ("_items",)

    def __init__(self):
        self._items = weakref.WeakValueDictionary()    # id -> object (gone when it dies)

    def add(self, obj) -> None:
        self._items[id(obj)] = obj

    def discard(self, obj) -> None:
        if self._items.get(id(obj)) is obj:
            del self._items[id(obj)]

    def clear(self) -> None:
        self._items.clear()

    def __iter__(self):
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, obj) -> bool:
        return self._items.get(id(obj)) is obj
