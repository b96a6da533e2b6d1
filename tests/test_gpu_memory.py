"""The device pools and transfers: sub-allocation, reuse, coalescing, generations, and
transfers larger than the staging ring."""
import gc
import time

import numpy as np
import pytest

import dualgrad as dg
from dualgrad.api import device
from dualgrad.gpu.memory import ALIGN, ArenaPool, FreeListPool
from dualgrad.gpu.recorder import STAGING_BYTES

pytestmark = pytest.mark.gpu


@pytest.fixture
def backend(gpu):
    return device.active()


def test_arena_spills_into_new_blocks_and_reuses_them_after_reset(backend):
    pool = ArenaPool(backend.ctx, backend.device.pass_pool.memory_type, block_size=1 << 20)
    try:
        allocs = [pool.alloc(300_000) for _ in range(7)]      # 3 fit in a 1 MiB block
        assert len(pool.blocks) == 3
        spans = sorted((a.address, a.address + a.nbytes) for a in allocs)
        assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:]))   # no overlap
        assert all(a.address % ALIGN == 0 for a in allocs)
        big = pool.alloc(3 << 20)                              # larger than a block
        assert big.block.size >= 3 << 20 and len(pool.blocks) == 4
        reserved = pool.reserved_bytes
        pool.reset()
        assert not any(a.live for a in allocs + [big])
        again = [pool.alloc(300_000) for _ in range(7)]
        assert pool.reserved_bytes == reserved                 # reused, not grown
        assert all(a.live for a in again)
    finally:
        pool.release()


def test_an_arena_hands_a_dropped_range_out_again_within_its_generation(backend):
    busy = set()                      # addresses a command "touched since the last barrier"
    pool = ArenaPool(backend.ctx, backend.device.pass_pool.memory_type, block_size=1 << 20,
                     idle=lambda start, end: start not in busy)
    try:
        a, b, c = (pool.alloc(1000) for _ in range(3))
        at_a, at_b, at_c = a.address, b.address, c.address
        del b, a
        gc.collect()
        b2 = pool.alloc(1000)
        assert b2.address == at_b                           # its size: the longest dropped
        busy.add(at_a)
        bumped = pool.alloc(1000)
        assert bumped.address > at_c                        # a busy one: bumped instead
        busy.clear()
        a2 = pool.alloc(1000)
        assert a2.address == at_a
        assert pool.used_bytes == 4 * 1024
        del a2, b2, bumped
        del c
        gc.collect()
        fresh = pool.alloc(1000, fresh=True)                # never where anything has been
        assert fresh.address > at_c
        generation = pool.generation
        pool.reset()
        del fresh                                           # an old generation's drop: ignored
        gc.collect()
        assert pool.generation == generation + 1 and pool.used_bytes == 0
        big, rest = pool.alloc(600 << 10), pool.alloc(300 << 10)
        at_big = big.address
        del big
        gc.collect()
        # no block has room for 200 KiB: the larger free range is split, its rest filed
        assert pool.alloc(200 << 10).address == at_big and len(pool.blocks) == 1
        # ...but not for a fresh range (a recorded step's argument): a new block
        assert pool.alloc(300 << 10, fresh=True).block is pool.blocks[1]
        assert pool.alloc(400 << 10).address == at_big + (200 << 10) and rest.live
    finally:
        pool.release()


def test_a_range_is_idle_until_a_command_touches_it_and_again_after_a_barrier(backend):
    x = backend.upload(np.ones(1024, np.float32))
    y = backend.unary("exp", x)
    rec = backend.device.rec
    other = backend.device.empty((1024,))
    assert not rec.idle(*y.span) and not rec.idle(*x.span)     # written, read
    assert rec.idle(*other.span)
    rec.barrier()
    assert rec.idle(*y.span) and rec.idle(*x.span)


def test_a_steps_activations_go_as_backward_consumes_them(backend):
    """Memory falls during backward: each gradient is freed once used, each node's saved
    storage once its rule has run; intermediates no rule saves go at once."""
    x = dg.ag_param(np.ones((256, 1024), np.float32))
    mib = 1 << 20
    before = dg.tape_mem()
    dg.reset_peak_memory_stats()
    assert dg.tape_mem()["peak_bytes"] == before["buffer_bytes"] + before["p_buffer_bytes"]
    with dg.with_grad_tape():
        h = x
        for _ in range(16):                     # sums save nothing: 1 MiB each, dropped
            h = h + 1.0
        y = dg.sum(dg.exp(h) * dg.tanh(h))      # exp and tanh save theirs
        forward = dg.tape_mem()["buffer_bytes"]
        y.backward()
        del h
        after = dg.tape_mem()
    assert forward <= 4 * mib, forward          # h, exp(h), tanh(h) and y: each rule's own
    assert after["buffer_bytes"] < mib           # y (and nothing of the graph) is left
    # x, its gradient and at most five activations at once: not 16 + 16 MiB
    assert after["peak_bytes"] <= 2 * mib + 7 * mib, after["peak_bytes"]


def test_free_list_reuses_and_coalesces(backend):
    pool = FreeListPool(backend.ctx, backend.device.persistent_pool.memory_type, block_size=1 << 20)
    try:
        a, b, c = (pool.alloc(100_000) for _ in range(3))
        start = a.address
        assert pool.stats() == (3 * (100_000 + ALIGN - 100_000 % ALIGN), 3)
        del a, b                   # neighbours: they must merge into one span
        d = pool.alloc(190_000)    # fits only in the merged space
        assert d.address == start
        assert len(pool.blocks) == 1
        del c, d
        assert pool.stats() == (0, 0)
        whole = pool.alloc((1 << 20) - ALIGN)                  # everything merged again
        assert whole.address == start and len(pool.blocks) == 1
    finally:
        pool.release()


def test_transfers_larger_than_the_staging_ring(backend, rng):
    n = STAGING_BYTES // 4 + 12_345                           # spans two ring fills
    x = rng.standard_normal(n).astype(np.float32)
    h = backend.upload(x)
    y = backend.download(backend.unary("neg", h))
    np.testing.assert_array_equal(y, -x)
    stats = dg.transfer_stats()
    assert stats["h2d_bytes"] >= x.nbytes and stats["d2h_bytes"] >= x.nbytes


def test_the_staging_ring_is_reused_from_its_start_once_its_copies_have_run(backend, rng):
    # A batch copied in each step lands where the last one did, once that one's copy has
    # run; while a copy is recorded or in flight, the next goes after it.
    rec = backend.device.rec
    x = rng.standard_normal(10_000).astype(np.float32)
    a, b = backend.upload(x), backend.upload(x)
    assert a.alloc.address != b.alloc.address
    assert rec._staged % STAGING_BYTES == 2 * 40_192         # b after a (256-byte steps)
    backend.download(a)                                      # everything has run
    backend.upload(x)
    assert rec._staged % STAGING_BYTES == 40_192             # at the start again


def test_an_upload_takes_back_the_ring_from_batches_the_device_has_finished(backend, rng):
    # Nobody waited for the batch that copied a, but the device has run it: b's copy goes
    # to the ring's start, where a's went (memory still in the host's cache).
    rec = backend.device.rec
    with backend.ctx.lock:
        rec.flush(wait=True)                                 # the whole ring free
    x = rng.standard_normal(10_000).astype(np.float32)
    a = backend.upload(x)
    with backend.ctx.lock:
        rec.flush()                                          # submitted, not waited for
        deadline = time.monotonic() + 30
        while rec._flight and not rec._finished(rec._flight[-1]):
            assert time.monotonic() < deadline, "the device did not run a copy in 30 s"
            time.sleep(0.001)
    assert rec._staged % STAGING_BYTES == 40_192
    b = backend.upload(2 * x)
    assert rec._staged % STAGING_BYTES == 40_192             # at the start again
    np.testing.assert_array_equal(backend.download(a), x)
    np.testing.assert_array_equal(backend.download(b), 2 * x)


def test_copies_in_flight_keep_their_part_of_the_staging_ring(backend, rng):
    # Each upload its own submit, eight times the ring's size in all, with no wait between:
    # the ring wraps over batches still in flight and no copy reads another's bytes.
    rec = backend.device.rec
    n = STAGING_BYTES // 4 // 3 + 1000                    # 3 do not fit: the ring's end
    arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(24)]   # is skipped
    handles = []
    for x in arrays:
        handles.append(backend.upload(x))
        with backend.ctx.lock:
            rec.flush()
    for h, x in zip(handles, arrays):
        np.testing.assert_array_equal(backend.download(h), x)


def test_many_independent_updates_keep_barrier_tracking_bounded(backend, rng):
    # 500 parameters updated independently: correct results, and the recorder's hazard
    # lists never grow past their cap.
    from dualgrad.gpu.recorder import MAX_TRACKED
    params = [dg.ag_param(rng.standard_normal(8)) for _ in range(500)]
    opt = dg.optimizer_sgd(params, lr=0.5)
    for p in params:
        p.grad = np.ones(8)
    before = [p.numpy() for p in params]
    opt.step()
    tracked = len(backend.device.rec._written) + len(backend.device.rec._read)
    assert tracked <= MAX_TRACKED + 8
    for p, b in zip(params, before):
        np.testing.assert_allclose(p.numpy(), b - 0.5, rtol=1e-6)
