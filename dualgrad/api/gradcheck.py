"""``dg.gradcheck``: a function's gradients against central finite differences, as
``torch.autograd.gradcheck``, on the cpu backend in float64."""
from __future__ import annotations

import numpy as np

from ..errors import GradcheckError, bad_type
from . import checks, device
from .tape import with_grad_tape
from .tensor import Tensor, ag_tensor


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """Check the gradients of ``fn`` (tensors in, one tensor out) at ``inputs`` (a tuple of
    arrays or tensors, or one alone) against central differences with step ``eps``: every
    element of the Jacobian, |analytic - numeric| <= atol + rtol |numeric|. Runs on the cpu
    backend in float64 whatever the device selected (which stays selected). Returns True,
    or raises GradcheckError naming the output and input elements that disagree (False
    instead with ``raise_exception=False``)."""
    items = (inputs,) if isinstance(inputs, (np.ndarray, Tensor)) else inputs
    try:
        items = tuple(items)
    except TypeError:
        raise bad_type("gradcheck", "inputs", inputs, "a tuple of arrays or tensors") from None
    arrays = []
    for k, item in enumerate(items):
        if not isinstance(item, (np.ndarray, Tensor)):
            raise bad_type("gradcheck", f"inputs[{k}]", item, "an array or a Tensor")
        arrays.append(np.array(item.numpy() if isinstance(item, Tensor) else item, np.float64))
    if not callable(fn):
        raise bad_type("gradcheck", "fn", fn, "a callable")
    eps = checks.number("gradcheck", "eps", eps, 0.0, lo_open=True)
    atol = checks.number("gradcheck", "atol", atol, 0.0)
    rtol = checks.number("gradcheck", "rtol", rtol, 0.0)
    with device.using(device.cpu_backend()):
        analytic = _analytic_jacobians(fn, arrays)
        numeric = _numeric_jacobians(fn, arrays, eps)
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        bad = np.abs(a - n) > atol + rtol * np.abs(n)
        if bad.any():
            if not raise_exception:
                return False
            out, at = np.unravel_index(np.argmax(bad), bad.shape)
            raise GradcheckError(
                f"gradcheck: the gradient of output element {out} with respect to element "
                f"{at} of input {k} is {a[out, at]!r}; finite differences give "
                f"{n[out, at]!r} (atol {atol}, rtol {rtol})")
    return True


def _outputs(fn, arrays, grad: bool):
    tensors = [ag_tensor(a, requires_grad=grad, dtype="float64") for a in arrays]
    out = fn(*tensors)
    if not isinstance(out, Tensor):
        raise bad_type("gradcheck", "fn", fn, "a function returning a Tensor")
    return tensors, out


def _analytic_jacobians(fn, arrays) -> list:
    """One (outputs x inputs' elements) matrix per input: a backward pass per output
    element, with a one-hot gradient."""
    size = int(np.prod(_outputs(fn, arrays, False)[1].shape))
    jacobians = [np.zeros((size, a.size)) for a in arrays]
    for j in range(size):
        one_hot = np.zeros(size)
        one_hot[j] = 1.0
        with with_grad_tape():
            tensors, out = _outputs(fn, arrays, True)
            out.backward(one_hot.reshape(out.shape))
        for k, t in enumerate(tensors):
            if t.grad is not None:
                jacobians[k][j] = t.grad.numpy().reshape(-1)
    return jacobians


def _numeric_jacobians(fn, arrays, eps: float) -> list:
    jacobians = []
    for k, a in enumerate(arrays):
        columns = []
        for i in range(a.size):
            shifted = []
            for step in (eps, -eps):
                moved = [x.copy() for x in arrays]
                moved[k].reshape(-1)[i] += step
                shifted.append(_outputs(fn, moved, False)[1].numpy().reshape(-1))
            columns.append((shifted[0] - shifted[1]) / (2 * eps))
        jacobians.append(np.array(columns).T.reshape(-1, a.size))
    return jacobians
