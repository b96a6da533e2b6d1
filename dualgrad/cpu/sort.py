"""Sorting the rows of a (rows, n) array: the twin of ``shaders/sort.comp``. Each value
becomes an unsigned key in the values' order (-0 as +0, every NaN past +inf, complemented
for a descending sort), and a stable sort of the keys keeps ties in index order: the one
answer the device's bitonic sort of (key, index) pairs also gives. 32-bit keys are sorted
by a radix sort (four stable passes of a byte each, linear in n); float64 ones by NumPy's
stable sort."""
from __future__ import annotations

import numpy as np

from .jit import kernel


def sort_keys(x: np.ndarray, descending: bool) -> np.ndarray:
    """The unsigned integer keys of x whose ascending order is the sort's."""
    bits = x.dtype.itemsize * 8
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    top = unsigned.type(1 << (bits - 1))
    u = np.ascontiguousarray(x).view(unsigned)
    if x.dtype.kind != "f":
        keys = u ^ top
    else:
        u = np.where(u == top, unsigned.type(0), u)               # -0 as +0
        keys = np.where(u & top, ~u, u | top)
        keys[np.isnan(x)] = np.iinfo(unsigned).max                # NaN past +inf
    return ~keys if descending else keys


@kernel
def _radix_rows(bits, order, rows, n, is_float, descending):
    """order[r] = the stable order of row r of ``bits`` (float32 or int32 values' bits,
    uint32) by their keys (as sort_keys'), row by row."""
    key_a, key_b = np.empty(n, np.uint32), np.empty(n, np.uint32)
    at_a, at_b = np.empty(n, np.int32), np.empty(n, np.int32)
    counts = np.empty(256, np.int64)
    top = np.uint32(0x80000000)
    for r in range(rows):
        base = r * n
        for i in range(n):
            u = bits[base + i]
            if not is_float:
                k = u ^ top
            elif (u & np.uint32(0x7fffffff)) > np.uint32(0x7f800000):
                k = np.uint32(0xffffffff)
            else:
                if u == top:
                    u = np.uint32(0)
                k = ~u if u & top else u | top
            key_a[i] = ~k if descending else k
            at_a[i] = i
        for shift in range(0, 32, 8):
            counts[:] = 0
            for i in range(n):
                counts[(key_a[i] >> shift) & 255] += 1
            total = 0
            for d in range(256):
                c = counts[d]
                counts[d] = total
                total += c
            for i in range(n):
                d = (key_a[i] >> shift) & 255
                to = counts[d]
                counts[d] = to + 1
                key_b[to] = key_a[i]
                at_b[to] = at_a[i]
            key_a, key_b = key_b, key_a
            at_a, at_b = at_b, at_a
        for i in range(n):
            order[base + i] = at_a[i]


def sort(x: np.ndarray, descending: bool) -> tuple:
    """(values, int32 indices) of x's rows sorted along the last axis."""
    if x.dtype.itemsize == 4 and x.size:
        order = np.empty(x.shape, np.int32)
        _radix_rows(np.ascontiguousarray(x).reshape(-1).view(np.uint32), order.reshape(-1),
                    x.shape[0], x.shape[1], x.dtype.kind == "f", bool(descending))
    else:
        order = np.argsort(sort_keys(x, descending), axis=-1, kind="stable").astype(np.int32)
    return np.take_along_axis(x, order, axis=-1), order
