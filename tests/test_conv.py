"""Convolutions, poolings and their windows (``unfold``, ``fold``) against float64 NumPy
references written from PyTorch's definitions, on both backends; gradients in float64 by
finite differences; the layers (parameters, initialisation, padding modes); a captured
training step; bad arguments."""
import math

import numpy as np
import pytest

import dualgrad as dg
from dualgrad import nn
from conftest import train_step

RNG = np.random.default_rng(5)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- references ----------------------------------------------------------------------------

def conv2d_ref(x, w, b=None, stride=(1, 1), low=(0, 0), high=None, dilation=(1, 1),
               groups=1):
    high = low if high is None else high
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (low[0], high[0]),
                                           (low[1], high[1])))
    w = np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    og = o // groups
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                r, q = i * dilation[0], j * dilation[1]
                patch = x[:, g * cg:(g + 1) * cg, r:r + stride[0] * (oh - 1) + 1:stride[0],
                          q:q + stride[1] * (ow - 1) + 1:stride[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                       w[g * og:(g + 1) * og, :, i, j])
    return y if b is None else y + np.asarray(b, np.float64)[None, :, None, None]


def conv_transpose2d_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0),
                         groups=1, dilation=(1, 1)):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full = [(s - 1) * st + d * (k - 1) + e + 1 for s, st, d, k, e in
            zip((h, wd), stride, dilation, (kh, kw), output_padding)]
    y = np.zeros((n, og * groups, *full))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                r, q = i * dilation[0], j * dilation[1]
                y[:, g * og:(g + 1) * og, r:r + stride[0] * (h - 1) + 1:stride[0],
                  q:q + stride[1] * (wd - 1) + 1:stride[1]] += np.einsum(
                      "nchw,co->nohw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
    y = y[:, :, padding[0]:full[0] - padding[0], padding[1]:full[1] - padding[1]]
    return y if b is None else y + np.asarray(b, np.float64)[None, :, None, None]


def window_starts(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    count = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (count - 1) * s >= size + p:
        count -= 1
    return [o * s - p for o in range(count)]


def pool_ref(x, kernel, stride, padding, dilation=(1, 1), ceil_mode=False, kind="max",
             count_include_pad=True):
    """(values, flat indices of the maxima) of PyTorch's max or avg pooling, looping."""
    n, c, h, wd = x.shape
    rows = window_starts(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    cols = window_starts(wd, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    y = np.zeros((n, c, len(rows), len(cols)))
    where = np.zeros(y.shape, np.int64)
    for a, r in enumerate(rows):
        for b, q in enumerate(cols):
            ys = [r + i * dilation[0] for i in range(kernel[0])]
            xs = [q + j * dilation[1] for j in range(kernel[1])]
            inside = [(yy, xx) for yy in ys for xx in xs if 0 <= yy < h and 0 <= xx < wd]
            vals = np.stack([x[:, :, yy, xx] for yy, xx in inside], -1).astype(np.float64)
            if kind == "max":
                k = np.argmax(vals, -1)
                y[:, :, a, b] = np.take_along_axis(vals, k[..., None], -1)[..., 0]
                flat = np.array([yy * wd + xx for yy, xx in inside])
                where[:, :, a, b] = flat[k]
            else:
                hend = min(r + kernel[0], h + padding[0])
                wend = min(q + kernel[1], wd + padding[1])
                divisor = ((hend - r) * (wend - q) if count_include_pad else len(inside))
                y[:, :, a, b] = vals.sum(-1) / divisor
    return y, where


def adaptive_ref(x, out):
    n, c, h, wd = x.shape
    y = np.zeros((n, c) + out)
    for a in range(out[0]):
        r0, r1 = a * h // out[0], -(-(a + 1) * h // out[0])
        for b in range(out[1]):
            q0, q1 = b * wd // out[1], -(-(b + 1) * wd // out[1])
            y[:, :, a, b] = x[:, :, r0:r1, q0:q1].astype(np.float64).mean((2, 3))
    return y


def close(got, want, scale=1.0):
    got = got.numpy() if isinstance(got, dg.Tensor) else got
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale)


# -- forward against the references -----------------------------------------------------------

X = normal(2, 6, 9, 11)

CONV2D = [  # (weight shape, keyword arguments, (low, high) padding of the reference)
    ((4, 6, 3, 3), {}, ((0, 0), (0, 0))),
    ((4, 6, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2)), ((1, 2), (1, 2))),
    ((4, 6, 2, 4), dict(padding="same"), ((0, 1), (1, 2))),
    ((4, 6, 3, 3), dict(padding="same", dilation=2), ((2, 2), (2, 2))),
    ((4, 6, 3, 3), dict(padding="valid", stride=3), ((0, 0), (0, 0))),
    ((6, 2, 3, 3), dict(groups=3, padding=1), ((1, 1), (1, 1))),
    ((12, 1, 3, 3), dict(groups=6, padding=1, stride=2), ((1, 1), (1, 1))),   # depthwise x2
    ((5, 6, 9, 11), {}, ((0, 0), (0, 0))),              # the kernel as large as the image
]


@pytest.mark.parametrize("shape, kwargs, pads", CONV2D)
def test_conv2d_matches_the_reference(device, shape, kwargs, pads):
    w, b = normal(*shape), normal(shape[0])
    y = dg.conv2d(dg.ag_tensor(X), dg.ag_tensor(w), dg.ag_tensor(b), **kwargs)
    want = conv2d_ref(X, w, b, kwargs.get("stride", (1, 1)) if not isinstance(
        kwargs.get("stride"), int) else (kwargs["stride"],) * 2, pads[0], pads[1],
        (kwargs.get("dilation", 1),) * 2 if isinstance(kwargs.get("dilation", 1), int)
        else kwargs["dilation"], kwargs.get("groups", 1))
    close(y, want, math.sqrt(np.prod(shape[1:])))


def test_an_empty_batch_gives_zero_weight_gradients(device):
    w = dg.ag_param(normal(4, 3, 3, 3))
    x = dg.ag_tensor(np.zeros((0, 3, 5, 5), np.float32))
    with dg.with_grad_tape():
        y = dg.conv2d(x, w, padding=1)
        dg.sum(y).backward()
    assert y.shape == (0, 4, 5, 5)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((4, 3, 3, 3), np.float32))


def test_conv1d_is_conv2d_of_one_row(device):
    x, w, b = normal(3, 4, 20), normal(6, 2, 4), normal(6)
    y = dg.conv1d(dg.ag_tensor(x), dg.ag_tensor(w), dg.ag_tensor(b), stride=2, padding=3,
                  dilation=2, groups=2)
    want = conv2d_ref(x[:, :, None], w[:, :, None], b, (1, 2), (0, 3), None, (1, 2), 2)
    close(y, want[:, :, 0], 4)
    same = dg.conv1d(dg.ag_tensor(x), dg.ag_tensor(w), padding="same", groups=2)
    close(same, conv2d_ref(x[:, :, None], w[:, :, None], None, (1, 1), (0, 1), (0, 2),
                           (1, 1), 2)[:, :, 0], 4)
    # an input without a batch axis gives an output without one
    close(dg.conv1d(dg.ag_tensor(x[0]), dg.ag_tensor(w), groups=2),
          conv2d_ref(x[:1, :, None], w[:, :, None], groups=2)[0, :, 0], 4)


@pytest.mark.parametrize("kwargs", [
    {}, dict(stride=2, padding=1, output_padding=1), dict(stride=(1, 3), padding=(2, 0),
                                                          dilation=2, output_padding=(0, 1)),
    dict(groups=3, stride=2), dict(groups=6, padding=1)])
def test_conv_transpose2d_matches_the_reference(device, kwargs):
    groups = kwargs.get("groups", 1)
    w, b = normal(6, 2, 3, 4), normal(2 * groups)
    y = dg.conv_transpose2d(dg.ag_tensor(X), dg.ag_tensor(w), dg.ag_tensor(b), **kwargs)
    pair = (lambda v: (v, v) if isinstance(v, int) else v)
    want = conv_transpose2d_ref(X, w, b, pair(kwargs.get("stride", 1)),
                                pair(kwargs.get("padding", 0)),
                                pair(kwargs.get("output_padding", 0)), groups,
                                pair(kwargs.get("dilation", 1)))
    close(y, want, 6)


def test_conv_transpose2d_is_the_gradient_of_conv2d(device):
    # <conv2d(x, w), g> = <x, conv_transpose2d(g, w)> for the same stride and padding
    x, w = normal(2, 3, 10, 9), normal(4, 3, 3, 3)
    y = dg.conv2d(dg.ag_tensor(x), dg.ag_tensor(w), stride=2, padding=1)
    g = normal(*y.shape)
    back = dg.conv_transpose2d(dg.ag_tensor(g), dg.ag_tensor(w), stride=2, padding=1,
                               output_padding=(1, 0))
    assert back.shape == x.shape
    np.testing.assert_allclose(np.sum(y.numpy() * g), np.sum(back.numpy() * x), rtol=1e-4)


POOLS = [  # (kernel, stride, padding, dilation, ceil_mode)
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 2), (1, 2), (1, 1), (2, 1), False),
    ((3, 3), (2, 2), (1, 0), (1, 1), True),
    ((2, 3), (3, 2), (0, 1), (1, 1), True),
]


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", POOLS)
def test_max_pool2d_values_and_indices(device, kernel, stride, padding, dilation, ceil_mode):
    y, where = dg.max_pool2d(dg.ag_tensor(X), kernel, stride, padding, dilation, ceil_mode,
                             return_indices=True)
    want, want_where = pool_ref(X, kernel, stride, padding, dilation, ceil_mode)
    assert y.numpy().dtype == np.float32 and where.dtype == np.int32
    np.testing.assert_array_equal(y.numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(where.numpy(), want_where)


def test_max_pool2d_takes_the_last_nan_and_the_first_of_ties(device):
    x = np.array([[[[np.nan, 1, -0.0, 0.0], [np.nan, 2, -1, -np.inf]]]], np.float32)
    y, where = dg.max_pool2d(dg.ag_tensor(x), 2, return_indices=True)
    assert np.isnan(y.numpy()[0, 0, 0, 0]) and where.numpy()[0, 0, 0, 0] == 4
    assert np.signbit(y.numpy()[0, 0, 0, 1]) and where.numpy()[0, 0, 0, 1] == 2
    # windows of -inf: the first element in bounds, never the padding
    _, where = dg.max_pool2d(dg.ag_tensor(np.full((1, 1, 2, 2), -np.inf, np.float32)), 2,
                             padding=1, return_indices=True)
    np.testing.assert_array_equal(where.numpy()[0, 0], [[0, 1], [2, 3]])


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", POOLS)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_divisors(device, kernel, stride, padding, dilation, ceil_mode,
                             count_include_pad):
    if dilation != (1, 1):
        return
    y = dg.avg_pool2d(dg.ag_tensor(X), kernel, stride, padding, ceil_mode, count_include_pad)
    want, _ = pool_ref(X, kernel, stride, padding, ceil_mode=ceil_mode, kind="avg",
                       count_include_pad=count_include_pad)
    close(y, want)


def test_avg_pool2d_divisor_override_and_default_stride(device):
    y = dg.avg_pool2d(dg.ag_tensor(X), 2, divisor_override=3)
    want, _ = pool_ref(X, (2, 2), (2, 2), (0, 0), kind="avg")
    close(y, want * 4 / 3)


@pytest.mark.parametrize("out", [(1, 1), (3, 11), (4, 5), (9, 2), (2, 7)])
def test_adaptive_avg_pool2d_windows(device, out):
    close(dg.adaptive_avg_pool2d(dg.ag_tensor(X), out), adaptive_ref(X, out))
    assert dg.adaptive_avg_pool2d(dg.ag_tensor(X), (None, 4)).shape == (2, 6, 9, 4)
    assert dg.adaptive_avg_pool2d(dg.ag_tensor(X[0]), 2).shape == (6, 2, 2)


def test_unfold_and_fold_match_their_definitions(device):
    cols = dg.unfold(dg.ag_tensor(X), (2, 3), dilation=(2, 1), padding=1, stride=(3, 2))
    xp = np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = (11 - 2 - 1) // 3 + 1, (13 - 3) // 2 + 1
    want = np.stack([xp[:, :, 2 * i:2 * i + 3 * (oh - 1) + 1:3, j:j + 2 * (ow - 1) + 1:2]
                     for i in range(2) for j in range(3)], 2).reshape(2, 6 * 6, oh * ow)
    np.testing.assert_array_equal(cols.numpy(), want)
    # fold sums each pixel's window elements: of ones, how many windows read the pixel
    counts = dg.fold(dg.ones(1, 4, 12), (4, 5), 2, stride=1).numpy()
    np.testing.assert_array_equal(counts[0, 0], np.outer([1, 2, 2, 1], [1, 2, 2, 2, 1]))


WINDOWS = [  # (kernel, dilation, padding, stride): paddings below 0 start inside the image
    (kernel, dilation, padding, stride)
    for kernel in ((1, 2), (3, 3)) for dilation in ((1, 1), (2, 3))
    for padding in ((0, 0), (2, 1), (-1, -2)) for stride in ((1, 1), (2, 3))]


@pytest.mark.parametrize("kernel, dilation, padding, stride", WINDOWS)
def test_cpu_windows_match_their_definition(kernel, dilation, padding, stride):
    """The cpu's unfold (a padded copy of each plane, then rows copied without tests), in
    both layouts, and max-pool indices against the definition, element by element: window (oy, ox) element
    (i, j) reads x[o * stride - padding + i * dilation] on each axis, ``value`` outside."""
    from dualgrad.cpu import unfold as cpu_unfold
    x = normal(2, 3, 9, 11)
    size = [(n + 2 * max(p, 0) - d * (k - 1) - 1 - 2 * max(-p, 0)) // s + 1
            for n, k, d, p, s in zip(x.shape[2:], kernel, dilation, padding, stride)]
    want = np.full((2, 3, kernel[0], kernel[1], size[0], size[1]), -7.0, np.float32)
    best = np.full((2, 3, size[0], size[1]), -1)
    for oy, ox, i, j in np.ndindex(size[0], size[1], *kernel):
        y = oy * stride[0] - padding[0] + i * dilation[0]
        q = ox * stride[1] - padding[1] + j * dilation[1]
        if 0 <= y < 9 and 0 <= q < 11:
            want[:, :, i, j, oy, ox] = x[:, :, y, q]
            at = best[:, :, oy, ox]
            old = np.take_along_axis(x.reshape(2, 3, -1), np.maximum(at, 0)[..., None],
                                     2)[..., 0]
            take = (at < 0) | (x[:, :, y, q] > old)
            best[:, :, oy, ox] = np.where(take, y * 11 + q, at)
    got = cpu_unfold.unfold(x, kernel, dilation, padding, stride, size, -7.0)
    np.testing.assert_array_equal(got, want.reshape(got.shape))
    # a band's layout: the images' columns side by side, zeros outside
    band = cpu_unfold.unfold_band(x, kernel, dilation, padding, stride, size,
                                  np.full(got.size + 5, np.nan, np.float32))
    zeros = np.where(want == -7.0, 0.0, want).reshape(got.shape)
    np.testing.assert_array_equal(band, zeros.transpose(1, 0, 2).reshape(band.shape))
    np.testing.assert_array_equal(
        cpu_unfold.max_pool(x, kernel, dilation, padding, stride, size),
        best.reshape(2, 3, -1))


@pytest.mark.parametrize("kernel, dilation, stride", [
    ((2, 2), (1, 1), (2, 2)), ((3, 2), (2, 1), (1, 3)), ((1, 1), (1, 1), (1, 1)),
    ((2, 2), (1, 1), (1, 1)), ((2, 2), (2, 1), (2, 2))])
@pytest.mark.parametrize("shape", [(5, 17, 12, 14), (3, 4, 13, 9)])
def test_cpu_max_pool_of_inner_windows_matches_the_general_kernel(kernel, dilation, stride,
                                                                 shape):
    """Windows wholly inside (no padding) take the kernel that compares many windows' rows
    at once, in groups of planes, or (2 x 2 of stride 2) the one that compares a window's
    pairs; the indices are those of the window-by-window kernel, NaNs (the last taken),
    ties (the first) and -inf included, across groups' edges and odd sizes."""
    from dualgrad.cpu import unfold as cpu_unfold
    x = RNG.integers(-3, 4, shape).astype(np.float32)
    x[RNG.random(x.shape) < 0.05] = np.nan
    x[RNG.random(x.shape) < 0.05] = -np.inf
    size = [(n - d * (k - 1) - 1) // s + 1
            for n, k, d, s in zip(x.shape[2:], kernel, dilation, stride)]
    want = np.empty(x.shape[:2] + (size[0] * size[1],), np.int32)
    cpu_unfold._max_pool(x, want, *kernel, *dilation, 0, 0, *stride, *size)
    np.testing.assert_array_equal(
        cpu_unfold.max_pool(x, kernel, dilation, (0, 0), stride, size), want)


# -- gradients -------------------------------------------------------------------------------

def distinct(*shape):
    """Values at least 0.05 apart, so no max ties within a finite-difference step."""
    return (RNG.permutation(int(np.prod(shape))) * 0.05 - 1).reshape(shape)


GRADCHECKS = [
    ("conv2d", lambda x, w, b: dg.conv2d(x, w, b, stride=(2, 1), padding=(1, 2),
                                         dilation=(1, 2)),
     [(2, 4, 6, 7), (3, 4, 2, 3), (3,)]),
    ("conv2d groups same", lambda x, w: dg.conv2d(x, w, padding="same", groups=2),
     [(1, 4, 5, 5), (4, 2, 2, 3)]),
    ("conv2d stride 1", lambda x, w: dg.conv2d(x, w, padding=(3, 1), dilation=(1, 2)),
     [(2, 3, 5, 6), (4, 3, 2, 3)]),      # (padding past the kernel: rows' windows inside g)
    ("conv2d same", lambda x, w, b: dg.conv2d(x, w, b, padding="same", dilation=2),
     [(1, 2, 6, 5), (3, 2, 2, 3), (3,)]),
    ("conv1d", lambda x, w, b: dg.conv1d(x, w, b, stride=2, padding=1, groups=3),
     [(2, 3, 9), (6, 1, 3), (6,)]),
    ("conv_transpose2d", lambda x, w, b: dg.conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=(1, 2)),
     [(2, 4, 3, 4), (4, 3, 2, 3), (6,)]),
    ("avg_pool2d", lambda x: dg.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                           count_include_pad=False), [(2, 3, 7, 6)]),
    ("adaptive_avg_pool2d", lambda x: dg.adaptive_avg_pool2d(x, (3, 4)), [(2, 2, 7, 6)]),
    ("unfold", lambda x: dg.unfold(x, (2, 3), 2, 1, (1, 2)), [(2, 2, 5, 6)]),
    ("fold", lambda c: dg.fold(c, (5, 6), (2, 3), 1, 1, 2), [(2, 12, 9)]),
]


@pytest.mark.parametrize("name, fn, shapes", GRADCHECKS, ids=[c[0] for c in GRADCHECKS])
def test_gradients_by_finite_differences(name, fn, shapes):
    assert dg.gradcheck(fn, tuple(RNG.standard_normal(s) for s in shapes))


def test_max_pool2d_gradient_goes_to_the_first_maximum_alone(device):
    assert dg.gradcheck(lambda x: dg.max_pool2d(x, 3, 2, 1, dilation=(1, 2)),
                        (distinct(2, 2, 7, 8),))
    x = dg.ag_tensor(np.ones((1, 1, 2, 4), np.float32), requires_grad=True)   # all tied
    with dg.with_grad_tape():
        dg.sum(dg.max_pool2d(x, 2)).backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1, 0, 1, 0], [0, 0, 0, 0]])


def on_both_backends(arrays, loss_of) -> None:
    """``loss_of(*tensors)`` made and differentiated on the cpu and the gpu backends: the
    values it returns and the tensors' gradients agree."""
    results = []
    for backend in ("cpu", "gpu"):
        dg.ag_device(backend)
        ts = [dg.ag_tensor(a, requires_grad=True) for a in arrays]
        with dg.with_grad_tape():
            values = loss_of(*ts)
            values[0].backward()
        results.append([v.numpy() for v in values] + [t.grad.numpy() for t in ts])
    for c, g in zip(*results):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4 * np.abs(c).max())


@pytest.mark.gpu
def test_gradients_on_the_gpu_match_the_cpu(gpu):
    def loss_of(x, w, b):
        y = dg.conv2d(x, w, b, padding=1, groups=2)
        y = dg.max_pool2d(dg.relu(y), 2, ceil_mode=True)
        y = dg.conv_transpose2d(y, w[:, :2], stride=2)
        return (dg.sum(dg.adaptive_avg_pool2d(y, (3, 5)) ** 2),)
    on_both_backends((normal(2, 4, 8, 9), normal(6, 2, 3, 3), normal(6)), loss_of)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", [dict(padding=1), dict(padding=(3, 0), dilation=(1, 2)),
                                    dict(stride=2, padding="valid"),
                                    dict(stride=(1, 3), padding=2, dilation=2)])
def test_one_group_convolution_gradients_on_the_gpu_match_the_cpu(gpu, kwargs):
    """conv2d and its gradients (the windows read in place; the input's gradient a
    convolution of g with the flipped weight where the stride is 1, else through fold)."""
    def loss_of(x, w, b):
        y = dg.conv2d(x, w, b, **kwargs)
        return dg.sum(y * y), y
    on_both_backends((normal(3, 5, 11, 10), normal(7, 5, 3, 2), normal(7)), loss_of)


@pytest.mark.gpu
@pytest.mark.parametrize("x_shape, w_shape", [((70000, 2, 2, 3), (3, 2, 2, 2)),
                                              ((1, 1, 2100, 2100), (2, 1, 1, 1))])
def test_convolutions_past_a_grids_workgroups(gpu, x_shape, w_shape):
    """More images than a grid holds workgroups (the images in bands of dispatches), and
    more windows than a grid's row of tiles (that image's windows unfolded): as the cpu."""
    x, w = normal(*x_shape), normal(*w_shape)
    results = []
    for backend in ("cpu", "gpu"):
        dg.ag_device(backend)
        results.append(dg.conv2d(dg.ag_tensor(x), dg.ag_tensor(w)).numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel, dilation, padding, stride", [
    ((3, 3), (1, 1), (1, 1), (1, 1)), ((1, 2), (2, 3), (2, 1), (2, 3)),
    ((3, 2), (1, 2), (0, 3), (3, 1))])
@pytest.mark.parametrize("band_elements", [None, 1])
@pytest.mark.parametrize("c, o", [(3, 7), (7, 3)])
def test_cpu_input_gradient_matches_its_definition(monkeypatch, kernel, dilation, padding,
                                                   stride, band_elements, c, o):
    """The cpu's conv2d_input (the weight's transpose times a band's gradients, folded into
    the images; with stride 1 and fewer outputs than inputs, the convolution of g with the
    weight flipped) against the float64 sum of each pixel's terms, within gamma(O kh kw)
    of their magnitudes; in one band and an image a band."""
    from dualgrad.cpu import conv as cpu_conv
    from dualgrad.cpu import unfold as cpu_unfold
    if band_elements is not None:
        monkeypatch.setattr(cpu_conv, "BAND_ELEMENTS", band_elements)
    b, size = 5, (9, 11)
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, k, d, p, s in zip(size, kernel, dilation, padding, stride))
    w, g = normal(o, c, *kernel), normal(b, o, *out)
    got = cpu_conv.conv2d_input(g, w, size, dilation, padding, stride)

    def folded(w, g):
        cols = np.einsum("or,bol->brl", w.reshape(o, -1).astype(np.float64),
                         g.reshape(b, o, -1).astype(np.float64))
        return cpu_unfold.fold(cols, size, kernel, dilation, padding, stride, out)
    terms = o * kernel[0] * kernel[1]
    bound = terms * 2.0 ** -24 / (1 - terms * 2.0 ** -24) * folded(np.abs(w), np.abs(g))
    assert got.shape == (b, c) + size and got.dtype == np.float32
    assert np.all(np.abs(got - folded(w, g)) <= bound)


@pytest.mark.gpu
@pytest.mark.parametrize("band", [1, 2, 3])
def test_a_strided_input_gradient_on_the_gpu_in_bands_of_images(gpu, monkeypatch, band):
    """Past BAND_COLUMNS column elements the gpu makes a strided convolution's input
    gradient a band of images at a time: the same values as all at once."""
    from dualgrad.gpu.kernels import conv as gpu_conv
    x, w = normal(5, 3, 9, 8), normal(4, 3, 3, 2)
    folds = []
    fold = gpu_conv.unfold.fold
    monkeypatch.setattr(gpu_conv.unfold, "fold", lambda *a: folds.append(1) or fold(*a))
    grads = []
    for limit in (gpu_conv.BAND_COLUMNS, band * (3 * 3 * 2) * (5 * 4)):  # (images' columns)
        monkeypatch.setattr(gpu_conv, "BAND_COLUMNS", limit)
        t = dg.ag_tensor(x, requires_grad=True)
        with dg.with_grad_tape():
            y = dg.conv2d(t, dg.ag_tensor(w), stride=2, padding=1, dilation=(1, 2))
            dg.sum(y * y).backward()
        grads.append(t.grad.numpy())
    assert len(folds) == 1 + -(-5 // band)
    np.testing.assert_array_equal(grads[1], grads[0])


@pytest.mark.gpu
def test_a_convolution_makes_no_copy_of_its_windows(gpu):
    """conv2d's forward and backward on the gpu hold the images, the weight, the output
    and the gradients: less than the windows unfolded (nine times the input here). (The
    second step is measured: the first makes the gradients' storage and the workspace.)"""
    x = dg.ag_tensor(normal(8, 16, 48, 48), requires_grad=True)
    w = dg.ag_param(normal(16, 16, 3, 3))
    unfolded = 8 * 16 * 9 * 48 * 48 * 4
    for _ in range(2):
        dg.reset_peak_memory_stats()
        base = dg.tape_mem()["peak_bytes"]
        with dg.with_grad_tape():
            dg.sum(dg.conv2d(x, w, padding=1)).backward()
    assert x.grad is not None and w.grad is not None
    assert dg.tape_mem()["peak_bytes"] - base < unfolded / 4


# -- layers ------------------------------------------------------------------------------------

def test_layers_have_pytorchs_parameters_and_initial_bounds():
    dg.manual_seed(0)
    conv = nn.Conv2d(6, 8, (3, 5), groups=2)
    assert [(k, v.shape) for k, v in conv.state_dict().items()] == \
        [("weight", (8, 3, 3, 5)), ("bias", (8,))]
    bound = 1 / math.sqrt(3 * 15)
    assert 0.9 * bound < np.abs(conv.weight.numpy()).max() <= bound
    tconv = nn.ConvTranspose2d(4, 6, 3, groups=2, bias=False)
    assert tconv.weight.shape == (4, 3, 3, 3) and tconv.bias is None
    assert np.abs(tconv.weight.numpy()).max() <= 1 / math.sqrt(3 * 9)
    assert nn.Conv1d(2, 4, 5).weight.shape == (4, 2, 5)
    assert repr(conv) == "Conv2d(6, 8, kernel_size=(3, 5), stride=(1, 1), groups=2)"


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_padding_modes_pad_before_convolving(device, mode):
    dg.manual_seed(1)
    layer = nn.Conv2d(6, 4, 3, padding=(2, 1), padding_mode=mode)
    want_pad = {"zeros": "constant", "reflect": "reflect", "replicate": "edge",
                "circular": "wrap"}[mode]
    xp = np.pad(X, ((0, 0), (0, 0), (2, 2), (1, 1)), mode=want_pad)
    close(layer(dg.ag_tensor(X)), conv2d_ref(xp, layer.weight.numpy(), layer.bias.numpy()), 6)
    same = nn.Conv1d(6, 2, 4, padding="same", padding_mode=mode)
    xs = np.pad(X[:, :, 0], ((0, 0), (0, 0), (1, 2)), mode=want_pad)
    close(same(dg.ag_tensor(X[:, :, 0])),
          conv2d_ref(xs[:, :, None], same.weight.numpy()[:, :, None],
                     same.bias.numpy())[:, :, 0], 6)


def test_containers_register_their_modules():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)]).append(nn.Identity())
    heads = nn.ModuleDict({"a": nn.Linear(2, 3)})
    heads["b"] = nn.Flatten()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers, self.heads = layers, heads

    model = Model()
    assert list(model.state_dict()) == ["layers.0.weight", "layers.0.bias", "layers.1.weight",
                                        "layers.1.bias", "heads.a.weight", "heads.a.bias"]
    assert len(layers) == 3 and layers[-1] is layers[2] and len(layers[1:]) == 2
    assert list(heads) == ["a", "b"] and "b" in heads and isinstance(heads["b"], nn.Flatten)
    visited = []
    model.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Linear", "Linear", "Identity", "ModuleList", "Linear", "Flatten",
                       "ModuleDict", "Model"]
    assert nn.Flatten()(dg.ag_tensor(X)).shape == (2, 6 * 9 * 11)
    with pytest.raises(dg.ArgumentTypeError, match="ModuleList"):
        layers.append("relu")
    with pytest.raises(dg.InvalidValueError, match="ModuleDict"):
        heads["a.b"] = nn.Identity()


def cnn():
    dg.manual_seed(3)
    model = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.Conv2d(4, 4, 3, padding="same", groups=2), nn.AvgPool2d(2, 1, 1),
        nn.AdaptiveAvgPool2d((3, 2)), nn.Flatten(), nn.Linear(24, 3))
    return model, dg.optimizer_adam(model.parameters(), lr=1e-2)


def batch(k):
    r = np.random.default_rng(k)
    return r.standard_normal((4, 2, 9, 7)).astype(np.float32), r.integers(0, 3, 4)


def test_a_cnn_trains(device):
    model, opt = cnn()
    x, y = batch(0)
    losses = [train_step(model, opt, x, y).item() for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.gpu
def test_a_captured_cnn_step_replays_as_eager_steps(gpu):
    model, opt = cnn()
    model2, opt2 = cnn()
    step = dg.capture_step(lambda x, y: train_step(model2, opt2, x, y))
    for k in range(5):
        x, y = batch(k)
        assert step(x, y).item() == train_step(model, opt, x, y).item(), k
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert step.replays >= 1 and step.reason == ""


# -- bad arguments -------------------------------------------------------------------------------

W = normal(4, 6, 3, 3)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda x: dg.conv2d(x, normal(4, 5, 3, 3)), dg.ShapeError, r"^conv2d: argument 'weight'"),
    (lambda x: dg.conv2d(x, W, groups=4), dg.ShapeError, r"^conv2d: argument 'weight'"),
    (lambda x: dg.conv2d(x, W, groups=0), dg.InvalidValueError, r"^conv2d: argument 'groups'"),
    (lambda x: dg.conv2d(x, W, normal(3)), dg.ShapeError, r"^conv2d: argument 'bias'"),
    (lambda x: dg.conv2d(x, W, stride=0), dg.InvalidValueError, r"^conv2d: argument 'stride'"),
    (lambda x: dg.conv2d(x, W, padding=(1, 2, 3)), dg.ArgumentTypeError,
     r"^conv2d: argument 'padding'"),
    (lambda x: dg.conv2d(x, W, padding="full"), dg.InvalidValueError,
     r"^conv2d: argument 'padding'"),
    (lambda x: dg.conv2d(x, W, padding="same", stride=2), dg.InvalidValueError,
     r"^conv2d: padding='same' needs stride 1"),
    (lambda x: dg.conv2d(x, normal(4, 6, 12, 3)), dg.ShapeError, r"^conv2d: .*no window fits"),
    (lambda x: dg.conv2d(x[0, 0], W), dg.ShapeError, r"^conv2d: argument 'input'"),
    (lambda x: dg.conv1d(x, W), dg.ShapeError, r"^conv1d: argument 'input'"),
    (lambda x: dg.conv_transpose2d(x, normal(5, 2, 3, 3)), dg.ShapeError,
     r"^conv_transpose2d: argument 'weight'"),
    (lambda x: dg.conv_transpose2d(x, normal(6, 2, 3, 3), stride=2, output_padding=2),
     dg.InvalidValueError, r"^conv_transpose2d: argument 'output_padding'"),
    (lambda x: dg.max_pool2d(x, 2, padding=2), dg.InvalidValueError,
     r"^max_pool2d: argument 'padding'"),
    (lambda x: dg.max_pool2d(x, 0), dg.InvalidValueError, r"^max_pool2d: argument 'kernel_size'"),
    (lambda x: dg.avg_pool2d(x, 2, divisor_override=0), dg.InvalidValueError,
     r"^avg_pool2d: argument 'divisor_override'"),
    (lambda x: dg.adaptive_avg_pool2d(x, (1, 2, 3)), dg.InvalidValueError,
     r"^adaptive_avg_pool2d: argument 'output_size'"),
    (lambda x: dg.fold(dg.reshape(x, (2, 6, 99)), (9, 11), 2), dg.ShapeError,
     r"^fold: argument 'input'"),
    (lambda x: nn.Conv2d(6, 4, 3, padding_mode="mirror"), dg.InvalidValueError,
     r"^Conv2d: argument 'padding_mode'"),
    (lambda x: nn.Conv2d(6, 4, 3, groups=4), dg.InvalidValueError,
     r"^Conv2d: argument 'in_channels'"),
])
def test_bad_arguments_name_themselves(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(X))
