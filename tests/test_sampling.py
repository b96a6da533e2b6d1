"""multinomial on both backends: its draws follow the weights (with and without replacement),
a seed repeats them, a weight of 0 is never drawn, and bad input is refused before a draw."""
import numpy as np
import pytest

import dualgrad as dg

P = np.array([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]], np.float32)


def frequencies(draws: np.ndarray, n: int) -> np.ndarray:
    return np.stack([np.bincount(row, minlength=n) for row in draws]) / draws.shape[-1]


def test_draws_with_replacement_follow_the_weights(device):
    dg.manual_seed(0)
    draws = dg.multinomial(dg.ag_tensor(P), 40000, replacement=True)
    assert draws.dtype == np.int32 and draws.shape == (2, 40000) and not draws.requires_grad
    want = P / P.sum(1, keepdims=True)
    assert np.all(np.abs(frequencies(draws.numpy(), 4) - want) <= 5 * np.sqrt(want / 40000))
    assert not np.any(draws.numpy() == np.array([[1], [2]]))       # (weights of 0)


def test_draws_without_replacement_are_distinct_and_the_first_follows_the_weights(device):
    dg.manual_seed(1)
    rows = np.tile(P, (5000, 1))                                     # 10000 rows, 2 kinds
    draws = dg.multinomial(dg.ag_tensor(rows), 3).numpy()
    assert draws.shape == (10000, 3)
    assert all(len(set(row)) == 3 for row in draws[:200])
    assert not np.any(draws[0::2] == 1) and not np.any(draws[1::2] == 2)
    for kind in range(2):
        first = frequencies(draws[kind::2, :1].T, 4)[0]
        want = P[kind] / P[kind].sum()
        assert np.all(np.abs(first - want) <= 5 * np.sqrt(want / 5000) + 1e-12)
    every = dg.multinomial(dg.ag_tensor([2.0, 1.0, 5.0]), 3).numpy()   # (1-D: one row)
    assert sorted(every.tolist()) == [0, 1, 2]


@pytest.mark.gpu
def test_a_seed_repeats_the_draws_on_either_backend(gpu):
    def draw():
        dg.manual_seed(7)
        p = dg.ag_tensor(P)
        return dg.multinomial(p, 6, True).numpy(), p.multinomial(2).numpy()
    on_gpu = draw()
    previous = dg.ag_device("cpu")
    try:
        on_cpu = draw()
    finally:
        dg.ag_device(previous)
    for got, want in zip(on_gpu, on_cpu):
        np.testing.assert_array_equal(got, want)


def test_16_bit_weights_are_taken(device):
    dg.manual_seed(2)
    p = dg.ag_tensor([0.0, 1.0, 0.0], dtype="bfloat16")
    assert dg.multinomial(p, 4, replacement=True).numpy().tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("call, error, pattern", [
    (lambda p: dg.multinomial(p, 5), dg.InvalidValueError,
     r"^multinomial: argument 'num_samples' is 5; expected at most the 4 categories"),
    (lambda p: dg.multinomial(p, 4), dg.InvalidValueError,
     r"^multinomial: argument 'num_samples' is 4; expected at most each row's nonzero"),
    (lambda p: dg.multinomial(p, 0), dg.InvalidValueError,
     r"^multinomial: argument 'num_samples'"),
    (lambda p: dg.multinomial(-p, 1), dg.InvalidValueError,
     r"^multinomial: argument 'input' holds a weight that is negative"),
    (lambda p: dg.multinomial(p * np.float32("nan"), 1, True), dg.InvalidValueError,
     r"^multinomial: argument 'input' holds a weight"),
    (lambda p: dg.multinomial(p * 0.0, 1, True), dg.InvalidValueError,
     r"^multinomial: argument 'input' has a row whose weights are all 0"),
    (lambda p: dg.multinomial(p.reshape(2, 2, 2), 1), dg.ShapeError,
     r"^multinomial: argument 'input' has shape \(2, 2, 2\)"),
    (lambda p: dg.multinomial(p, 1, generator=object()), dg.ArgumentTypeError,
     r"^multinomial: argument 'generator'"),
    (lambda p: dg.multinomial(p.int(), 1), dg.ArgumentTypeError,
     r"^multinomial: argument 'input' is a int32 tensor"),
])
def test_bad_input_is_refused_before_a_draw(device, call, error, pattern):
    p = dg.ag_tensor(P)
    dg.manual_seed(4)
    with pytest.raises(error, match=pattern):
        call(p)
    dg.manual_seed(4)
    before = dg.rand(3).numpy()
    dg.manual_seed(4)
    with pytest.raises(error):
        call(p)
    np.testing.assert_array_equal(dg.rand(3).numpy(), before)       # (nothing drawn)


def test_bernoulli_draws_ones_with_each_elements_probability(device):
    dg.manual_seed(5)
    p = np.tile(np.array([0.0, 0.25, 0.9, 1.0], np.float32), (20000, 1))
    draws = dg.bernoulli(dg.ag_tensor(p))
    assert draws.dtype == np.float32 and draws.shape == p.shape and not draws.requires_grad
    got = draws.numpy()
    assert set(np.unique(got)) <= {0.0, 1.0}
    rate = got.mean(0)
    assert rate[0] == 0.0 and rate[3] == 1.0
    assert abs(rate[1] - 0.25) < 5 * np.sqrt(0.25 * 0.75 / 20000)
    assert abs(rate[2] - 0.9) < 5 * np.sqrt(0.9 * 0.1 / 20000)
    half = dg.bernoulli(dg.zeros(40000), 0.5).numpy()              # (p for every element)
    assert abs(half.mean() - 0.5) < 5 * np.sqrt(0.25 / 40000)
    assert dg.ag_tensor(p[:2]).bernoulli().shape == (2, 4)


def test_normal_draws_from_its_means_and_deviations(device):
    dg.manual_seed(6)
    mean = dg.ag_tensor(np.array([-3.0, 0.0, 10.0], np.float32))
    std = dg.ag_tensor(np.array([[0.5], [2.0]], np.float32))
    draws = np.stack([dg.normal(mean, std).numpy() for _ in range(4000)])
    assert draws.shape == (4000, 2, 3)
    np.testing.assert_allclose(draws.mean(0), np.broadcast_to([-3.0, 0.0, 10.0], (2, 3)),
                               atol=5 * 2.0 / np.sqrt(4000))
    np.testing.assert_allclose(draws.std(0), np.broadcast_to([[0.5], [2.0]], (2, 3)),
                               rtol=0.1)
    numbers = dg.normal(2.0, 0.0, (3, 2))
    assert numbers.shape == (3, 2) and numbers.numpy().tolist() == [[2.0, 2.0]] * 3
    assert dg.normal(mean, 1.0).shape == (3,) and dg.normal(0.0, std).shape == (2, 1)
    dg.manual_seed(9)
    first = dg.normal(mean, std).numpy()
    dg.manual_seed(9)
    np.testing.assert_array_equal(dg.normal(mean, std).numpy(), first)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: dg.bernoulli(dg.ag_tensor([0.5, 1.5])), dg.InvalidValueError,
     r"^bernoulli: argument 'input' holds a probability outside \[0, 1\]"),
    (lambda: dg.bernoulli(dg.ag_tensor([0.5, np.nan])), dg.InvalidValueError,
     r"^bernoulli: argument 'input'"),
    (lambda: dg.bernoulli(dg.zeros(2), 2.0), dg.InvalidValueError, r"^bernoulli: argument 'p'"),
    (lambda: dg.bernoulli(dg.tensor([1, 0])), dg.ArgumentTypeError,
     r"^bernoulli: argument 'input' is a int32 tensor"),
    (lambda: dg.normal(0.0, -1.0, (2,)), dg.InvalidValueError, r"^normal: argument 'std'"),
    (lambda: dg.normal(dg.zeros(2), dg.ag_tensor([1.0, -1.0])), dg.InvalidValueError,
     r"^normal: argument 'std' holds a value below 0"),
    (lambda: dg.normal(0.0, 1.0), dg.InvalidValueError, r"^normal: argument 'size'"),
    (lambda: dg.normal(dg.zeros(2), 1.0, (2,)), dg.InvalidValueError,
     r"^normal: argument 'size'"),
    (lambda: dg.normal(dg.zeros(2), dg.ones(3)), dg.ShapeError, r"^normal"),
])
def test_bernoulli_and_normal_refuse_bad_input_before_a_draw(device, call, error, pattern):
    dg.manual_seed(4)
    before = dg.rand(3).numpy()
    dg.manual_seed(4)
    with pytest.raises(error, match=pattern):
        call()
    np.testing.assert_array_equal(dg.rand(3).numpy(), before)


def test_a_generator_of_its_own_repeats_and_leaves_manual_seeds_alone(device):
    # torch.Generator().manual_seed(42) as random_split, DataLoader and init take it
    g = dg.Generator()
    assert g.manual_seed(42) is g and g.initial_seed() == 42
    draws = [lambda: dg.rand(3, generator=g), lambda: dg.randn(2, 2, generator=g),
             lambda: dg.randint(0, 9, (4,), generator=g), lambda: dg.randperm(6, generator=g),
             lambda: dg.multinomial(dg.ones(5), 3, generator=g),
             lambda: dg.bernoulli(dg.full((8,), 0.5), generator=g),
             lambda: dg.normal(1.0, 2.0, (3,), generator=g),
             lambda: dg.nn.init.trunc_normal_(dg.ag_param(np.zeros(4)), generator=g),
             lambda: dg.nn.init.kaiming_uniform_(dg.ag_param(np.zeros((2, 3))), generator=g),
             lambda: dg.ag_param(np.zeros(3)).detach().normal_(0, 1, generator=g)]
    dg.manual_seed(7)
    first = [d().numpy() for d in draws]
    after = dg.rand(4).numpy()
    dg.manual_seed(7)
    g.manual_seed(42)
    for d, was in zip(draws, first):
        np.testing.assert_array_equal(d().numpy(), was)
    np.testing.assert_array_equal(dg.rand(4).numpy(), after)   # (its draws left alone)
    dg.manual_seed(7)
    np.testing.assert_array_equal(dg.rand(4).numpy(), after)
    state = g.get_state()
    x = dg.rand(5, generator=g).numpy()
    assert g.set_state(state) is g
    np.testing.assert_array_equal(dg.rand(5, generator=g).numpy(), x)
    data = dg.data.TensorDataset(np.arange(20.0))
    parts = [dg.data.random_split(data, [15, 5], generator=dg.Generator().manual_seed(3))
             for _ in range(2)]
    assert list(parts[0][1].indices) == list(parts[1][1].indices)
    orders = [np.concatenate([b.numpy() for (b,) in dg.data.DataLoader(
        data, batch_size=5, shuffle=True, generator=dg.Generator().manual_seed(4))])
        for _ in range(2)]
    np.testing.assert_array_equal(*orders)
    assert sorted(orders[0]) == list(range(20))


@pytest.mark.parametrize("call", [
    lambda: dg.rand(2, generator=3), lambda: dg.randperm(3, generator="g"),
    lambda: dg.data.random_split(dg.data.TensorDataset(np.zeros(4)), [2, 2], 5),
    lambda: dg.nn.init.normal_(dg.ag_param(np.zeros(2)), generator=np.random.default_rng())])
def test_a_generator_that_is_not_one_is_named(call):
    with pytest.raises(dg.ArgumentTypeError, match=r"argument 'generator'.*dg.Generator"):
        call()
