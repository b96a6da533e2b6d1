"""``DistributedDataParallel``: a model replicated in every process, its gradients averaged
across them during the backward pass, so that every replica takes the same step."""
from __future__ import annotations

import contextlib

from ..api import nn, tape
from ..errors import DistributedMismatch, bad_type, bad_value
from .reducer import Reducer
from .world import all_gather_object, broadcast_object, world


def _signature(module: nn.Module) -> list:
    return [(name, tuple(t.shape), str(t.dtype), bool(t.requires_grad))
            for name, t in module._state_tensors().items()]


def check_same_model(module: nn.Module, fn: str) -> None:
    """Raise ``DistributedMismatch`` in every process unless all hold a model with the
    same parameter and buffer names, shapes and dtypes; the message names the first
    difference."""
    every = all_gather_object(_signature(module))
    mine = every[0]
    for r, theirs in enumerate(every[1:], start=1):
        for k in range(max(len(mine), len(theirs))):
            a = mine[k] if k < len(mine) else None
            b = theirs[k] if k < len(theirs) else None
            if a != b:
                raise DistributedMismatch(
                    f"{fn}: the processes hold different models; the first difference, "
                    f"entry {k} of the state: rank 0 has {_describe(a)}, rank {r} has "
                    f"{_describe(b)}")


def _describe(entry) -> str:
    if entry is None:
        return "nothing"
    name, shape, dtype, grad = entry
    return f"'{name}' of shape {shape}, {dtype}" + ("" if grad else " (no gradient)")


def broadcast_parameters(module: nn.Module, optimizer=None, scheduler=None,
                         root: int = 0) -> None:
    """Give every process rank ``root``'s parameters and buffers (and optimizer and
    schedule state, where given), so that all start identical: at the start of a run and
    after one process changed them (a load). The models must match (names, shapes)."""
    if not isinstance(module, nn.Module):
        raise bad_type("broadcast_parameters", "module", module, "a dg.nn.Module")
    if isinstance(module, DistributedDataParallel):
        module = module.module
    for name, thing in (("optimizer", optimizer), ("scheduler", scheduler)):
        if thing is not None and not hasattr(thing, "state_dict"):
            raise bad_type("broadcast_parameters", name, thing, "an object with state_dict()")
    check_same_model(module, "broadcast_parameters")
    for thing in (module, optimizer, scheduler):
        if thing is not None:
            from_root(thing, root)


def from_root(thing, root: int = 0) -> None:
    """Load rank ``root``'s ``thing.state_dict()`` into ``thing`` in every other process
    (a module, an optimizer, a schedule, a GradScaler)."""
    w = world()
    state = broadcast_object(thing.state_dict() if w.rank == root else None, root)
    if w.rank != root:
        thing.load_state_dict(state)


class DistributedDataParallel(nn.Module):
    """Wraps ``module`` for data-parallel training, as PyTorch's class of that name: call
    it as the module; after ``backward()`` every parameter's ``.grad`` holds the average
    of the processes' gradients, so each process's optimizer takes the same step.

    At construction the processes' models are compared (a different one raises
    ``DistributedMismatch`` naming the first difference) and rank 0's parameters and
    buffers are copied to every process. Gradients are averaged in buckets of about
    ``bucket_mb`` MiB while the backward pass still runs; on a GPU each bucket goes through
    host-visible memory. ``no_sync()`` skips the averaging (gradient accumulation: the
    backward pass after the block averages what has accumulated).

    A parameter that gets no gradient in a pass counts as a zero gradient there, and gets
    the average in ``.grad`` like the others. Buffers (batch norm's running statistics)
    are each process's own after the start, as PyTorch's with ``broadcast_buffers=False``
    (``broadcast_parameters`` copies rank 0's again). Its ``state_dict()`` keys carry the prefix
    ``module.`` as PyTorch's do; ``dg.distributed.save_checkpoint`` saves the inner
    module's, which load into the model alone. A step with it is replayed by
    ``capture_step``: the recording is cut where gradients go to the host and where the
    averages come back, and each replay does the host's part there.
    """

    def __init__(self, module: nn.Module, bucket_mb: float = 25.0):
        fn = "DistributedDataParallel"
        if not isinstance(module, nn.Module):
            raise bad_type(fn, "module", module, "a dg.nn.Module")
        if isinstance(bucket_mb, bool) or not isinstance(bucket_mb, (int, float)):
            raise bad_type(fn, "bucket_mb", bucket_mb, "a number of MiB")
        if not bucket_mb > 0:
            raise bad_value(fn, "bucket_mb", bucket_mb, "a positive number of MiB")
        w = world()
        super().__init__()
        self.module = module
        check_same_model(module, fn)
        if w.size > 1:
            from_root(module)
        params = [p for p in module.parameters() if p.requires_grad]
        object.__setattr__(self, "_reducer", Reducer(w, params, int(bucket_mb * 2**20)))
        object.__setattr__(self, "_sync", True)
        object.__setattr__(self, "_queued", False)
        # (alone, a process's gradients are the average already)
        object.__setattr__(self, "_handles", [] if w.size == 1 else
                           [p.register_post_accumulate_grad_hook(self._ready) for p in params])

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Within the block, backward passes keep their gradients local (accumulating in
        ``.grad``); the first backward pass after it averages the accumulated sum."""
        before = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", before)

    def _ready(self, p) -> None:
        if not self._sync:
            return
        if not self._queued:
            object.__setattr__(self, "_queued", True)
            tape.queue_callback(self._finish)
        self._reducer.ready(p)

    def _finish(self) -> None:
        object.__setattr__(self, "_queued", False)
        self._reducer.finish()

    @property
    def buckets(self) -> list:
        """The parameter names of each gradient bucket, in the order they are reduced."""
        names = {id(p): n for n, p in self.module.named_parameters()}
        return [[names[id(p)] for p in b.params] for b in self._reducer.buckets]

    def close(self) -> None:
        """Stop the all-reduce thread and free the host buffers (the module stays as it
        is); the wrapper is unusable afterwards. Every process calls it (the shared-memory
        windows are freed together); at the end of a run there is no need to."""
        for h in self._handles:
            h.remove()
        self._reducer.close()
