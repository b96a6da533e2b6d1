"""The gradient tape: ``with_grad_tape()``, ``no_grad()``, recording and ``backward()``.

While a tape is open, every op whose inputs require grad records a Node on its output:
links to the inputs and a rule that maps the output's gradient to the inputs' gradients
(the rule sits beside the op's forward in ``ops.py``, and keeps only the storage it reads;
the links are nodes, not tensors, so a computed tensor's memory goes when the program and
the rules no longer need it). ``backward()`` sorts the recorded graph topologically and
walks it in reverse, summing the gradients that meet at a node and freeing each node and
gradient once used; leaves accumulate theirs in ``.grad``. The tape knows no op; three
protocols let an op save work:

- ``owed``: an op may leave a transform for the tape to apply to its output's gradient
  before its rule runs (an object with ``apply(backend, g)``; it must be a projection:
  applying it twice is applying it once). A consumer's rule may apply it instead, as it
  writes the gradient, and say so by returning the gradient as ``Settled``; where every
  gradient that meets at the tensor came settled, the tape applies nothing.
- ``Into``: in a rule's ``needs``, storage in a leaf's own pool for its first gradient; a
  rule whose kernel takes an output writes it there, and the tape adopts it as the leaf's
  ``.grad`` instead of copying it.
- ``seeded``: a loss's forward may make its inputs' gradients for an output gradient of
  one; ``backward()`` from that tensor, given no gradient, takes them as they are and runs
  no rule for it.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref

from ..backend import EVAL, TAPE
from ..errors import GraphFreedError, InvalidValueError, bad_shape, bad_type, bad_value
from . import checks, device, scopes
from .residency import adopt, handle, keep_host_values
from .tensor import HookHandle, Tensor, host_array


class _State(threading.local):
    """This thread's tape state, the class attributes every thread's defaults (read on every
    op: a default found this way costs no missed lookup). ``callbacks`` lives in the
    instance's ``__dict__`` only."""
    recording = False             # ops record onto the tape
    open = False                  # a with_grad_tape block is open
    depth = 0                     # nested backward passes
    watched = None                # {id: tensor} of watched tensors


_local = _State()


class Node:
    """How a recorded tensor was made: links to its inputs, the backward rule, the backend
    whose storage the rule's saved handles live in, ``owed``: a transform the tape applies
    to the output's gradient before the rule (see the module's docstring), else None, and
    ``seeded``: the inputs' gradients for an output gradient of one, where the forward
    made them (a loss), else None. ``backward()`` frees each node once its rule has run,
    unless told to keep the graph, as PyTorch does: the rule (and what it saved) and the
    links go; a freed node's ``backward`` is None.

    An input's link is its Node where it was recorded, the tensor itself where it is a
    leaf that requires grad, else None: the graph holds no computed tensor, so the memory
    of one that no rule saved goes as soon as the program drops it (as in PyTorch)."""

    __slots__ = ("inputs", "backward", "backend", "owed", "seeded")

    def __init__(self, inputs: tuple, backward, backend, owed=None, seeded=None):
        self.inputs = inputs
        self.backward = backward
        self.backend = backend
        self.owed = owed
        self.seeded = seeded


def recording() -> bool:
    return _local.recording


class recording_as:  # noqa: N801 - used as a function
    """Record ops (``flag`` True) or not within the block, whatever the tape says (a
    checkpointed function's forward, then its recomputation in the backward)."""

    __slots__ = ("flag", "was")

    def __init__(self, flag: bool):
        self.flag = flag

    def __enter__(self):
        self.was = recording()
        _local.recording = self.flag
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        _local.recording = self.was
        return False


class with_grad_tape:  # noqa: N801 - used as a function, as torch.no_grad is
    """Open a tape: ``with dg.with_grad_tape(): ...`` frees the memory of the previous
    tape's tensors (activations, gradients of non-parameters: reading one afterwards raises
    DeadTensorError on every backend), then records ops until the block ends. Parameters,
    their gradients, optimizer state and values from the host are untouched. Tapes do not
    nest. A tape left by an exception frees its own tensors at once."""

    __slots__ = ("lifetimes", "where", "before")

    def __enter__(self):
        if _local.open:
            raise InvalidValueError("with_grad_tape: a tape is already open in this thread; "
                                    "tapes do not nest (the inner one would free the outer "
                                    "one's activations)")
        backend = device.active()
        self.lifetimes = lifetimes = scopes.of(backend)
        self.where = scopes.block("with_grad_tape()", sys._getframe(1))
        if lifetimes.kept:
            keep_host_values(backend, lifetimes)
        self.before = lifetimes.begin(TAPE, self.where)
        _local.open = _local.recording = True
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        _local.open = _local.recording = False
        lifetimes = self.lifetimes
        if kind is not None:
            if lifetimes.kept:
                keep_host_values(lifetimes.backend, lifetimes)
            lifetimes.abandon(TAPE, self.where)
        lifetimes.resume(self.before)
        return False


class no_grad:  # noqa: N801 - used as a function, as torch.no_grad is
    """Run ops without recording: ``with dg.no_grad(): ...``, or as a decorator
    (``@dg.no_grad()``: each call of the function runs so). Inside a tape it only pauses
    recording. Outside a tape it is an evaluation: it first frees the memory of the
    previous evaluation's tensors (so an evaluation loop does not grow device memory), and
    what it computes lives until the next one; the last tape's tensors (a loss) stay
    readable."""

    __slots__ = ("lifetimes", "counted", "before", "was")

    def __call__(self, fn):
        if not callable(fn):
            raise bad_type("no_grad", "fn", fn, "a function to decorate")

        @functools.wraps(fn)
        def decorated(*args, **kwargs):
            with no_grad():             # (a new block each call: blocks nest, not reenter)
                return fn(*args, **kwargs)
        return decorated

    def __enter__(self):
        backend = device.active()
        self.lifetimes = lifetimes = scopes.of(backend)
        self.counted = not _local.open
        self.before = TAPE
        if self.counted:
            lifetimes.evaluations += 1
            if lifetimes.evaluations == 1:                  # the outermost evaluation
                if lifetimes.kept:
                    keep_host_values(backend, lifetimes)
                self.before = lifetimes.begin(EVAL,
                                              scopes.block("no_grad()", sys._getframe(1)))
        self.was = recording()
        _local.recording = False
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        _local.recording = self.was
        if self.counted:
            lifetimes = self.lifetimes
            lifetimes.evaluations -= 1
            if not lifetimes.evaluations:
                lifetimes.resume(self.before)
        return False


def inference_mode(mode: bool = True):
    """``no_grad()`` under PyTorch's other name (``mode=False``: a block that changes
    nothing)."""
    if checks.flag("inference_mode", "mode", mode):
        return no_grad()
    return _Unchanged()


class _Unchanged(contextlib.ContextDecorator):
    """A block (or decorator) that changes nothing: ``inference_mode(False)``."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


def is_grad_enabled() -> bool:
    """Whether ops are being recorded for ``backward()`` now: inside ``with_grad_tape()``
    and outside ``no_grad()``."""
    return recording()


def record(out: Tensor, inputs: tuple, backward, backend, owed=None, seeded=None) -> Tensor:
    """Attach a Node to ``out`` when recording and an input requires grad (``owed``,
    ``seeded``: see Node)."""
    if recording():
        for t in inputs:
            if t.requires_grad:
                out.requires_grad = True
                # each input's link (see Node): its node, or itself if a leaf taking grad
                out._node = Node(tuple([i._node or (i if i.requires_grad else None)
                                        for i in inputs]), backward, backend, owed, seeded)
                break
    return out


class Settled:
    """A backward rule's gradient for an input whose node owes a transform, with that
    transform already applied."""

    __slots__ = ("g",)

    def __init__(self, g):
        self.g = g


def owed(t: Tensor):
    """The transform the tape owes ``t``'s gradient (see Node), or None."""
    node = t._node
    return node.owed if node is not None else None


def _topological(root: Node) -> list:
    """The nodes reachable from ``root``, inputs before outputs (an iterative depth-first
    search); a freed node on the way raises GraphFreedError (nothing has changed yet). A
    node is expanded when first popped, not when first pushed: it is then placed after
    everything it depends on, even when it is also an input of a node met earlier (x in
    x + f(x))."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.backward is None:
            raise GraphFreedError(
                "backward: the graph was already freed by an earlier backward(); pass "
                "retain_graph=True to that one to go through the graph again (gradients "
                "add up in .grad), or compute the loss again")
        stack.append((node, True))
        for inp in node.inputs:
            if inp.__class__ is Node and id(inp) not in seen:
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


def _need(inp, backend):
    """``needs[i]`` for an input linked as ``inp`` (see Node): False, True, or Into for a
    leaf's first gradient."""
    if inp is None:
        return False
    if inp.__class__ is not Node and inp._grad is None:
        return Into(backend.empty(inp.shape, inp.dtype, inp.persistent))
    return True


def accumulate_leaf(t: Tensor, g, backend, store=None) -> None:
    """Add gradient ``g`` into leaf ``t``'s ``.grad``, held in the leaf's own pool
    (``store``, where given: storage made for it, which ``g`` may already be)."""
    if t._grad is None:
        if store is None:
            store = backend.empty(t.shape, t.dtype, t.persistent)
        if g is not store:
            backend.copy(store, g)
        t._grad = adopt(backend, Tensor(t.shape, t.dtype, persistent=t.persistent), store,
                        kept=t._scope is None)
    else:
        h = handle(backend, t._grad)
        backend.binary("add", h, g, out=h)
        t._grad.written()


def backward(tensor: Tensor, grad=None, retain_graph: bool = False) -> None:
    """Backpropagate from ``tensor`` (usually a scalar loss, else pass ``grad``, the gradient
    with respect to it) and accumulate gradients into the ``.grad`` of every leaf that
    requires grad. The tensor must have been computed under ``with_grad_tape()``. The graph
    is freed as it is used, as in PyTorch (a second backward() through it raises
    GraphFreedError), unless ``retain_graph`` keeps it."""
    if not isinstance(tensor, Tensor):
        raise bad_type("backward", "tensor", tensor, "a Tensor")
    if retain_graph is not False:
        retain_graph = checks.flag("backward", "retain_graph", retain_graph)
    backend = device.active()
    if tensor._node is None:
        if tensor.requires_grad:       # a leaf: its gradient is the seed itself
            accumulate_leaf(tensor, _seed_grad(tensor, grad, backend), backend)
            return
        raise InvalidValueError(
            "backward: the tensor has no recorded history; compute it inside "
            "'with dg.with_grad_tape():' from tensors that require grad (parameters)")
    seeded = tensor._node.seeded if grad is None else None
    _propagate(tensor, seeded or _seed_grad(tensor, grad, backend), backend, retain_graph,
               seeded)


class _Capture:
    """``grad()``'s targets: id of a leaf or of a computed tensor's node -> its summed
    gradient (storage), in the order asked."""

    def __init__(self, keys: list):
        self.sums = dict.fromkeys(keys)

    def __contains__(self, key) -> bool:
        return key in self.sums

    def add(self, key, g, backend, owed=None, settled=False) -> None:
        if owed is not None and settled:
            # (the consumers applied the node's owed transform as they stored g: what is
            # here is past the fused activation, not the tensor's own gradient)
            raise InvalidValueError(
                "grad: the gradient of this tensor is not kept: it is the output of a "
                "linear layer with its ReLU fused (Sequential's Linear + ReLU, or "
                "linear(..., activation='relu')), whose consumers take the gradient past "
                "the ReLU; ask for the gradient of the layer's input or of a later tensor")
        previous = self.sums[key]
        if previous is None:
            copy = backend.empty(tuple(g.shape), g.dtype)    # (g may be reused by the walk)
            backend.copy(copy, g)
            self.sums[key] = copy
        else:
            self.sums[key] = backend.binary("add", previous, g)


def _leading_to(order: list, capture: _Capture) -> set:
    """Ids of the nodes from which a gradient reaches one of ``capture``'s tensors."""
    relevant = set()
    for node in order:                            # (inputs before outputs)
        if id(node) in capture or any(
                inp is not None and (id(inp) in capture if inp.__class__ is not Node
                                     else id(inp) in relevant) for inp in node.inputs):
            relevant.add(id(node))
    return relevant


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False,
         allow_unused=None, materialize_grads: bool = False) -> tuple:
    """The gradients of ``outputs`` (a tensor or a sequence, each with its
    ``grad_outputs`` entry, or of one element) with respect to each of ``inputs``, as
    ``torch.autograd.grad``: returned as tensors, nothing added to any ``.grad``. The graph
    is freed unless ``retain_graph``. An input the outputs do not depend on raises, unless
    ``allow_unused`` (its gradient None, or zeros with ``materialize_grads``).
    ``create_graph`` (gradients of gradients) is not offered."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for name, items in (("outputs", outs), ("inputs", ins)):
        if not items:
            raise bad_value("grad", name, items, "at least one tensor")
        for k, t in enumerate(items):
            if not isinstance(t, Tensor):
                raise bad_type("grad", f"{name}[{k}]", t, "a Tensor")
    if checks.flag("grad", "create_graph", create_graph):
        raise bad_value("grad", "create_graph", True, "False (gradients of gradients are "
                        "not offered)")
    keep = False if retain_graph is None else checks.flag("grad", "retain_graph", retain_graph)
    unused = materialize_grads if allow_unused is None else checks.flag(
        "grad", "allow_unused", allow_unused)
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outs) if grad_outputs is None else [grad_outputs]
    grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outs):
        raise bad_value("grad", "grad_outputs", f"{len(grad_outputs)} entries",
                        f"one for each of the {len(outs)} outputs")
    for k, t in enumerate(ins):
        if t._node is None and not t.requires_grad:
            raise bad_value("grad", f"inputs[{k}]", "a tensor that does not require grad",
                            "a tensor the outputs were computed from with requires_grad")
    backend = device.active()
    capture = _Capture([id(t._node) if t._node is not None else id(t) for t in ins])
    for k, (out, g) in enumerate(zip(outs, grad_outputs)):
        seed = _seed_grad(out, g.numpy() if isinstance(g, Tensor) else g, backend)
        key = id(out._node) if out._node is not None else id(out)
        if key in capture:
            capture.add(key, seed, backend)
        if out._node is not None:
            _propagate(out, seed, backend, keep or k + 1 < len(outs), None, capture)
    result = []
    for k, t in enumerate(ins):
        h = capture.sums[id(t._node) if t._node is not None else id(t)]
        if h is None:
            if not unused:
                raise bad_value("grad", f"inputs[{k}]", "a tensor the outputs do not depend "
                                "on", "every input used (or allow_unused=True)")
            if not materialize_grads:
                result.append(None)
                continue
            h = backend.empty(t.shape, t.dtype)
            backend.fill(h, 0.0)
        result.append(adopt(backend, Tensor(t.shape, t.dtype), h))
    return tuple(result)


def backward_from(tensor: Tensor, g) -> None:
    """``backward`` from a recorded ``tensor`` given its gradient as storage ``g`` of the
    active backend (a checkpointed function's recomputed output)."""
    _propagate(tensor, g, device.active(), False, None)


def _propagate(tensor: Tensor, seed, backend, retain_graph: bool, seeded,
               capture=None) -> None:
    """Walk the graph under ``tensor`` in reverse from its gradient ``seed`` (``seeded``:
    its inputs' gradients made by its forward, where ``seed`` is them). With ``capture``
    (``grad()``'s), the gradients of the tensors it names are summed there instead of
    into any ``.grad``."""
    order = _topological(tensor._node)
    for node in order:
        if node.backend is not backend:
            raise InvalidValueError(
                f"backward: the graph was recorded on the {node.backend.name} backend but "
                f"the active backend is {backend.name}; run backward before switching")
    depth = _local.depth
    # Hooks fire in the outermost walk only: a checkpointed function's walk inside it
    # accumulates into leaves that the outer graph lists as its node's inputs.
    hooked = _hooked_leaves(order) if depth == 0 and HookHandle.registered and \
        capture is None else None
    _local.depth = depth + 1
    try:
        _walk(order, seed, backend, seeded, hooked, retain_graph, capture)
    finally:
        _local.depth = depth
        callbacks = _local.__dict__.pop("callbacks", ()) if depth == 0 else ()
    if not retain_graph:
        for node in order:       # (those the walk did not reach: no gradient flowed there)
            _free(node)
    for callback in callbacks:
        callback()


def _free(node: Node) -> None:
    node.inputs, node.backward, node.owed, node.seeded = (), None, None, None


def _hooked_leaves(order: list):
    """{position in the reverse walk: leaves with hooks whose last use is there}, or None
    where no leaf has a hook."""
    last = {}
    for k, node in enumerate(reversed(order)):
        for inp in node.inputs:
            if inp is not None and inp.__class__ is not Node and inp._hooks is not None:
                last[id(inp)] = (k, inp)
    if not last:
        return None
    at: dict = {}
    for k, leaf in last.values():
        at.setdefault(k, []).append(leaf)
    return at


def _fire(leaves: list) -> None:
    for leaf in leaves:
        if leaf._grad is not None:
            for hook in tuple(leaf._hooks or ()):
                hook(leaf)


def queue_callback(callback) -> None:
    """Run ``callback()`` once the ``backward()`` in progress in this thread has walked
    the whole graph (as PyTorch's engine's ``queue_callback``): a data-parallel wrapper
    collects its all-reduced gradients there."""
    _local.__dict__.setdefault("callbacks", []).append(callback)


class _Watch:
    """A tensor whose gradient is watched in backward(): ``retain_grad()`` keeps it in
    ``.grad`` (of a computed tensor), ``register_hook(fn)`` hands it to ``fn`` first (which
    may return a replacement)."""

    __slots__ = ("tensor", "retain", "hooks")

    def __init__(self, tensor: Tensor, key: int, watches: dict):
        # (the entry goes with the tensor: a later node or leaf may reuse the id)
        self.tensor = weakref.ref(tensor, lambda _: watches.pop(key, None))
        self.retain = False
        self.hooks = []


def _watched() -> dict:
    """This thread's watches: id of a computed tensor's node, or of a leaf -> _Watch."""
    found = _local.watched
    if found is None:
        found = _local.watched = {}
    return found


def watch(t: Tensor) -> _Watch:
    """The watch of ``t``'s gradient (made on first use)."""
    key = id(t._node) if t._node is not None else id(t)
    watches = _watched()
    w = watches.get(key)
    if w is None or w.tensor() is not t:
        w = watches[key] = _Watch(t, key, watches)
    return w


def _watch_of(watches: dict, key: int, node_or_leaf):
    """The live watch of this node (its tensor's node must still be it) or leaf, or None."""
    w = watches.get(key)
    if w is None:
        return None
    t = w.tensor()
    if t is None or (t is not node_or_leaf and t._node is not node_or_leaf):
        return None
    return w


def _watched_gradient(w: _Watch, g, backend, settled_owed: bool):
    """``g`` after ``w``'s hooks (each given it as a tensor, which it may replace), kept in
    the tensor's ``.grad`` where retained."""
    t = w.tensor()
    if t is None:
        return g
    if settled_owed:
        raise InvalidValueError(
            "backward: the gradient of a watched tensor is not kept: it is the output of a "
            "linear layer with its ReLU fused, whose consumers take the gradient past the "
            "ReLU; watch the layer's input or a later tensor")
    for hook in list(w.hooks):
        result = hook(adopt(backend, Tensor(t.shape, t.dtype), g))
        if result is not None:
            if not isinstance(result, Tensor) or result.shape != t.shape:
                raise bad_type("register_hook", "hook", hook, "a function returning None "
                               f"or a tensor of shape {t.shape}")
            g = handle(backend, result)
    if w.retain and t._node is not None:
        accumulate_leaf(t, g, backend)          # (into .grad, as a leaf's: a copy, then sums)
    return g


def _walk(order: list, seed, backend, seeded, hooked, retain_graph: bool,
          capture=None) -> None:
    """Run the rules of ``order``'s nodes from the last (the root, whose gradient is
    ``seed``) to the first, summing the gradients that meet at a node; each node is freed
    once its rule has run (unless ``retain_graph``), and each gradient once used, so
    memory falls as the walk goes. With ``capture`` only the gradients that lead to its
    tensors are made, and theirs are summed there."""
    grads = {id(order[-1]): seed}
    settled = set()         # nodes whose every gradient so far came Settled
    relevant = _leading_to(order, capture) if capture is not None else None
    watches = _local.watched if capture is None else None
    for k, node in enumerate(reversed(order)):
        g = grads.pop(id(node), None)
        if g is None:
            if hooked is not None and k in hooked:
                _fire(hooked[k])
            continue
        if watches:
            w = _watch_of(watches, id(node), node)
            if w is not None:
                g = _watched_gradient(w, g, backend,
                                      node.owed is not None and id(node) in settled)
        inputs = node.inputs
        if capture is not None:
            if id(node) in capture:             # a computed tensor asked for: its gradient
                capture.add(id(node), g, backend, owed=node.owed, settled=id(node) in settled)
            needs = [inp is not None and (id(inp) in capture if inp.__class__ is not Node
                                          else id(inp) in relevant) for inp in inputs]
        else:
            needs = [_need(i, backend) for i in inputs]
        if g is seeded:                 # the root's input gradients, made by its forward
            gis = seeded
        else:
            if node.owed is not None and id(node) not in settled:
                g = node.owed.apply(backend, g)
            gis = node.backward(g, needs)
        g = None
        if not retain_graph:
            _free(node)
        for inp, need, gi in zip(inputs, needs, gis):
            if gi is None or not need:
                continue
            came_settled = gi.__class__ is Settled
            if came_settled:
                gi = gi.g
            key = id(inp)
            if inp.__class__ is not Node:
                if capture is not None:
                    capture.add(key, gi, backend)
                    continue
                w = _watch_of(watches, key, inp) if watches else None
                if w is not None and w.hooks:
                    changed = _watched_gradient(w, gi, backend, False)
                    if changed is not gi:
                        gi, need = changed, True        # (a new tensor: not the Into store)
                accumulate_leaf(inp, gi, backend, into(need))
            elif key in grads:          # (settled stays so only if this one is too)
                grads[key] = backend.binary("add", grads[key], gi)
                if not came_settled:
                    settled.discard(key)
            else:
                grads[key] = gi
                if came_settled:
                    settled.add(key)
        gis = gi = None
        if hooked is not None and k in hooked:
            _fire(hooked[k])
