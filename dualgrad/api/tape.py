"""The gradient tape: ``with_grad_tape()``, ``no_grad()``, recording and ``backward()``.

While a tape is open, every op whose inputs require grad records a Node on its output: the
inputs and a closure that maps the output's gradient to the inputs' gradients (the rule sits
beside the op's forward in ``ops.py``). ``backward()`` sorts the recorded graph
topologically and walks it in reverse, summing the gradients that meet at a tensor; leaves
accumulate theirs in ``.grad``.

An op that ends in a relu (a linear layer and its ReLU in one kernel) records its output as
the Node's ``relu``: its rule takes the gradient through that relu, which the tape makes
(relu's backward from the output: kept where the output is > 0, else 0). A consumer's rule
may make it instead, as it writes the gradient (a product's store does it at no cost), and
say so by returning ``Masked``; where every gradient that meets at the tensor came masked,
the tape makes no second pass over it.

A loss's forward may make its inputs' gradients for an output gradient of one (the Node's
``seeded``: softmax cross-entropy does); ``backward()`` from that tensor, given no gradient,
takes them as they are and runs no rule for it.
"""
from __future__ import annotations

import contextlib
import threading

from . import device
from .errors import InvalidValueError, bad_shape, bad_type
from .tensor import Tensor, host_array

_local = threading.local()


class Node:
    """How a recorded tensor was made: its inputs, the backward rule, the backend whose
    storage the rule's saved handles live in, ``relu``: the output's storage where the op
    ends in a relu (the rule's gradient is then the one through it), else None, and
    ``seeded``: the inputs' gradients for an output gradient of one, where the forward
    made them (a loss: ``backward()`` from it then runs no rule for it), else None."""

    __slots__ = ("inputs", "backward", "backend", "relu", "seeded")

    def __init__(self, inputs: tuple, backward, backend, relu=None, seeded=None):
        self.inputs = inputs
        self.backward = backward
        self.backend = backend
        self.relu = relu
        self.seeded = seeded


def recording() -> bool:
    return getattr(_local, "recording", False)


@contextlib.contextmanager
def with_grad_tape():
    """Open a tape: free the pass pool (the previous step's activations and gradients of
    non-parameters), then record ops until the block ends. Parameters, their gradients
    and optimizer state are persistent and untouched. Tapes do not nest."""
    if getattr(_local, "open", False):
        raise InvalidValueError("with_grad_tape: a tape is already open in this thread; "
                                "tapes do not nest (the inner one would free the outer "
                                "one's activations)")
    device.active().reset_pass()
    _local.open, _local.recording = True, True
    try:
        yield
    finally:
        _local.open, _local.recording = False, False


@contextlib.contextmanager
def no_grad():
    """Run ops without recording. Outside a tape it first frees the pass pool, as a tape
    does, so an evaluation loop does not grow device memory; inside a tape it only pauses
    recording."""
    inside = getattr(_local, "open", False)
    if not inside:
        device.active().reset_pass()
    was = recording()
    _local.recording = False
    try:
        yield
    finally:
        _local.recording = was


def record(out: Tensor, inputs: tuple, backward, backend, relu=None, seeded=None) -> Tensor:
    """Attach a Node to ``out`` when recording and an input requires grad (``relu``: the
    output's storage, where the op ends in a relu; ``seeded``: see Node)."""
    if recording():
        for t in inputs:
            if t.requires_grad:
                out.requires_grad = True
                out._node = Node(inputs, backward, backend, relu, seeded)
                break
    return out


class Masked:
    """A backward rule's gradient for an input made by an op that ends in a relu, already
    taken through that relu (zero where the input is not > 0)."""

    __slots__ = ("g",)

    def __init__(self, g):
        self.g = g


def relu_mask(t: Tensor):
    """The storage that a gradient for ``t`` may be masked by (``Masked``): t's own, where
    t is the output of an op that ends in a relu; else None."""
    node = t._node
    return node.relu if node is not None else None


def _topological(root: Tensor) -> list:
    """Recorded tensors reachable from root, inputs before outputs (iterative DFS)."""
    order, seen, stack = [], {id(root)}, [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        stack.append((t, True))
        for inp in t._node.inputs:
            if inp._node is not None and id(inp) not in seen:
                seen.add(id(inp))
                stack.append((inp, False))
    return order


def _seed_grad(t: Tensor, grad, backend):
    if grad is None:
        if t.size != 1:
            raise bad_shape("backward", "tensor", t.shape,
                            "a one-element tensor (or pass 'grad' of the tensor's shape)")
        seed = backend.empty(t.shape, t.dtype)      # made on the device: no upload
        backend.fill(seed, 1.0)
        return seed
    value = host_array("backward", "grad", grad, t.dtype)
    if value.shape != t.shape:
        raise bad_shape("backward", "grad", value.shape, f"the tensor's shape {t.shape}")
    return backend.upload(value)


class Into:
    """In a backward rule's ``needs``, in place of True: storage in the leaf's own pool for
    its first gradient. A rule that can write the gradient there does (``into``), and the
    tape adopts it as the leaf's ``.grad`` instead of copying it there."""

    __slots__ = ("h",)

    def __init__(self, h):
        self.h = h


def into(need):
    """The storage a backward rule may write an input's gradient into, or None."""
    return need.h if need.__class__ is Into else None


def _need(t: Tensor, backend):
    """``needs[i]`` for input ``t``: False, True, or Into for a leaf's first gradient."""
    if not t.requires_grad:
        return False
    if t._node is None and t._grad is None:
        return Into(backend.empty(t.shape, t.dtype, t.persistent))
    return True


def accumulate_leaf(t: Tensor, g, backend, store=None) -> None:
    """Add gradient ``g`` into leaf ``t``'s ``.grad``, held in the leaf's own pool
    (``store``, where given: storage made for it, which ``g`` may already be)."""
    if t._grad is None:
        if store is None:
            store = backend.empty(t.shape, t.dtype, t.persistent)
        if g is not store:
            backend.copy(store, g)
        grad = Tensor(t.shape, t.dtype, persistent=t.persistent)
        backend.adopt(grad, store)
        t._grad = grad
    else:
        h = backend.handle(t._grad)
        backend.binary("add", h, g, out=h)
        t._grad.written()


def backward(tensor: Tensor, grad=None) -> None:
    """Backpropagate from ``tensor`` (usually a scalar loss, else pass ``grad``, the gradient
    with respect to it) and accumulate gradients into the ``.grad`` of every leaf that
    requires grad. The tensor must have been computed under ``with_grad_tape()``."""
    if not isinstance(tensor, Tensor):
        raise bad_type("backward", "tensor", tensor, "a Tensor")
    backend = device.active()
    if tensor._node is None:
        if tensor.requires_grad:       # a leaf: its gradient is the seed itself
            accumulate_leaf(tensor, _seed_grad(tensor, grad, backend), backend)
            return
        raise InvalidValueError(
            "backward: the tensor has no recorded history; compute it inside "
            "'with dg.with_grad_tape():' from tensors that require grad (parameters)")
    order = _topological(tensor)
    for t in order:
        if t._node.backend is not backend:
            raise InvalidValueError(
                f"backward: the graph was recorded on the {t._node.backend.name} backend but "
                f"the active backend is {backend.name}; run backward before switching")
    seeded = tensor._node.seeded if grad is None else None
    grads = {id(tensor): seeded or _seed_grad(tensor, grad, backend)}
    masked = set()          # tensors whose every gradient so far came Masked
    for t in reversed(order):
        g = grads.pop(id(t), None)
        if g is None:
            continue
        node = t._node
        needs = tuple(_need(i, backend) for i in node.inputs)
        if g is seeded:                 # the root's input gradients, made by its forward
            gis = seeded
        else:
            if node.relu is not None and id(t) not in masked:
                g = backend.unary_backward("relu", node.relu, node.relu, g)
            gis = node.backward(g, needs)
        for inp, need, gi in zip(node.inputs, needs, gis):
            if gi is None or not need:
                continue
            came_masked = gi.__class__ is Masked
            if came_masked:
                gi = gi.g
            if inp._node is None:
                accumulate_leaf(inp, gi, backend, into(need))
            elif id(inp) in grads:      # (masked stays so only if this one is too)
                grads[id(inp)] = backend.binary("add", grads[id(inp)], gi)
                if not came_masked:
                    masked.discard(id(inp))
            else:
                grads[id(inp)] = gi
                if came_masked:
                    masked.add(id(inp))
