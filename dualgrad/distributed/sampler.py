"""Each process's share of a dataset."""
from __future__ import annotations

import numpy as np

from ..api import checks
from ..errors import bad_type, bad_value


class DistributedSampler:
    """The sample indices of one process, as PyTorch's ``DistributedSampler``: each epoch's
    order (a permutation drawn from ``seed`` and the epoch when ``shuffle``, the same in
    every process) is cut into ``num_replicas`` disjoint shards, rank ``r`` taking every
    ``num_replicas``-th index from position ``r``. Without ``drop_last`` the order is
    padded with its own first indices to a multiple of ``num_replicas`` (every process
    gets as many samples); with it, the tail is left out. ``num_replicas`` and ``rank``
    default to the world's. Give it to ``DataLoader(sampler=...)``, which sets its epoch
    at each pass (or call ``set_epoch``)."""

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        fn = "DistributedSampler"
        if not hasattr(dataset, "__len__"):
            raise bad_type(fn, "dataset", dataset, "a dataset with len()")
        if num_replicas is None or rank is None:
            from .world import world
            w = world()
            num_replicas = w.size if num_replicas is None else num_replicas
            rank = w.rank if rank is None else rank
        self.num_replicas = checks.integer(fn, "num_replicas", num_replicas, 1)
        self.rank = checks.integer(fn, "rank", rank, 0)
        if self.rank >= self.num_replicas:
            raise bad_value(fn, "rank", rank, f"a rank in [0, {self.num_replicas})")
        self.shuffle = checks.flag(fn, "shuffle", shuffle)
        self.seed = checks.integer(fn, "seed", seed, 0)
        self.drop_last = checks.flag(fn, "drop_last", drop_last)
        self.dataset_size = len(dataset)
        self.epoch = 0
        n, k = self.dataset_size, self.num_replicas
        self.num_samples = n // k if drop_last else -(-n // k)
        self.total_size = self.num_samples * k

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next pass takes."""
        self.epoch = checks.integer("DistributedSampler.set_epoch", "epoch", epoch, 0)

    def indices(self) -> np.ndarray:
        """This process's sample indices for the current epoch, in order."""
        n = self.dataset_size
        order = (np.random.default_rng((self.seed, self.epoch)).permutation(n)
                 if self.shuffle else np.arange(n))
        if self.total_size > n:             # padded with the order's start, repeated
            order = np.resize(order, self.total_size) if n else order
        return order[:self.total_size][self.rank::self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples
