"""The residency behaviour inherited from ggmlR: one test per ``test_that`` block of
``test-ag-resident-weights.R``, with the same assertions.

A parameter lives on the device across steps. Two things must hold, and they pull in
opposite directions: the weight stays resident (across tape resets and optimizer steps), and
the numbers are unchanged (residency is a transport decision; any difference in values means
it went wrong).
"""
import numpy as np
import pytest

import dualgrad as dg
from dualgrad.residency import (ptr_is_live, set_host_data, store_weight, tensor_scope,
                                write_resident)

rng = np.random.default_rng(42)


def matrix(values, rows, cols):
    """R's matrix(values, rows, cols): filled column by column."""
    return np.asarray(np.broadcast_to(values, (rows * cols,)),
                      dtype=np.float64).reshape(cols, rows).T.copy()


@pytest.mark.gpu
def test_a_gpu_parameter_is_resident_in_the_persistent_pool(gpu):
    w = dg.ag_param(matrix(np.arange(1, 7) / 10, 2, 3))
    assert w.ptr is not None
    assert tensor_scope(w) == "persistent"
    assert ptr_is_live(w)
    # The value is unchanged by the trip to the device.
    np.testing.assert_allclose(dg.ag_data(w), matrix(np.arange(1, 7) / 10, 2, 3), atol=1e-6)


def test_a_cpu_parameter_is_untouched():
    dg.ag_device("cpu")
    w = dg.ag_param(matrix(np.arange(1, 5), 2, 2))
    assert w.ptr is None
    assert tensor_scope(w) == "pass"          # the default, meaning "no pool"
    np.testing.assert_array_equal(dg.ag_data(w), matrix(np.arange(1, 5), 2, 2))


@pytest.mark.gpu
def test_a_resident_weight_survives_a_tape_reset(gpu):
    w = dg.ag_param(rng.standard_normal((4, 4)))
    before = dg.ag_data(w)
    # This is the event that happens once per training step, and the one that used to
    # destroy every resident tensor.
    for _ in range(5):
        with dg.with_grad_tape():
            pass
    assert ptr_is_live(w)
    assert tensor_scope(w) == "persistent"
    np.testing.assert_allclose(dg.ag_data(w), before, atol=1e-6)


@pytest.mark.gpu
def test_writing_a_resident_weight_keeps_it_resident(gpu):
    w = dg.ag_param(np.zeros((3, 3)))
    ptr = w.ptr
    write_resident(w, matrix(np.arange(1, 10), 3, 3))
    # Same buffer, new numbers: the pointer is what is being written to, so it must not
    # change.
    assert w.ptr is ptr
    assert ptr_is_live(w)
    np.testing.assert_allclose(dg.ag_data(w), matrix(np.arange(1, 10), 3, 3), atol=1e-6)


@pytest.mark.gpu
def test_a_resident_write_refuses_a_shape_change(gpu):
    w = dg.ag_param(np.zeros((2, 2)))
    with pytest.raises(dg.ShapeError, match="cannot change a tensor's shape"):
        write_resident(w, np.zeros((3, 3)))


@pytest.mark.gpu
def test_a_resident_write_drops_the_materialisation_cache(gpu):
    w = dg.ag_param(np.ones((2, 2)))
    np.testing.assert_allclose(dg.ag_data(w), np.ones((2, 2)), atol=1e-6)   # caches data
    write_resident(w, np.full((2, 2), 7.0))
    # A stale cache here would serve the pre-write value and nothing would say so.
    np.testing.assert_allclose(dg.ag_data(w), np.full((2, 2), 7.0), atol=1e-6)


@pytest.mark.gpu
def test_store_weight_keeps_residency_set_host_data_drops_it(gpu):
    w = dg.ag_param(np.zeros((2, 2)))
    store_weight(w, np.full((2, 2), 2.0))
    assert ptr_is_live(w)
    np.testing.assert_allclose(dg.ag_data(w), np.full((2, 2), 2.0), atol=1e-6)
    # The contrast matters: set_host_data is still the right call for a host-side value
    # (a checkpoint being loaded), and it must still drop the pointer.
    set_host_data(w, np.full((2, 2), 3.0))
    assert w.ptr is None
    np.testing.assert_array_equal(dg.ag_data(w), np.full((2, 2), 3.0))


@pytest.mark.gpu
def test_a_weight_stays_resident_across_optimizer_steps(gpu):
    w = dg.ag_param(rng.standard_normal((3, 3)))
    opt = dg.optimizer_adam({"w": w}, lr=0.01)
    for _ in range(5):
        w.grad = rng.standard_normal((3, 3))
        opt.step()
        # The read-modify-write inside step() is where residency used to be lost.
        assert ptr_is_live(w)
        assert tensor_scope(w) == "persistent"


@pytest.mark.gpu
def test_resident_and_host_optimizers_agree_numerically(gpu):
    w0 = matrix(np.linspace(0.1, 0.9, 9), 3, 3)
    g = matrix(np.linspace(-0.4, 0.4, 9), 3, 3)

    dg.ag_device("cpu")
    wc = dg.ag_param(w0)
    oc = dg.optimizer_adam({"w": wc}, lr=0.05)
    for _ in range(3):
        wc.grad = g
        oc.step()
    host = dg.ag_data(wc)

    dg.ag_device("gpu")
    wg = dg.ag_param(w0)
    og = dg.optimizer_adam({"w": wg}, lr=0.05)
    for _ in range(3):
        wg.grad = g
        og.step()
    dev = dg.ag_data(wg)
    np.testing.assert_allclose(dev, host, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_a_resident_weight_is_rescued_when_the_device_is_released(gpu):
    d = matrix(np.linspace(0.1, 1.6, 16), 4, 4)
    w = dg.ag_param(d)
    assert w._host is None          # the value exists only in the device buffer
    # Releasing the device frees the persistent pool. Without a rescue the weight would be
    # gone outright, which for a trained model is the most expensive failure in this area.
    dg.ag_device("cpu")
    assert w.ptr is None
    np.testing.assert_allclose(dg.ag_data(w), d, atol=1e-6)


@pytest.mark.gpu
def test_a_tape_reset_does_not_drag_weights_off_the_device(gpu):
    w = dg.ag_param(rng.standard_normal((3, 3)))
    with dg.with_grad_tape():      # pass-scope reset
        pass
    # The rescue is per pool: a pass reset must leave persistent weights alone.
    assert w.ptr is not None
    assert ptr_is_live(w)
    assert w._host is None


@pytest.mark.gpu
def test_weights_updated_on_the_device_are_rescued_with_their_new_values(gpu):
    w = dg.ag_param(np.full((2, 2), 0.5))
    opt = dg.optimizer_adam({"w": w}, lr=0.1)
    for _ in range(3):
        w.grad = np.full((2, 2), 0.2)
        opt.step()
    trained = dg.ag_data(w)
    assert not np.allclose(trained, 0.5)
    dg.ag_device("cpu")
    # What comes back must be the trained weight, not the value it was created with.
    np.testing.assert_allclose(dg.ag_data(w), trained, atol=1e-6)


@pytest.mark.gpu
def test_the_persistent_pool_holds_the_weights_and_the_pass_pool_does_not_grow(gpu):
    w = dg.ag_param(rng.standard_normal((8, 8)))  # noqa: F841 - held to stay resident
    m = dg.tape_mem()
    assert m["p_buffer_bytes"] > 0
    held = m["p_buffer_bytes"]
    for _ in range(3):
        with dg.with_grad_tape():
            pass
    # Tape resets free the pass pool only; the weight's memory is untouched.
    assert dg.tape_mem()["p_buffer_bytes"] == held
