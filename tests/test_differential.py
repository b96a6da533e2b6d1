"""Every gpu kernel against its cpu twin, forward and backward, under the tolerance table.

The checks themselves live in dualgrad.testing.differential, so that ``dualgrad verify`` runs
the same suite on a user's device; here each runs for the hypothesis profile's number of
examples. The tests below it pin special values that a random draw may miss."""
import numpy as np
import pytest
from hypothesis import settings

from dualgrad.api import device
from dualgrad.testing import CHECKS, TOLERANCES, Pair, run_check
from dualgrad.testing.differential import ROUNDED_CHECKS, Rounded

pytestmark = pytest.mark.gpu


class GpuPair(Pair):
    """A Pair with an assert for the hand-written cases below."""

    def assert_agree(self, key, got, ref, **context):
        result = self.agree(key, got, ref, **context)
        assert result.ok, result
        return result

    def upload(self, a):
        return self.dut.upload(a)

    def download(self, h):
        return self.dut.download(h)

    def binary(self, *args, **kwargs):
        return self.dut.binary(*args, **kwargs)


@pytest.fixture
def gb(gpu):
    return GpuPair(device.active())


def f32(rng, *shape, lo=-3.0, hi=3.0):
    return np.asarray(rng.uniform(lo, hi, shape), dtype=np.float32)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_primitive_agrees_with_its_twin(gb, check):
    examples = settings.default.max_examples
    report = run_check(check, gb, examples=examples)
    assert report.ok, report.failure
    assert report.examples >= examples           # every example ran
    cases = [e.cases for e in report.entries.values()]
    # (a check that draws one of several ops per example shares the examples among them)
    assert cases and (sum(cases) >= examples if check.samples else min(cases) >= examples)


def test_a_rounded_pair_takes_and_gives_16_bit_values(gb):
    """As ops on 16-bit tensors run the primitives: inputs stored rounded, results rounded."""
    x = np.array([1.00390625, -2.0, 70000.0], np.float32)        # a tie, exact, past float16's
    ref, got = Rounded(gb, "bfloat16").twin("unary", "neg", x, 0.0, 0.0)
    assert np.array_equal(ref, [-1.0, 2.0, -70144.0]) and np.array_equal(got, ref)
    ref, got = Rounded(gb, "float16").twin("binary", "add", x, x)
    assert np.array_equal(ref, [2.0078125, -4.0, np.inf]) and np.array_equal(got, ref)
    assert not Rounded(gb, "bfloat16").agree("binary:add", np.array([1.0078125], np.float32),
                                             np.array([1.0], np.float32)).ok


def test_every_table_entry_is_checked():
    """Each tolerance-table entry is exercised by some check (so none is dead text)."""
    names = {c.name for c in CHECKS}
    for key in TOLERANCES:
        if "@" in key:             # the 16-bit variant, checked per family and type
            base, low = key.split("@")
            family = base.split(":")[0].replace("_backward", "")
            assert f"{family}@{low}" in names or (f"layers@{low}" in names and any(
                c.name.split(":")[0] == family for c in ROUNDED_CHECKS["layers"])), key
            continue
        family = key.split(":")[0].replace("_backward", "")
        op = key.split(":")[-1].replace("_backward", "")
        assert (key in names or f"{family}:{op}" in names or op in names
                or key.replace("_backward", "") in names or key in ("copy", "fill")), key


def test_unary_special_values(gb):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38],
                 np.float32)
    for op in ("neg", "abs", "relu", "exp", "tanh", "sigmoid"):
        cy, gy = gb.twin("unary", op, x)
        gb.assert_agree(f"unary:{op}", gy, cy, x=np.nan_to_num(x))
    cy, gy = gb.twin("unary", "clamp", x, -1.0, 1.0)
    gb.assert_agree("unary:clamp", gy, cy)


def test_binary_ties_and_nan(gb):
    x = np.array([1.0, 2.0, np.nan, 3.0, np.nan], np.float32)
    y = np.array([1.0, np.nan, 2.0, 3.0, np.nan], np.float32)
    g = np.array([1.0, 1.0, 1.0, 4.0, 1.0], np.float32)
    for op in ("maximum", "minimum"):
        cz, gz = gb.twin("binary", op, x, y)
        gb.assert_agree(f"binary:{op}", gz, cz)
        (cgx, cgy), (ggx, ggy) = gb.twin("binary_backward", op, x, y, g)
        gb.assert_agree(f"binary_backward:{op}", ggx, cgx)
        gb.assert_agree(f"binary_backward:{op}", ggy, cgy)


@pytest.mark.parametrize("shape,axes", [((4099,), (0,)), ((4096,), (0,)), ((64, 300), (1,)),
                                        ((300, 64), (0,)), ((6, 40, 5), (0, 2))], ids=str)
def test_max_of_nan_signed_zeros_and_infinities(gb, rng, shape, axes):
    """The two backends' max agree bit for bit whatever the layout (vec4 runs, strided runs,
    split runs): NaN (of either sign) wins, +0 beats -0, -inf only gives -inf."""
    x = rng.choice(np.array([0.0, -0.0, -np.inf, -1.0, 2.0], np.float32), shape)
    flat = x.reshape(-1)
    flat[: flat.size // 3] = -0.0                  # runs of -0 only, of -0 and +0 ...
    flat[flat.size // 3: flat.size // 2] = -np.inf  # ... of -inf only
    nans = rng.choice(flat.size, 3, replace=False)
    flat[nans] = np.nan
    flat.view(np.uint32)[nans[0]] = 0xFFC00000    # a NaN with its sign bit set
    cy, gy = gb.twin("reduce", "max", x, axes, False)
    assert np.array_equal(np.isnan(gy), np.isnan(cy))
    same = ~np.isnan(cy)
    assert np.array_equal(gy[same].view(np.uint32), cy[same].view(np.uint32))


@pytest.mark.parametrize("n", [3, 8], ids=["strided", "vec4"])
def test_the_max_of_signed_zeros_is_plus_zero_if_any_is(gb, n):
    x = np.full((4, n), -0.0, np.float32)
    x[0, n - 1] = 0.0                              # one +0 among -0
    x[2, 0] = 0.0
    x[3, :] = -np.inf
    x[3, 1] = -0.0                                 # -0 above -inf
    cy, gy = gb.twin("reduce", "max", x, (1,), False)
    want = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
    assert np.array_equal(cy.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(gy.view(np.uint32), want.view(np.uint32))


def test_a_negative_nan_alone_wins_the_max(gb):
    x = np.array([[1.0, 0.0, 2.0, 3.0], [-1.0, 0.0, -2.0, -3.0]], np.float32)
    x.view(np.uint32)[:, 1] = 0xFFC00000
    for axes in ((1,), (0, 1)):
        cy, gy = gb.twin("reduce", "max", x, axes, False)
        assert np.isnan(cy).all() and np.isnan(gy).all()


def test_binary_in_place(gb, rng):
    # out may alias the first operand (gradient accumulation, bias add)
    x, y = f32(rng, 6, 5), f32(rng, 5)
    h = gb.upload(x)
    gb.binary("add", h, gb.upload(y), out=h)
    np.testing.assert_array_equal(gb.download(h), x + y)


def test_matmul_sizes_on_gpu(gb):
    rng = np.random.default_rng(5)
    for m, k, n in [(1, 1, 1), (63, 1, 65), (17, 129, 3), (2, 300, 2), (100, 33, 100)]:
        a, b = f32(rng, m, k), f32(rng, k, n)
        cc, gc = gb.twin("matmul", a, b)
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        gb.assert_agree("matmul", gc, cc, scale=scale, length=k)


def test_rows_beyond_the_workgroup_count_limit(gb, rng):
    # 65535 workgroups is the most a dispatch may ask for; the rest loop (grid stride).
    x = f32(rng, 70000, 2)
    cy, gy = gb.twin("log_softmax", x)
    gb.assert_agree("log_softmax", gy, cy, x=x - x.max(axis=1, keepdims=True),
                 scale=np.abs(cy) + 1, length=2)


@pytest.mark.parametrize("n,p", [(1, 0.5), (4099, 0.1), (10000, 0.9), (5, 1.0)])
def test_dropout_same_mask(gb, rng, n, p):
    x = f32(rng, n)
    for seed, step in [(0, 0), (2 ** 40 + 7, 3), (2 ** 63 + 11, 2 ** 33 + 1)]:
        cy, gy = gb.twin("dropout", x, p, seed, step)
        gb.assert_agree("dropout", gy, cy)
        np.testing.assert_array_equal(gy == 0, cy == 0)


