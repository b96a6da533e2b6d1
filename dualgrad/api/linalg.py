"""Products under PyTorch's names: ``mm bmm mv dot outer addmm baddbmm tensordot einsum
kron cross``.

Each is made of ``matmul`` and the view and reduction ops (transpose, reshape, expand,
sum, tril/triu), so both backends compute it with the kernels the differential suite
checks, its gradients come from theirs, and a captured step replays it. ``einsum`` contracts
its operands left to right, as PyTorch does without opt_einsum: each pair becomes one
(batched) matrix product, with the labels they share and the output keeps as its batch,
the labels they share and nothing later needs as its inner dimension, and the rest as its
rows and columns; a label found in one operand only, and needed by nothing after, is summed
first.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidValueError, ShapeError, bad_shape, bad_type
from ..shapes import MAX_RANK
from . import checks
from .indexing import _axis, concat, expand, index_select, movedim, pad
from .logic import tril, triu
from .ops import (_constant, _tensor, add, matmul, mul, reshape, sub, sum as _sum,
                  transpose)
from .tensor import Tensor


def _operand(fn: str, name: str, x) -> Tensor:
    return _tensor(fn, name, x, low_precision=True)


def _ranked(fn: str, name: str, t: Tensor, ranks: tuple, what: str) -> Tensor:
    if t.ndim not in ranks:
        raise bad_shape(fn, name, t.shape, what)
    return t


def mm(input, mat2) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """The product of two matrices (2-D each), as ``torch.mm``."""
    a = _ranked("mm", "input", _operand("mm", "input", input), (2,), "a 2-D matrix")
    b = _ranked("mm", "mat2", _operand("mm", "mat2", mat2), (2,), "a 2-D matrix")
    return matmul(a, b)


def bmm(input, mat2) -> Tensor:  # noqa: A002
    """The products of two stacks of matrices (3-D each, the same count), as ``torch.bmm``."""
    a = _ranked("bmm", "input", _operand("bmm", "input", input), (3,), "a 3-D stack")
    b = _ranked("bmm", "mat2", _operand("bmm", "mat2", mat2), (3,), "a 3-D stack")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: input has shape {a.shape} and mat2 has "
                         f"shape {b.shape}")
    return matmul(a, b)


def mv(input, vec) -> Tensor:  # noqa: A002
    """A matrix (2-D) times a vector (1-D), as ``torch.mv``."""
    a = _ranked("mv", "input", _operand("mv", "input", input), (2,), "a 2-D matrix")
    v = _ranked("mv", "vec", _operand("mv", "vec", vec), (1,), "a 1-D vector")
    return matmul(a, v)


def dot(input, other) -> Tensor:  # noqa: A002
    """The inner product of two vectors (1-D, the same length), a 0-d tensor, as
    ``torch.dot``."""
    a = _ranked("dot", "input", _operand("dot", "input", input), (1,), "a 1-D vector")
    b = _ranked("dot", "other", _operand("dot", "other", other), (1,), "a 1-D vector")
    if a.shape != b.shape:
        raise ShapeError(f"dot: lengths differ: input has shape {a.shape} and other has "
                         f"shape {b.shape}")
    return matmul(a, b)


def outer(input, vec2) -> Tensor:  # noqa: A002
    """The outer product of two vectors: out[i, j] = input[i] * vec2[j] (each element one
    rounded product), as ``torch.outer``."""
    a = _ranked("outer", "input", _operand("outer", "input", input), (1,), "a 1-D vector")
    b = _ranked("outer", "vec2", _operand("outer", "vec2", vec2), (1,), "a 1-D vector")
    return mul(reshape(a, a.shape + (1,)), reshape(b, (1,) + b.shape))


def addmm(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2), input broadcast to the product's shape, as
    ``torch.addmm`` (a factor of 1 is not multiplied; beta 0 ignores input, NaN included)."""
    return _plus_product("addmm", mm, input, mat1, mat2, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * bmm(batch1, batch2), input broadcast to the products' shape,
    as ``torch.baddbmm`` (attention's scores with a bias or mask added; factors as
    addmm's)."""
    return _plus_product("baddbmm", bmm, input, batch1, batch2, beta, alpha)


def _plus_product(fn: str, product, input, a, b, beta, alpha) -> Tensor:  # noqa: A002
    beta = checks.number(fn, "beta", beta)
    alpha = checks.number(fn, "alpha", alpha)
    c = _operand(fn, "input", input)
    y = product(a, b)
    if alpha != 1:
        y = mul(y, alpha)
    if beta == 0:
        return y
    return add(c if beta == 1 else mul(c, beta), y)


def tensordot(a, b, dims=2) -> Tensor:
    """Sums of products over axes of ``a`` and ``b``, as ``torch.tensordot``: ``dims`` an
    int (the last ``dims`` axes of a with the first of b) or two lists of axes; the result
    holds a's other axes, then b's."""
    a = _operand("tensordot", "a", a)
    b = _operand("tensordot", "b", b)
    if isinstance(dims, int) and not isinstance(dims, bool):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise InvalidValueError(f"tensordot: argument 'dims' is {dims}; expected an int "
                                    f"in [0, {min(a.ndim, b.ndim)}] for shapes {a.shape} "
                                    f"and {b.shape}")
        axes_a, axes_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        try:
            axes_a, axes_b = ([int(d) for d in (side if isinstance(side, (list, tuple))
                                                else [side])] for side in dims)
        except (TypeError, ValueError):
            raise bad_type("tensordot", "dims", dims, "an int or two lists of axes") from None
        if len(axes_a) != len(axes_b):
            raise InvalidValueError(f"tensordot: argument 'dims' is {dims}; expected two "
                                    "lists of axes of the same length")
    la = [chr(ord("a") + i) for i in range(a.ndim)]
    lb = [chr(ord("A") + i) for i in range(b.ndim)]
    for i, j in zip(axes_a, axes_b):
        i, j = _axis("tensordot", "dims", i, a.ndim), _axis("tensordot", "dims", j, b.ndim)
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"tensordot: axis {i} of a (shape {a.shape}) and axis {j} of b "
                             f"(shape {b.shape}) differ in length")
        lb[j] = la[i]
    out = [x for x in la if x not in lb] + [x for x in lb if x not in la]
    return _einsum("tensordot", "".join(la) + "," + "".join(lb) + "->" + "".join(out),
                   (a, b))


def trace(input) -> Tensor:  # noqa: A002
    """The sum of a matrix's diagonal (2-D, any shape), a 0-d tensor, as ``torch.trace``."""
    x = _ranked("trace", "input", _operand("trace", "input", input), (2,), "a 2-D matrix")
    n = min(x.shape)
    return _einsum("trace", "ii", (x[:n, :n],))


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The diagonal of the matrices in axes ``dim1`` and ``dim2`` (``offset`` above the main
    one, below where negative), as its last axis, as ``torch.diagonal`` (a copy)."""
    x = _operand("diagonal", "input", input)
    if x.ndim < 2:
        raise bad_shape("diagonal", "input", x.shape, "at least 2 dimensions")
    offset = checks.integer("diagonal", "offset", offset)
    d1, d2 = _axis("diagonal", "dim1", dim1, x.ndim), _axis("diagonal", "dim2", dim2, x.ndim)
    if d1 == d2:
        raise InvalidValueError(f"diagonal: dim1 and dim2 are both axis {d1}; expected two "
                                "different axes")
    return _offset_diagonal(movedim(x, (d1, d2), (-2, -1)), offset)


def _offset_diagonal(m: Tensor, offset: int) -> Tensor:
    """The ``offset``-th diagonal of the matrices in m's last two axes, as its last axis."""
    rows, cols = m.shape[-2:]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    n = max(0, min(rows - r0, cols - c0))
    m = m[..., r0:r0 + n, c0:c0 + n]
    if n == 0:
        return reshape(m, m.shape[:-2] + (0,))
    return _einsum("diagonal", "...ii->...i", (m,))


def diag(input, diagonal: int = 0) -> Tensor:  # noqa: A002
    """A vector (1-D) laid on the ``diagonal``-th diagonal of a square matrix of zeros, or
    a matrix's (2-D) ``diagonal``-th diagonal as a vector, as ``torch.diag``."""
    x = _ranked("diag", "input", _operand("diag", "input", input), (1, 2),
                "a 1-D vector or a 2-D matrix")
    k = checks.integer("diag", "diagonal", diagonal)
    if x.ndim == 2:
        return _offset_diagonal(x, k)
    n = x.shape[0]
    square = mul(reshape(x, (1, n)), _identity(n, x.dtype))
    if k == 0:
        return square
    a = abs(k)
    return pad(square, (a, 0, 0, a) if k > 0 else (0, a, a, 0))


def cdist(x1, x2, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distances between each row of ``x1`` (..., P, M) and each of ``x2``
    (..., R, M): (..., P, R), as ``torch.cdist``. Euclidean distances of more than 25 rows
    a side take PyTorch's product form, sqrt(max(|a|^2 + |b|^2 - 2 a.b, 0)) (one matmul;
    within float32's cancellation of the exact value: close points lose digits, as in
    PyTorch); other cases take the difference of every pair (P R M values)."""
    fn = "cdist"
    a, b = _operand(fn, "x1", x1), _operand(fn, "x2", x2)
    for name, t in (("x1", a), ("x2", b)):
        if t.ndim < 2:
            raise bad_shape(fn, name, t.shape, "(..., rows, features)")
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"cdist: x1 has {a.shape[-1]} features and x2 {b.shape[-1]}")
    p = checks.number(fn, "p", p, 0.0)
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
             "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise InvalidValueError(f"cdist: argument 'compute_mode' is {compute_mode!r}; "
                                f"expected one of {modes}")
    product = p == 2.0 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == modes[0] and (a.shape[-2] > 25 or b.shape[-2] > 25)))
    if product:
        from .ops import clamp, sqrt, sub, sum as sum_
        na = sum_(mul(a, a), -1, True)                        # (..., P, 1)
        nb = sum_(mul(b, b), -1, True)                        # (..., R, 1)
        cross = matmul(a, movedim(b, -1, -2))                 # (..., P, R)
        squared = sub(add(na, movedim(nb, -1, -2)), mul(cross, 2.0))
        return sqrt(clamp(squared, min=0.0))
    from .reductions import norm
    diff = add(reshape(a, a.shape[:-1] + (1, a.shape[-1])),
               mul(reshape(b, b.shape[:-2] + (1,) + b.shape[-2:]), -1.0))
    return norm(diff, p, dim=-1)


# -- einsum -----------------------------------------------------------------------------------
def _identity(n: int, dtype) -> Tensor:
    """The n x n identity, made on the device (no upload: a recorded step keeps it)."""
    return tril(triu(_constant((n, n), 1.0, dtype)))


class _Term:
    """An operand with one label per axis."""

    def __init__(self, t: Tensor, labels: list):
        self.t, self.labels = t, labels

    def size(self, label: str) -> int:
        return self.t.shape[self.labels.index(label)]


def _parse(equation, count: int) -> tuple:
    """(input subscripts, output subscripts or None) of an einsum equation, spaces removed."""
    if not isinstance(equation, str):
        raise bad_type("einsum", "equation", equation, "a string such as 'ij,jk->ik'")
    text = equation.replace(" ", "")
    if text.count("->") > 1:
        raise InvalidValueError(f"einsum: equation {equation!r} has more than one '->'")
    inputs, _, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != count:
        raise InvalidValueError(f"einsum: equation {equation!r} has {len(terms)} operand "
                                f"subscripts; {count} operands were given")
    for term in terms + ([output] if "->" in text else []):
        rest = term.replace("...", "", 1)
        if "." in rest or not all(c.isalpha() and c.isascii() for c in rest):
            raise InvalidValueError(f"einsum: equation {equation!r}: subscripts are letters, "
                                    "with at most one '...' a term")
    return terms, (output if "->" in text else None)


def _labels(equation: str, term: str, t: Tensor, k: int, lead: int) -> list:
    """One label per axis of operand k: its letters, with '...' standing for its leading
    axes, labelled by their place from the right (shared with the other operands' ones,
    which broadcast together)."""
    letters = term.replace("...", "")
    if "..." not in term:
        if len(letters) != t.ndim:
            raise InvalidValueError(f"einsum: equation {equation!r}: operand {k} has "
                                    f"{t.ndim} axes (shape {t.shape}) but subscripts "
                                    f"{term!r}")
        return list(letters)
    free = t.ndim - len(letters)
    if free < 0:
        raise InvalidValueError(f"einsum: equation {equation!r}: operand {k} has {t.ndim} "
                                f"axes (shape {t.shape}), fewer than the subscripts {term!r}")
    head, tail = term.split("...")
    return list(head) + [_ellipsis_label(lead - free + i, lead) for i in range(free)] + \
        list(tail)


def _ellipsis_label(i: int, lead: int) -> str:
    """The label of the i-th of ``lead`` axes that '...' stands for (not a letter)."""
    return chr(0x100 + lead - i)


def _repeated_labels(term: _Term) -> _Term:
    """A label repeated within one operand: its diagonal, the other axis summed after the
    off-diagonal elements are zeroed (an identity mask made on the device)."""
    labels, t = term.labels, term.t
    for label in dict.fromkeys(labels):
        while labels.count(label) > 1:
            p = labels.index(label)
            q = labels.index(label, p + 1)
            n = t.shape[p]
            if t.shape[q] != n:
                raise ShapeError(f"einsum: subscript {label} is repeated in an operand of "
                                 f"shape {t.shape}, on axes of lengths {n} and {t.shape[q]}")
            shape = [1] * t.ndim
            shape[p] = shape[q] = n
            eye = reshape(_identity(n, t.dtype), tuple(shape))
            t = _sum(mul(t, eye), axis=q)
            labels = labels[:q] + labels[q + 1:]
    return _Term(t, labels)


def _summed(term: _Term, needed: set) -> _Term:
    """The term with the labels nothing needs summed away."""
    axes = tuple(i for i, label in enumerate(term.labels) if label not in needed)
    if not axes:
        return term
    return _Term(_sum(term.t, axis=axes),
                 [label for label in term.labels if label in needed])


def _arranged(term: _Term, order: list, sizes: dict) -> Tensor:
    """The term's tensor with its axes in ``order`` and each broadcast to ``sizes``."""
    t = term.t
    perm = [term.labels.index(label) for label in order]
    if perm != list(range(t.ndim)):
        t = transpose(t, perm)
    full = tuple(sizes[label] for label in order)
    if t.shape != full:
        t = expand(t, full)
    return t


def _contract(a: _Term, b: _Term, keep: set, sizes: dict) -> _Term:
    """The pair's product as one (batched) matmul: shared labels kept are the batch,
    shared ones not kept are summed over, the others are rows (a's) and columns (b's)."""
    batch = [x for x in a.labels if x in b.labels and x in keep]
    inner = [x for x in a.labels if x in b.labels and x not in keep]
    rows = [x for x in a.labels if x not in b.labels]
    cols = [x for x in b.labels if x not in a.labels]
    count = [math.prod(sizes[x] for x in group) for group in (batch, rows, inner, cols)]
    ta = reshape(_arranged(a, batch + rows + inner, sizes), (count[0], count[1], count[2]))
    tb = reshape(_arranged(b, batch + inner + cols, sizes), (count[0], count[2], count[3]))
    if count[0] == 1:
        y = matmul(reshape(ta, ta.shape[1:]), reshape(tb, tb.shape[1:]))
    else:
        y = matmul(ta, tb)
    labels = batch + rows + cols
    return _Term(reshape(y, tuple(sizes[x] for x in labels)), labels)


def _einsum(fn: str, equation: str, tensors: tuple) -> Tensor:
    terms, output = _parse(equation, len(tensors))
    lead = max((t.ndim - len(term.replace("...", "")) for term, t in zip(terms, tensors)
                if "..." in term), default=0)
    ops = [_Term(t, _labels(equation, term, t, k, lead))
           for k, (term, t) in enumerate(zip(terms, tensors))]
    ellipsis = [_ellipsis_label(i, lead) for i in range(lead)
                if any(_ellipsis_label(i, lead) in op.labels for op in ops)]
    if output is None:               # implicit: '...', then the letters seen once, sorted
        seen = [x for op in ops for x in op.labels]
        out = ellipsis + sorted(x for x in set(seen) if x.isalpha() and seen.count(x) == 1)
    else:
        if "..." in output:
            head, tail = output.split("...")
            out = list(head) + ellipsis + list(tail)
        else:
            out = list(output)
        for x in out:
            if out.count(x) > 1:
                raise InvalidValueError(f"{fn}: equation {equation!r}: output subscript "
                                        f"{x} appears more than once")
            if not any(x in op.labels for op in ops):
                raise InvalidValueError(f"{fn}: equation {equation!r}: output subscript "
                                        f"{x} is in no operand")
    sizes, seen_in = {}, {}
    for k, op in enumerate(ops):
        for label, n in zip(op.labels, op.t.shape):
            name = "'...'" if not label.isalpha() else f"subscript {label}"
            if label in op.labels[:op.labels.index(label)] or op.labels.count(label) > 1:
                lengths = {op.t.shape[i] for i, x in enumerate(op.labels) if x == label}
                if len(lengths) > 1:
                    raise ShapeError(f"{fn}: equation {equation!r}: {name} is repeated in "
                                     f"operand {k} (shape {op.t.shape}) on axes of lengths "
                                     f"{sorted(lengths)}")
            if sizes.get(label, 1) != 1 and n not in (1, sizes[label]):
                raise ShapeError(f"{fn}: equation {equation!r}: {name} has length "
                                 f"{sizes[label]} in operand {seen_in[label]} and {n} in "
                                 f"operand {k}")
            if n != 1 or label not in sizes:
                sizes[label], seen_in[label] = n, k
    ops = [_repeated_labels(op) for op in ops]
    result = None
    for k, op in enumerate(ops):
        later = set(out).union(*(o.labels for o in ops[k + 1:]))
        op = _summed(op, later | (set(result.labels) if result is not None else set()))
        if result is None:
            result = op
            continue
        result = _summed(result, later | set(op.labels))
        result = _contract(result, op, later, sizes)
    result = _summed(result, set(out))
    return _arranged(result, out, sizes)


def einsum(equation, *operands) -> Tensor:
    """Sums of products of the operands' elements named by ``equation``, as
    ``torch.einsum``: ``einsum("ij,jk->ik", a, b)``, ``einsum("bhqd,bhkd->bhqk", q, k)``,
    ``einsum("ii", a)`` (a trace); '...' stands for axes that broadcast; without '->' the
    output is '...' then the letters seen once, in alphabetical order (capitals first). The
    operands may also be given as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise InvalidValueError("einsum: no operands given")
    tensors = tuple(_operand("einsum", f"operands[{k}]", t) for k, t in enumerate(operands))
    return _einsum("einsum", equation, tensors)


def kron(input, other) -> Tensor:  # noqa: A002
    """The Kronecker product, as ``torch.kron``: every product input[i] * other[j] at
    i * other.shape + j, the lower rank padded with leading axes of size 1 (the result's
    rank, doubled on the way, at most 3 + 3)."""
    a = _operand("kron", "input", input)
    b = _operand("kron", "other", other)
    rank = max(a.ndim, b.ndim)
    if 2 * rank > MAX_RANK:
        raise bad_shape("kron", "input", a.shape, f"ranks whose double is at most {MAX_RANK}")
    sa, sb = (1,) * (rank - a.ndim) + a.shape, (1,) * (rank - b.ndim) + b.shape
    wide = mul(reshape(a, tuple(v for n in sa for v in (n, 1))),
               reshape(b, tuple(v for n in sb for v in (1, n))))
    return reshape(wide, tuple(m * n for m, n in zip(sa, sb)))


def cross(input, other, dim=None) -> Tensor:  # noqa: A002
    """The cross product of 3-vectors along ``dim`` (input and other broadcast), as
    ``torch.cross``: with no dim, the first axis of size 3, as PyTorch's."""
    a = _operand("cross", "input", input)
    b = _operand("cross", "other", other)
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise bad_shape("cross", "input", shape, "an axis of size 3")
    dim = _axis("cross", "dim", dim, max(len(shape), 1))
    if shape[dim] != 3:
        raise bad_shape("cross", "input", shape, f"size 3 along dim {dim}")
    a, b = expand(a, shape), expand(b, shape)
    x, y = ([index_select(v, dim, [k]) for k in range(3)] for v in (a, b))
    return concat([sub(mul(x[1], y[2]), mul(x[2], y[1])),
                   sub(mul(x[2], y[0]), mul(x[0], y[2])),
                   sub(mul(x[0], y[1]), mul(x[1], y[0]))], dim)


__all__ = ["mm", "bmm", "mv", "dot", "outer", "addmm", "baddbmm", "tensordot", "einsum",
           "trace", "diagonal", "diag", "cdist", "kron", "cross"]
