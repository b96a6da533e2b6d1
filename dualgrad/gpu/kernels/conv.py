"""Convolutions as products whose windows the fma kernel reads where they lie in the
images (matmul.glsl's WINDOWS): no unfolded copy of the images in device memory; the
twins of ``dualgrad/cpu/conv.py``. ``conv2d`` is the weight (o, c * kh * kw) times each
image's windows; ``conv2d_weight`` sums over images and windows, as one product whose K
runs over both, split across the GPU like any deep product; ``conv2d_input`` with stride 1
is ``conv2d`` of the gradient with the weight flipped (its windows read in place too),
else the weight's transpose times the gradient, summed back into the images (``fold``)."""
from __future__ import annotations

import functools

from ...errors import DeviceError
from ...shapes import contiguous_strides
from .. import plans
from ..dispatch import MAX_GROUPS, packed_uints, packer
from . import matmul, strided, unfold

_INT = 0xFFFFFFFF            # a negative padding as its 32-bit pattern (an int constant)
_WINDOWS_ID = 18             # windows.glsl's first specialization constant
_ADDRESSES4, _ADDRESSES5 = packer(4), packer(5)


def geometry(image: tuple, kernel, dilation, padding, stride, out_size) -> tuple:
    """The WINDOWS constants after the mode (IC .. PW) for images (c, h, w)."""
    return (*image, *kernel, *dilation, *stride, out_size[1], out_size[0] * out_size[1],
            padding[0] & _INT, padding[1] & _INT)


# A weight gradient's product has a short M and N and a K over every image's windows: its
# K is cut until about four workgroups an SM of an H200 run it, so no SM idles through the
# last wave (at the matmul planner's 128 workgroups, 1.1-1.2 times as long: 64 channels of
# 56 x 56, 128 of 28 x 28, 256 of 14 x 14; docs/performance.md).
WEIGHT_GROUPS = 512
MIN_WEIGHT_SLICE = 1024     # ... while each slice keeps this much of K (a slice's last
                            # workgroup adds every slice's partial product: 512 slices
                            # of a small layer made the examples' CNN step 1.5 times slower)


def window_plan(mode: int, m: int, n: int, k: int, batch: int, shared: int, threads: int,
                tensor_cores: bool = False) -> plans.MatmulPlan:
    """The fma tile for a convolution's product: the matmul planner's, but none whose rows
    would be mostly padding (a layer of 64 channels in a tile of 128 rows does twice the
    work); then K split until the grid fills the GPU (a weight gradient's, mode 2, until
    it has about WEIGHT_GROUPS workgroups)."""
    plan = plans.matmul_plan(m, n, k, batch, shared, threads)
    tile = plan.tile
    if not isinstance(tile, plans.Tile) or (tile.bm > max(m, 64) and m > 16):
        tile = plans.TILES["medium"]
    split = plan if tile is plan.tile else plans.split_k(tile, m, n, k, batch)
    if mode != 2:
        return split
    tiles = -(-m // tile.bm) * -(-n // tile.bn)
    more = min(WEIGHT_GROUPS // tiles, k // MIN_WEIGHT_SLICE)
    return split if more <= split.splits else plans.sliced(tile, k, more)


@functools.lru_cache(maxsize=1024)
def tensor_recipe(dims: tuple, shape: tuple, limits: tuple, pieces: int,
                  planner) -> matmul.MatmulRecipe | None:
    """conv2d on the tensor cores (matmul_bf16x6.comp with WINDOWS 1: B's pieces split from
    the windows as the tiles are loaded), where the device has them and the matmul planner
    would take them for a product of ``dims``; the weight's pieces from a split pass of its
    own. None where not."""
    m, n, k, batch = dims
    if not isinstance(planner(m, n, k, batch, *limits, pieces).tile, plans.TensorTile):
        return None
    # 64 x 64 tiles: each K step's windows are loaded and split by the product's own
    # threads, and the small tile's were the fastest (H200: 64 channels of 56 x 56, 0.92
    # of the fma kernel's time where 128 x 128 tiles took 1.27; 128 of 28 x 28, 1.01).
    t = plans.TENSOR_TILES["small"]
    if not t.fits(*limits[:2]):
        return None
    if pieces == 1:
        t = plans.one_piece(t, limits[0])
    transpose, a_uints, plane, _ = matmul.operand_split((m, k), False)
    split = matmul.SplitPass((transpose, 0, pieces), (*a_uints, 0, 0, 0, 0),
                             (a_uints[3], 1, 1), (pieces * plane // 2, 0),
                             packed_uints((*a_uints, 0, 0, 0, 0)))
    spec = (*t, t.threads, pieces) + (0,) * (_WINDOWS_ID - 7) + (1, *shape)
    uints = (m, n, k, k, 1, 0, 0, 0, shape[0] * shape[1] * shape[2], m * n, plane, 0, 0, 0)
    groups = (-(-n // t.bn), -(-m // t.bm), batch)
    return matmul.MatmulRecipe(t.shader, spec, uints, groups, None, split,
                               packed_uints(uints))


def _launch_tensor(dev, r: matmul.MatmulRecipe, weight, x, out) -> None:
    split = r.split
    pieces = dev.empty((split.floats[0],))
    dev.launch("split_bf16", split.spec,
               _ADDRESSES4.pack(weight.address, pieces.address, 0, 0) + split.tail,
               split.groups, [weight], [pieces])
    dev.launch(r.shader, r.spec,
               _ADDRESSES5.pack(weight.address, x.address, out.address, pieces.address, 0)
               + r.tail, r.groups, [weight, x, pieces], [out])


@functools.lru_cache(maxsize=1024)
def window_recipe(mode: int, dims: tuple, shape: tuple, limits: tuple,
                  round16: int) -> matmul.MatmulRecipe:
    """The fma kernel's dispatch of a WINDOWS ``mode`` product of ``dims`` (m, n, k,
    batch); ``shape``, the WINDOWS constants. Mode 1: A the weight (m x k, rows of k), B
    the windows of image z. Mode 2: A the windows of every image, B the gradient
    (images, n, windows), read by quads of one image where an image's windows are a
    multiple of 4."""
    m, n, k, batch = dims
    plan = window_plan(mode, m, n, k, batch, *limits)
    image = shape[0] * shape[1] * shape[2]
    if mode == 1:      # (the windows' quads are element loads whatever B_VEC says)
        return matmul.fma_recipe(plan, dims, (False, False), (k % 4 == 0, True),
                                 (k, 1, 0, 0, 0, image, m * n), round16=round16,
                                 windows=(1, *shape))
    return matmul.fma_recipe(plan, dims, (False, True), (True, shape[10] % 4 == 0),
                             (0, 0, 0, 0, 0, 0, m * n), round16=round16,
                             windows=(2, *shape))


def _fits(r: matmul.MatmulRecipe) -> bool:
    return max(r.groups) <= MAX_GROUPS


def conv2d(dev, x, weight, dilation, padding, stride, out_size, low=None):
    n_b, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    oh, ow = out_size
    out = dev.empty((n_b, o, oh, ow))
    if not out.size:
        return out
    kernel = (kh, kw)
    shape = geometry((c, h, w), kernel, dilation, padding, stride, out_size)
    dims = (o, oh * ow, c * kh * kw, n_b)
    round16 = matmul.ROUND16.get(low, 0)
    if low is None or low == matmul.BFLOAT16:
        r = tensor_recipe(dims, shape, dev.matmul_limits, 3 if low is None else 1,
                          plans.matmul_plan)
        if r is not None and _fits(r):
            _launch_tensor(dev, r, weight, x, out)
            return out
    r = window_recipe(1, dims, shape, dev.fma_limits, round16)
    if r.groups[0] > MAX_GROUPS or r.groups[1] > MAX_GROUPS:   # an image too big for a grid:
        for b in range(n_b):                                   # its windows unfolded
            cols = unfold.unfold(dev, matmul.band(x, b, 1), kernel, dilation, padding,
                                 stride, out_size, 0.0)
            matmul.matmul(dev, dev.reshape(weight, (o, dims[2])), cols,
                          out=matmul.band(out, b, 1, (1, o, dims[1])), low=low)
        return out
    images = n_b if _fits(r) else max(1, MAX_GROUPS // (r.groups[2] // n_b))
    for b in range(0, n_b, images):              # bands of images where the grid's z needs
        count = min(images, n_b - b)
        rb = r if count == n_b else window_recipe(1, dims[:3] + (count,), shape,
                                                  dev.fma_limits, round16)
        matmul.launch_fma(dev, rb, weight, matmul.band(x, b, count),
                          matmul.band(out, b, count))
    return out


def conv2d_weight(dev, x, g, kernel, dilation, padding, stride, low=None):
    n_b, c, h, w = x.shape
    _, o, oh, ow = g.shape
    kh, kw = kernel
    rows = c * kh * kw
    out = dev.empty((o, c, kh, kw))
    if not out.size:
        return out
    depth = n_b * oh * ow
    if depth == 0:
        dev.fill(out, 0.0)
        return out
    shape = geometry((c, h, w), kernel, dilation, padding, stride, (oh, ow))
    r = window_recipe(2, (rows, o, depth, 1), shape, dev.fma_limits,
                      matmul.ROUND16.get(low, 0))
    if not _fits(r):
        raise DeviceError(f"conv2d_weight: {rows} kernel elements of {o} channels are past "
                          f"the {MAX_GROUPS} workgroups a grid's side holds")
    product_t = dev.empty((rows, o))               # the gradient transposed, then turned
    matmul.launch_fma(dev, r, x, g, product_t)
    strided.permute_into(dev, product_t, (1, 0), dev.reshape(out, (o, rows)))
    return out


# The most column elements a strided convolution's input gradient makes at once (256 MiB):
# past it, a band of images at a time.
BAND_COLUMNS = 1 << 26


def conv2d_input(dev, g, weight, size, dilation, padding, stride, low=None):
    o, c, kh, kw = weight.shape
    n_b, _, oh, ow = g.shape
    if tuple(stride) == (1, 1):
        # input pixel y reads g at y - (d (k - 1) - p) + i d: the padding d (k - 1) - p
        # (negative where p is larger: the windows start inside g)
        flipped = strided.strided(dev, weight, (c, o, kh, kw),
                                  (kh * kw, c * kh * kw, -kw, -1), kh * kw - 1)
        flipped_padding = tuple(d * (k - 1) - p
                                for d, k, p in zip(dilation, (kh, kw), padding))
        return conv2d(dev, g, flipped, dilation, flipped_padding, (1, 1), size, low)
    length, rows = oh * ow, c * kh * kw
    w = dev.reshape(weight, (o, rows))
    args = ((kh, kw), dilation, padding, stride, (oh, ow))
    band = max(1, BAND_COLUMNS // max(1, rows * length))
    if band >= n_b:
        cols = matmul.matmul(dev, w, dev.reshape(g, (n_b, o, length)), True, False, low=low)
        return unfold.fold(dev, cols, size, *args)
    out = dev.empty((n_b, c) + tuple(size), g.dtype)
    for b in range(0, n_b, band):              # a band of images' columns at a time
        count = min(band, n_b - b)
        cols = matmul.matmul(dev, w, matmul.band(g, b, count, (count, o, length)), True,
                             False, low=low)
        piece = unfold.fold(dev, cols, size, *args)
        strided.strided_into(dev, piece, contiguous_strides(piece.shape), 0,
                             matmul.band(out, b, count))
    return out
