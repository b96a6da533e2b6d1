"""Batches from arrays (``dg.data``): TensorDataset, DataLoader, Dataset, Subset,
ConcatDataset and random_split, as PyTorch's.

The loader gathers the rows of each batch on a background thread, ``prefetch`` batches
ahead, so the gather (the costly part with shuffled rows) runs while the step runs; the
upload to the device happens on the caller's thread, as one host copy and a copy command
the device runs in order with the step's work (the host does not wait for it).
"""
from __future__ import annotations

import queue
import threading

import numpy as np

from . import checks, device, random
from .residency import adopt
from .tensor import DEFAULT_DTYPE, Tensor
from ..errors import InvalidValueError, bad_shape, bad_type, bad_value
from ..shapes import MAX_RANK


def _column(fn: str, name: str, value) -> np.ndarray:
    if isinstance(value, Tensor):
        value = value.numpy()
    array = checks.array(fn, name, value, "biuf",
                         "real numbers (bool, integer or floating point)")
    if array.ndim == 0:
        raise bad_shape(fn, name, array.shape, "at least one dimension (the samples)")
    return array


class TensorDataset:
    """Arrays (or tensors) that share their first dimension; sample ``i`` is the tuple of
    their rows ``i``, as ``torch.utils.data.TensorDataset``."""

    def __init__(self, *arrays):
        if not arrays:
            raise bad_value("TensorDataset", "arrays", arrays, "at least one array")
        self.arrays = tuple(_column("TensorDataset", f"arrays[{k}]", a)
                            for k, a in enumerate(arrays))
        n = len(self.arrays[0])
        for k, a in enumerate(self.arrays[1:], 1):
            if len(a) != n:
                raise bad_shape("TensorDataset", f"arrays[{k}]", a.shape,
                                f"{n} rows, as arrays[0] has")

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)

    def rows(self, index: np.ndarray) -> tuple:
        """The rows ``index`` of every array, gathered at once."""
        return tuple(np.take(a, index, axis=0) for a in self.arrays)


class Dataset:
    """A map-style dataset to subclass, as ``torch.utils.data.Dataset``: define
    ``__len__`` and ``__getitem__`` (a sample: an array, or a tuple of fields); ``a + b``
    joins two."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")

    def __add__(self, other) -> "ConcatDataset":
        return ConcatDataset([self, other])


def _rows_of(dataset, index: np.ndarray) -> tuple:
    """The samples ``index`` of ``dataset`` as stacked columns: gathered at once where the
    dataset can (a TensorDataset, a Subset of one), else sample by sample."""
    if hasattr(dataset, "rows"):
        return dataset.rows(index)
    return _Stacked(dataset).rows(index)


def _sized(fn: str, dataset) -> None:
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
        raise bad_type(fn, "dataset", dataset, "a dataset with len() and [i]")


class Subset(Dataset):
    """The samples ``indices`` of ``dataset``, in that order, as
    ``torch.utils.data.Subset``."""

    def __init__(self, dataset, indices):
        _sized("Subset", dataset)
        index = checks.array("Subset", "indices", np.asarray(indices), "iu", "sample indices")
        n = len(dataset)
        if index.ndim != 1 or (index.size and (index.min() < -n or index.max() >= n)):
            raise bad_value("Subset", "indices", f"shape {index.shape}",
                            f"a 1-D list of indices in [-{n}, {n})")
        self.dataset, self.indices = dataset, np.where(index < 0, index + n, index)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        return self.dataset[int(self.indices[i])]

    def rows(self, index: np.ndarray) -> tuple:
        return _rows_of(self.dataset, self.indices[index])


class ConcatDataset(Dataset):
    """Datasets one after another, as ``torch.utils.data.ConcatDataset``."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise bad_value("ConcatDataset", "datasets", self.datasets, "at least one dataset")
        for d in self.datasets:
            _sized("ConcatDataset", d)
        self.ends = np.cumsum([len(d) for d in self.datasets])

    def __len__(self) -> int:
        return int(self.ends[-1])

    def __getitem__(self, i):
        n = len(self)
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"ConcatDataset: index {i} is out of range for {n} samples")
        i %= n
        k = int(np.searchsorted(self.ends, i, side="right"))
        return self.datasets[k][i - (int(self.ends[k - 1]) if k else 0)]


def random_split(dataset, lengths, generator=None, *, seed: int | None = None) -> list:
    """``dataset`` cut into Subsets of ``lengths`` (counts that add up to its length, or
    fractions that add up to 1: floored, the samples left over given one each to the first
    parts, as PyTorch's) over a permutation drawn from ``seed``, or else from ``generator``
    (a ``dg.Generator``; None: dualgrad's generator, ``manual_seed``)."""
    draws = random.source("random_split", generator)
    _sized("random_split", dataset)
    n = len(dataset)
    values = [float(v) for v in lengths]
    if all(0 <= v <= 1 for v in values) and abs(sum(values) - 1) < 1e-9 and \
            sum(values) != n:
        counts = [int(np.floor(n * v)) for v in values]
        for k in range(n - sum(counts)):
            counts[k % len(counts)] += 1
    else:
        counts = [checks.integer("random_split", "lengths", v, 0) for v in lengths]
    if sum(counts) != n:
        raise bad_value("random_split", "lengths", list(lengths),
                        f"counts adding up to the dataset's {n} samples, or fractions "
                        "adding up to 1")
    if seed is None:
        seed = int(draws.integers(2 ** 63))
    order = np.random.default_rng(checks.integer("random_split", "seed", seed, 0)).permutation(n)
    cuts = np.cumsum([0] + counts)
    return [Subset(dataset, order[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


class _Stacked:
    """A map-style dataset (``len`` and ``[i]``), its samples stacked into batches."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def rows(self, index: np.ndarray) -> tuple:
        samples = [self.dataset[int(i)] for i in index]
        # (a list is a sample's fields too, as PyTorch's default collation reads it)
        if not isinstance(samples[0], (tuple, list)):
            return (np.stack([np.asarray(s) for s in samples]),)
        return tuple(np.stack([np.asarray(s[k]) for s in samples])
                     for k in range(len(samples[0])))


def _host_batch(columns: tuple) -> tuple:
    """Float columns as C-contiguous float32 (the default dtype); integer and bool ones as
    they are."""
    return tuple(np.ascontiguousarray(c, DEFAULT_DTYPE) if c.dtype.kind == "f" else c
                 for c in columns)


class DataLoader:
    """Iterates over ``dataset`` in batches of ``batch_size`` rows, as
    ``torch.utils.data.DataLoader``.

    ``dataset``: a TensorDataset, an array (batches are then arrays, not tuples), a tuple of
    arrays, or any object with ``len()`` and ``[i]`` giving a sample (an array, or a tuple
    or list of fields, each stacked into a column of the batch). With ``shuffle`` the order
    is a permutation drawn from ``seed`` and the epoch (a new one each pass over the loader,
    or as set by ``set_epoch``); ``seed=None`` draws the seed from ``generator`` (a
    ``dg.Generator``), or without one from dualgrad's generator (``dg.manual_seed``).
    ``drop_last`` leaves out a last, short batch.

    Columns come as tensors on the active backend, as PyTorch's (held outside any tape's
    pool, so they stay valid for as long as they are referenced): float ones float32,
    integer ones int32 (PyTorch's int64; a value past int32's range raises), bool ones
    bool. With ``to_device=False`` every column comes as a NumPy array (what
    ``capture_step`` takes). ``prefetch`` batches are gathered ahead on a background thread
    (0: none).

    ``sampler``: an object with ``len()`` and iteration over sample indices (a
    ``dg.distributed.DistributedSampler``: this process's share) visited in its order
    instead; it excludes ``shuffle``. Where it has ``set_epoch``, each pass sets it to the
    loader's epoch first, so a sharded order changes each epoch with no call of yours.
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None, prefetch: int = 2,
                 to_device: bool = True, sampler=None, generator=None):
        fn = "DataLoader"
        if sampler is not None:
            if not (hasattr(sampler, "__len__") and hasattr(sampler, "__iter__")):
                raise bad_type(fn, "sampler", sampler,
                               "an object with len() and iteration over sample indices")
            if shuffle:
                raise bad_value(fn, "shuffle", shuffle,
                                "False with a sampler (the sampler gives the order)")
        self.sampler = sampler
        self.batch_size = checks.integer(fn, "batch_size", batch_size, 1)
        self.shuffle = checks.flag(fn, "shuffle", shuffle)
        self.drop_last = checks.flag(fn, "drop_last", drop_last)
        self.prefetch = checks.integer(fn, "prefetch", prefetch, 0)
        self.to_device = checks.flag(fn, "to_device", to_device)
        if seed is not None:
            seed = checks.integer(fn, "seed", seed, 0)
        self._single = False
        if isinstance(dataset, TensorDataset):
            self.dataset = dataset
        elif isinstance(dataset, (np.ndarray, Tensor)):
            self.dataset, self._single = TensorDataset(dataset), True
        elif isinstance(dataset, tuple):
            self.dataset = TensorDataset(*dataset)
        elif hasattr(dataset, "rows") and hasattr(dataset, "__len__"):
            self.dataset = dataset              # (a Subset: its rows gathered at once)
        elif hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"):
            self.dataset = _Stacked(dataset)
        else:
            raise bad_type(fn, "dataset", dataset,
                           "a TensorDataset, an array, a tuple of arrays or a dataset with "
                           "len() and [i]")
        if isinstance(self.dataset, TensorDataset) and self.to_device:
            for k, a in enumerate(self.dataset.arrays):
                if a.ndim > MAX_RANK:
                    raise bad_shape(fn, f"dataset.arrays[{k}]", a.shape,
                                    f"at most {MAX_RANK} dimensions")
                if a.dtype.kind in "iu":
                    _int32_column(f"dataset.arrays[{k}]", a)
        draws = random.source(fn, generator)
        self.seed = int(draws.integers(2**63)) if seed is None else seed
        self.epoch = 0

    def __len__(self) -> int:
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use ``epoch``'s order (the count goes on from there)."""
        self.epoch = checks.integer("DataLoader.set_epoch", "epoch", epoch, 0)

    def order(self, epoch: int) -> np.ndarray:
        """The sample indices of ``epoch``, in the order the loader visits them."""
        if self.sampler is not None:
            if hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(epoch)
            order = np.fromiter(iter(self.sampler), np.int64)
            n = len(self.dataset)
            if order.size and not (0 <= order.min() and order.max() < n):
                from ..errors import IndexOutOfRange
                raise IndexOutOfRange(f"DataLoader: the sampler gave sample index "
                                      f"{order.min() if order.min() < 0 else order.max()}; "
                                      f"the dataset has {n} samples")
            return order
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng((self.seed, epoch)).permutation(n)

    def __iter__(self):
        order = self.order(self.epoch)
        self.epoch += 1
        count = len(self)
        chunks = [order[k * self.batch_size:(k + 1) * self.batch_size] for k in range(count)]
        batches = (_host_batch(self.dataset.rows(c)) for c in chunks)
        source = _Prefetched(batches, self.prefetch) if self.prefetch else batches
        return _Batches(source, device.active() if self.to_device else None, self._single)


def _int32_column(name: str, array: np.ndarray) -> np.ndarray:
    """An integer column as int32, dualgrad's integer type; values past its range refused."""
    if array.size and (array.min() < -2 ** 31 or array.max() >= 2 ** 31):
        raise InvalidValueError(f"DataLoader: argument '{name}' holds integers past int32's "
                                "range (integer tensors are int32); to_device=False gives "
                                "NumPy arrays as they are")
    return np.ascontiguousarray(array, np.int32)


class _Batches:
    """The loader's iterator: host batches, uploaded as they are handed out."""

    def __init__(self, source, backend, single: bool):
        self.source, self.backend, self.single = source, backend, single

    def __iter__(self):
        return self

    def __next__(self):
        columns = next(self.source)
        if self.backend is not None:
            columns = tuple(self._upload(c) if c.dtype.kind in "biuf" else c for c in columns)
        return columns[0] if self.single else columns

    def _upload(self, array: np.ndarray) -> Tensor:
        if array.ndim > MAX_RANK:
            raise bad_shape("DataLoader", "dataset", array.shape,
                            f"samples whose batches have at most {MAX_RANK} dimensions")
        if array.dtype.kind in "iu":
            array = _int32_column("dataset", array)
        t = Tensor(array.shape, array.dtype, persistent=True)
        return adopt(self.backend, t, self.backend.upload(array, persistent=True))

    def close(self) -> None:
        """Stop the background thread (also done when the iterator is dropped)."""
        close = getattr(self.source, "close", None)
        if close is not None:
            close()


_END = object()


def _put(q: queue.Queue, stop: threading.Event, item) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            pass
    return False


def _produce(items, q: queue.Queue, stop: threading.Event) -> None:
    """The background thread's work. It holds the queue and the event only, not the
    iterator reading them, so that dropping the iterator stops it."""
    try:
        for item in items:
            if not _put(q, stop, (item, None)):
                return
    except BaseException as exc:           # noqa: BLE001 - handed to the consumer
        _put(q, stop, (_END, exc))
        return
    _put(q, stop, (_END, None))


class _Prefetched:
    """Items of an iterator produced on a background thread, at most ``depth`` ahead; an
    exception there is raised here, at the item it stopped."""

    def __init__(self, items, depth: int):
        self._queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=_produce, args=(items, self._queue, self._stop),
                                        daemon=True, name="dualgrad-data")
        self._done = False
        self._thread.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        item, exc = self._queue.get()
        if item is _END:
            self._done = True
            self._thread.join()
            if exc is not None:
                raise exc
            raise StopIteration
        return item

    def close(self) -> None:
        self._done = True
        self._stop.set()
        self._thread.join()

    def __del__(self):
        self._stop.set()
