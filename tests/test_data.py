"""dg.data: batches in order or in a seeded shuffle, short last batches, device tensors for
every column, the background gather, and errors."""
import gc
import threading
import time

import numpy as np
import pytest

import dualgrad as dg


def arrays(n=10):
    x = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
    y = np.arange(n, dtype=np.int64) % 4
    return x, y


def rows_seen(loader) -> list:
    """The first column of every batch's x, as host values."""
    return [np.asarray(x.numpy() if isinstance(x, dg.Tensor) else x)[:, 0] // 3
            for x, _ in loader]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_batches_in_order_with_a_short_last_one(device, prefetch):
    x, y = arrays(10)
    loader = dg.data.DataLoader(dg.data.TensorDataset(x, y), batch_size=4, prefetch=prefetch)
    assert len(loader) == 3
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    for k, (xb, yb) in enumerate(batches):
        assert isinstance(xb, dg.Tensor) and xb.dtype == np.float32
        assert xb.scope == ("persistent" if device == "gpu" else "pass")
        np.testing.assert_array_equal(xb.numpy(), x[4 * k:4 * k + 4].astype(np.float32))
        assert isinstance(yb, dg.Tensor) and yb.dtype == np.int32    # (PyTorch's int64)
        np.testing.assert_array_equal(yb.numpy(), y[4 * k:4 * k + 4])


def test_integer_and_bool_columns_come_as_tensors_as_pytorchs(device):
    # labels move and compare as PyTorch's: y.to(device), y.size(0), (pred == y).sum()
    x, y = arrays(6)
    flags = np.arange(6) % 2 == 0
    loader = dg.data.DataLoader(dg.data.TensorDataset(x, y, flags), batch_size=4)
    xb, yb, fb = next(iter(loader))
    assert yb.to(device).size(0) == 4 and fb.dtype == np.bool_
    np.testing.assert_array_equal(fb.numpy(), flags[:4])
    assert (yb == dg.tensor(y[:4])).sum().item() == 4
    _, yh = next(iter(dg.data.DataLoader((x, y), batch_size=4, to_device=False)))
    assert isinstance(yh, np.ndarray) and yh.dtype == y.dtype          # (as they are)
    with pytest.raises(dg.InvalidValueError, match=r"^DataLoader: argument "
                                                   r"'dataset.arrays\[1\]' holds integers"):
        dg.data.DataLoader((x, y + 2 ** 40))
    dg.data.DataLoader((x, y + 2 ** 40), to_device=False)               # (no limit there)


def test_drop_last_leaves_out_the_short_batch():
    loader = dg.data.DataLoader(arrays(10), batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert [list(r) for r in rows_seen(loader)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(dg.data.DataLoader(arrays(8), batch_size=4, drop_last=True)) == 2


def test_shuffle_is_a_seeded_permutation_new_each_epoch():
    loader = dg.data.DataLoader(arrays(50), batch_size=8, shuffle=True, seed=3)
    first, second = np.concatenate(rows_seen(loader)), np.concatenate(rows_seen(loader))
    assert sorted(first) == list(range(50)) and sorted(second) == list(range(50))
    assert list(first) != list(range(50)) and list(first) != list(second)
    again = dg.data.DataLoader(arrays(50), batch_size=8, shuffle=True, seed=3)
    np.testing.assert_array_equal(np.concatenate(rows_seen(again)), first)
    again.set_epoch(0)
    np.testing.assert_array_equal(np.concatenate(rows_seen(again)), first)
    np.testing.assert_array_equal(np.concatenate(rows_seen(again)), second)
    other = dg.data.DataLoader(arrays(50), batch_size=8, shuffle=True, seed=4)
    assert list(np.concatenate(rows_seen(other))) != list(first)


def test_shuffle_without_a_seed_follows_manual_seed():
    def order():
        dg.manual_seed(11)
        loader = dg.data.DataLoader(arrays(30), batch_size=30, shuffle=True)
        return np.concatenate(rows_seen(loader))
    np.testing.assert_array_equal(order(), order())


def test_one_array_gives_batches_not_tuples(device):
    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(6, 2)
    batches = list(dg.data.DataLoader(x, batch_size=4))
    assert [b.shape for b in batches] == [(4, 2), (2, 2)]
    np.testing.assert_array_equal(batches[1].numpy(), x[4:])


def test_to_device_false_gives_numpy_for_capture_step():
    x, y = arrays(6)
    xb, yb = next(iter(dg.data.DataLoader((x, y), batch_size=6, to_device=False)))
    assert isinstance(xb, np.ndarray) and xb.dtype == np.float32 and xb.flags.c_contiguous
    np.testing.assert_array_equal(xb, x.astype(np.float32))
    np.testing.assert_array_equal(yb, y)


def test_map_style_dataset_samples_are_stacked():
    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.array([i, i * i], np.float32), i % 2

    xb, yb = list(dg.data.DataLoader(Squares(), batch_size=3, to_device=False))[1]
    np.testing.assert_array_equal(xb, [[3, 9], [4, 16]])
    np.testing.assert_array_equal(yb, [1, 0])

    class Listed(Squares):            # fields in a list, as PyTorch's collation takes them
        def __getitem__(self, i):
            return list(super().__getitem__(i))
    xb, yb = list(dg.data.DataLoader(Listed(), batch_size=3, to_device=False))[1]
    np.testing.assert_array_equal(xb, [[3, 9], [4, 16]])
    np.testing.assert_array_equal(yb, [1, 0])


@pytest.mark.parametrize("prefetch", [0, 3])
def test_an_error_in_the_dataset_reaches_the_loop(prefetch):
    class Broken:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            if i == 4:
                raise KeyError(f"sample {i} is missing")
            return np.zeros(2, np.float32)

    it = iter(dg.data.DataLoader(Broken(), batch_size=2, prefetch=prefetch, to_device=False))
    next(it), next(it)
    with pytest.raises(KeyError, match="sample 4 is missing"):
        next(it)


def _data_threads() -> int:
    return sum(t.name == "dualgrad-data" for t in threading.enumerate())


def test_leaving_a_loop_early_stops_the_background_thread():
    before = _data_threads()
    loader = dg.data.DataLoader(arrays(400), batch_size=2, prefetch=2)
    for _ in loader:
        break                        # the thread is blocked on a full queue here
    gc.collect()
    deadline = time.monotonic() + 5
    while _data_threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _data_threads() == before
    it = iter(loader)
    next(it)
    it.close()
    assert _data_threads() == before


def test_training_from_the_loader_equals_training_from_slices(device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype(np.float32)
    y = rng.integers(0, 3, 64)

    def train(batches):
        dg.manual_seed(1)
        model = dg.nn.Sequential(dg.nn.Linear(5, 8), dg.nn.Tanh(), dg.nn.Linear(8, 3))
        opt = dg.optimizer_adam(model.parameters(), lr=1e-2)
        for xb, yb in batches:
            with dg.with_grad_tape():
                loss = dg.softmax_cross_entropy(model(xb), yb)
                loss.backward()
            opt.step()
            opt.zero_grad()
        return [p.numpy() for p in model.parameters()]

    loader = dg.data.DataLoader((x, y), batch_size=16, shuffle=True, seed=5)
    order = loader.order(0)
    by_hand = train((dg.ag_tensor(x[order[k:k + 16]]), y[order[k:k + 16]])
                    for k in range(0, 64, 16))
    for a, b in zip(train(loader), by_hand):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("make, error, pattern", [
    (lambda: dg.data.DataLoader(arrays(), batch_size=0), dg.InvalidValueError,
     r"^DataLoader: argument 'batch_size'"),
    (lambda: dg.data.DataLoader(arrays(), prefetch=-1), dg.InvalidValueError,
     r"^DataLoader: argument 'prefetch'"),
    (lambda: dg.data.DataLoader(arrays(), shuffle=1), dg.ArgumentTypeError,
     r"^DataLoader: argument 'shuffle'"),
    (lambda: dg.data.DataLoader(arrays(), seed=-2), dg.InvalidValueError,
     r"^DataLoader: argument 'seed'"),
    (lambda: dg.data.DataLoader(42), dg.ArgumentTypeError, r"^DataLoader: argument 'dataset'"),
    (lambda: dg.data.TensorDataset(np.zeros((4, 2)), np.zeros(5)), dg.ShapeError,
     r"^TensorDataset: argument 'arrays\[1\]' has shape \(5,\); expected 4 rows"),
    (lambda: dg.data.TensorDataset(np.array(["a", "b"])), dg.ArgumentTypeError,
     r"^TensorDataset: argument 'arrays\[0\]' has dtype <U1"),
    (lambda: dg.data.TensorDataset(np.float32(1.0)), dg.ShapeError,
     r"^TensorDataset: argument 'arrays\[0\]'"),
    (lambda: dg.data.DataLoader(np.zeros((2, 1, 1, 1, 1, 1, 1))), dg.ShapeError,
     r"^DataLoader: argument 'dataset.arrays\[0\]'"),
])
def test_bad_arguments_are_named(make, error, pattern):
    state = dg.api.random.get_state()
    with pytest.raises(error, match=pattern):
        make()
    assert dg.api.random.get_state() == state      # nothing drawn by a refused loader


# -- Dataset, Subset, ConcatDataset, random_split (PyTorch's names) ----------------------------
class _Squares(dg.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.float32([i]), i * i


def test_datasets_join_and_subset_as_torch():
    joined = _Squares(10) + _Squares(5)
    assert len(joined) == 15 and joined[12][1] == 4 and joined[-1][1] == 16
    with pytest.raises(IndexError):
        joined[15]
    part = dg.data.Subset(joined, [14, 0, -2])
    assert len(part) == 3 and [part[k][1] for k in range(3)] == [16, 0, 9]
    table = dg.data.TensorDataset(np.arange(10, dtype=np.float32)[:, None], np.arange(10))
    rows = dg.data.Subset(table, [3, 1, 4])
    (x, y), = list(dg.data.DataLoader(rows, batch_size=3, to_device=False))
    np.testing.assert_array_equal(y, [3, 1, 4])
    np.testing.assert_array_equal(x[:, 0], [3.0, 1.0, 4.0])
    with pytest.raises(dg.InvalidValueError, match=r"^Subset: argument 'indices'"):
        dg.data.Subset(table, [10])


def test_random_split_is_a_seeded_partition():
    data = _Squares(20)
    a, b = dg.data.random_split(data, [0.7, 0.3], seed=1)
    assert (len(a), len(b)) == (14, 6)
    assert sorted(np.concatenate([a.indices, b.indices]).tolist()) == list(range(20))
    again, _ = dg.data.random_split(data, [14, 6], seed=1)
    np.testing.assert_array_equal(again.indices, a.indices)
    parts = dg.data.random_split(_Squares(10), [1 / 3, 1 / 3, 1 / 3], seed=2)
    assert [len(p) for p in parts] == [4, 3, 3]      # (the one left over to the first)
    with pytest.raises(dg.InvalidValueError, match=r"^random_split: argument 'lengths'"):
        dg.data.random_split(data, [5, 6])


def test_utils_data_is_pytorchs_module_name():
    from dualgrad.utils.data import DataLoader, random_split
    assert DataLoader is dg.data.DataLoader and random_split is dg.data.random_split
