"""Hypothesis strategies for differential tests: shapes, broadcasting pairs and float32 arrays
with the values kernels get wrong (signed zeros, subnormals, huge values, inf and NaN).

Use them in your own tests::

    from hypothesis import given
    from dualgrad.testing import strategies as dgst

    @given(dgst.arrays(dgst.shapes(), specials=dgst.FINITE_SPECIALS))
    def test_my_op(x): ...

Array values come from a seeded NumPy generator (so a 100 000-element array costs one draw,
not 100 000), with up to ``max_specials`` positions then overwritten by special values that
Hypothesis chooses and shrinks.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..shapes import MAX_RANK

F32 = np.float32
TINY = float(np.finfo(F32).tiny)                  # the smallest normal float32
MAX = float(np.finfo(F32).max)

# Special values by kind; ops choose the kinds their domain defines.
ZEROS = (0.0, -0.0)
SUBNORMALS = (1e-40, -1e-40, 1.4e-45, -1.4e-45)
TINIES = (TINY, -TINY)
LARGES = (1e30, -1e30, MAX, -MAX)
NONFINITE = (float("inf"), float("-inf"), float("nan"))
FINITE_SPECIALS = ZEROS + SUBNORMALS + TINIES + LARGES
ALL_SPECIALS = FINITE_SPECIALS + NONFINITE

# Sizes that catch off-by-one errors at workgroup (64, 256) and tile (64, 128) edges.
EDGE_SIZES = (63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 4095, 4097)


def sizes(max_size: int = 1 << 17) -> st.SearchStrategy:
    """Element counts: 0 and 1, small odd ones, workgroup edges, and large ones."""
    return st.one_of(st.sampled_from((0, 1)), st.integers(2, 40),
                     st.sampled_from([s for s in EDGE_SIZES if s <= max_size]),
                     st.integers(min(41, max_size), max_size))


def shapes(min_dims: int = 0, max_dims: int = MAX_RANK, max_side: int = 40,
           max_size: int = 1 << 16) -> st.SearchStrategy:
    """Shapes of ``min_dims``..``max_dims`` axes (0-d included), sides of 0 and 1 included,
    at most ``max_size`` elements; one axis may be a workgroup-edge length."""
    @st.composite
    def build(draw):
        dims = draw(st.integers(min_dims, max_dims))
        shape = list(draw(hnp.array_shapes(min_dims=dims, max_dims=dims, min_side=0,
                                           max_side=max_side))) if dims else []
        if dims and draw(st.booleans()):
            axis = draw(st.integers(0, dims - 1))
            shape[axis] = draw(st.sampled_from(EDGE_SIZES))
        while int(np.prod(shape, dtype=np.int64)) > max_size:
            shape[int(np.argmax(shape))] //= 2
        return tuple(shape)
    return build()


def broadcast_pairs(max_dims: int = MAX_RANK, max_side: int = 6) -> st.SearchStrategy:
    """Pairs of shapes that broadcast together: equal, 0-d against n-d, missing leading axes,
    and 1-sides on either operand, in every combination up to ``max_dims`` axes."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=max_dims,
                                             min_side=1, max_side=max_side).map(
        lambda b: tuple(b.input_shapes))


def arrays(shape, lo: float = -4.0, hi: float = 4.0, specials=(), max_specials: int = 8,
           dtype=F32) -> st.SearchStrategy:
    """float32 arrays of ``shape`` (a tuple or a strategy) with values in [lo, hi] — uniform,
    integral, or spread over many magnitudes — and up to ``max_specials`` elements replaced
    by values from ``specials`` (e.g. ``FINITE_SPECIALS``)."""
    shape_st = shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape))

    @st.composite
    def build(draw):
        shp = draw(shape_st)
        size = int(np.prod(shp, dtype=np.int64))
        seed = draw(st.integers(0, 2 ** 32 - 1))
        kind = draw(st.sampled_from(("uniform", "integers", "magnitudes")))
        values = _fill(np.random.default_rng(seed), kind, size, lo, hi)
        if specials and size:
            picks = draw(st.lists(st.tuples(st.integers(0, size - 1), st.sampled_from(specials)),
                                  max_size=max_specials))
            for i, v in picks:
                values[i] = v
        return values.astype(dtype).reshape(shp)
    return build()


def _fill(rng, kind: str, size: int, lo: float, hi: float) -> np.ndarray:
    if kind == "integers" and np.ceil(lo) <= np.floor(hi):
        return rng.integers(np.ceil(lo), np.floor(hi), size, endpoint=True).astype(np.float64)
    if kind == "magnitudes":
        # |x| log-uniform over the range's magnitudes, signs wherever the range allows
        top = max(abs(lo), abs(hi))
        bottom = max(min(abs(lo), abs(hi)) if lo * hi > 0 else top * 1e-6, 1e-30)
        mag = np.exp(rng.uniform(np.log(bottom), np.log(top), size))
        sign = rng.choice([-1.0, 1.0], size) if lo < 0 < hi else np.sign(hi or lo)
        return np.clip(sign * mag, lo, hi)
    return rng.uniform(lo, hi, size)


def index_arrays(shape, num_rows: int) -> st.SearchStrategy:
    """int64 arrays of ``shape`` (tuple or strategy) with values in [0, num_rows): class
    targets and embedding indices, repeats included."""
    shape_st = shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape))
    return shape_st.flatmap(lambda shp: st.integers(0, 2 ** 32 - 1).map(
        lambda seed: np.random.default_rng(seed).integers(0, num_rows, shp)))
