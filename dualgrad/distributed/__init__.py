"""Data-parallel training across processes, on MPI (``mpi4py``).

Start one process per device (``mpiexec -n 4 python train.py``); in each::

    import dualgrad as dg
    import dualgrad.distributed as dist

    dist.init()                                   # rank, world size, this process's device
    model = dist.DistributedDataParallel(make_model())   # rank 0's weights everywhere
    opt = dg.optim.Adam(model.parameters(), lr=1e-3)
    loader = dg.data.DataLoader(data, batch_size=64,
                                sampler=dist.DistributedSampler(data))
    for x, y in loader:
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(x), y)
            loss.backward()                       # gradients averaged across processes
        opt.step()
        opt.zero_grad()
    dist.save_checkpoint("run.ckpt", model, opt)  # by rank 0

``docs/distributed.md`` says how it works and what limits its speed.
"""
from .checkpoints import load_checkpoint, save_checkpoint
from .parallel import DistributedDataParallel, broadcast_parameters
from .sampler import DistributedSampler
from .world import (World, all_gather_object, all_reduce, barrier, broadcast_object, init,
                    is_initialized, is_main, local_rank, mpi_launcher, rank, world,
                    world_size)
from ..errors import DistributedError, DistributedMismatch, DistributedTimeout

__all__ = ["init", "is_initialized", "world", "World", "rank", "world_size", "local_rank",
           "is_main", "mpi_launcher", "barrier", "all_reduce", "broadcast_object", "all_gather_object",
           "broadcast_parameters", "DistributedDataParallel", "DistributedSampler",
           "save_checkpoint", "load_checkpoint", "DistributedError", "DistributedMismatch",
           "DistributedTimeout"]
