"""Layers: Module, Linear, containers, activations, LayerNorm, Embedding, Dropout (the
convolution and pooling layers: ``conv_layers``).

Modules hold Parameters and call ops; they never touch a backend. Initialisation draws from
dualgrad's generator (``dg.manual_seed``) and follows PyTorch's defaults.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import (ArgumentTypeError, AxisOutOfRange, InvalidValueError, bad_shape,
                      bad_type, bad_value)
from ..kernel_ops import UNARY, KernelOp
from . import capture, checks, device, ops, random
from .indexing import flatten, unsqueeze
from .logic import eq, where
from .residency import adopt, handle, set_host_data, store_weight
from .tensor import (Parameter, Tensor, ag_buffer, ag_param, host_array, is_floating,
                     resolve_dtype)


def _refuse_unregistered_collection(module, name, value) -> None:
    """Layers or parameters held in a list, tuple or dict would train silently untouched
    (neither ``parameters()`` nor checkpoints see them): refuse them when assigned."""
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return
    if any(isinstance(v, (Module, Parameter)) for v in items):
        raise ArgumentTypeError(
            f"{type(module).__name__}: attribute '{name}' is a {type(value).__name__} holding "
            "layers or parameters, which would not be registered (parameters() and "
            "checkpoints would miss them); use dg.nn.Sequential(...) or assign each one as "
            "an attribute of its own")


def _hooked(m) -> bool:
    return m._forward_hooks is not None or m._forward_pre_hooks is not None


class RemovableHandle:
    """What a module's hook registration returns: ``remove()`` unregisters the hook."""

    _count = 0

    def __init__(self, module, kind: str):
        RemovableHandle._count += 1
        self.key, self._module, self._kind = RemovableHandle._count, module, kind

    def remove(self) -> None:
        hooks = self._module.__dict__.get(self._kind)
        if hooks is not None:
            hooks.pop(self.key, None)
            if not hooks:
                object.__setattr__(self._module, self._kind, None)


class Module:
    """Base class: attributes that are Parameters or Modules are registered in order of
    assignment; ``forward`` is what calling the module runs."""

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise InvalidValueError(f"{type(self).__name__}: call super().__init__() before "
                                    "assigning attributes")
        _refuse_unregistered_collection(self, name, value)
        if name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise bad_type(type(self).__name__, name, value, "a Tensor (a buffer) or None")
            self._buffers[name] = value
            object.__setattr__(self, name, value)
            return
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        """What calling the module computes; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    _forward_pre_hooks = _forward_hooks = None     # (a dict once a hook is registered)

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks is None and self._forward_hooks is None:
            return self.forward(*args, **kwargs)
        for hook in list((self._forward_pre_hooks or {}).values()):
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        out = self.forward(*args, **kwargs)
        for hook in list((self._forward_hooks or {}).values()):
            changed = hook(self, args, out)
            if changed is not None:
                out = changed
        return out

    def register_forward_pre_hook(self, hook) -> "RemovableHandle":
        """Call ``hook(module, args)`` before each forward, as PyTorch's: a value it returns
        (a tuple, or one argument) replaces the positional arguments. Returns a handle whose
        ``remove()`` unregisters it."""
        return self._hook("_forward_pre_hooks", "register_forward_pre_hook", hook)

    def register_forward_hook(self, hook) -> "RemovableHandle":
        """Call ``hook(module, args, output)`` after each forward, as PyTorch's: a value it
        returns replaces the output. Returns a handle whose ``remove()`` unregisters it."""
        return self._hook("_forward_hooks", "register_forward_hook", hook)

    def _hook(self, kind: str, fn: str, hook) -> "RemovableHandle":
        if not callable(hook):
            raise bad_type(fn, "hook", hook, "a callable")
        hooks = self.__dict__.get(kind)
        if hooks is None:
            hooks = {}
            object.__setattr__(self, kind, hooks)
        handle_ = RemovableHandle(self, kind)
        hooks[handle_.key] = hook
        return handle_

    # -- parameters and state ------------------------------------------------------------------
    def named_parameters(self, prefix: str = ""):
        """(dotted name, Parameter) pairs, each parameter once, in registration order."""
        seen = set()
        for name, p in self._named_parameters(prefix):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def _named_parameters(self, prefix):
        for name, p in self._parameters.items():
            yield prefix + name, p
        for name, m in self._modules.items():
            yield from m._named_parameters(prefix + name + ".")

    def parameters(self) -> list:
        """The module's Parameters (each once), in registration order."""
        return [p for _, p in self.named_parameters()]

    def num_parameters(self, trainable: bool = True) -> int:
        """How many numbers the model holds: its parameters' elements (each parameter once),
        and with ``trainable=False`` its buffers' too."""
        count = sum(p.numel() for p in self.parameters())
        return count if checks.flag("num_parameters", "trainable", trainable) else \
            count + sum(b.numel() for b in self.buffers())

    def register_buffer(self, name: str, value) -> None:
        """Keep ``value`` (a Tensor, of its dtype; an array, float32 or int32 for
        integers; or None) as state that is not trained: a running statistic. Like a
        parameter it lives on the device (persistent), is in ``state_dict()`` and
        checkpoints, and is an attribute; it takes no gradient."""
        if not isinstance(name, str) or not name.isidentifier():
            raise bad_value(type(self).__name__, "name", name, "an identifier")
        if name in self._parameters or name in self._modules:
            raise bad_value(type(self).__name__, "name", name,
                            "a name not already a parameter or a module")
        if isinstance(value, Tensor):          # (of its own dtype, as PyTorch's)
            value = ag_buffer(value.numpy(), value.dtype)
        elif value is not None:
            value = ag_buffer(value)
        self._buffers[name] = value
        object.__setattr__(self, name, value)

    def named_buffers(self, prefix: str = ""):
        """(dotted name, buffer) pairs of this module and its descendants (None skipped)."""
        for name, b in self._buffers.items():
            if b is not None:
                yield prefix + name, b
        for name, m in self._modules.items():
            yield from m.named_buffers(prefix + name + ".")

    def buffers(self) -> list:
        return [b for _, b in self.named_buffers()]

    def _state_tensors(self) -> dict:
        """Name -> tensor of what ``state_dict`` holds, in PyTorch's order: a module's own
        parameters, its buffers, then its children's. A tied parameter or a shared module
        is there under each of its names, as in PyTorch's (so its state_dicts load)."""
        return dict(self._named_state(""))

    def _named_state(self, prefix: str):
        for name, p in self._parameters.items():
            yield prefix + name, p
        for name, b in self._buffers.items():
            if b is not None:
                yield prefix + name, b
        for name, m in self._modules.items():
            yield from m._named_state(prefix + name + ".")

    def named_modules(self, prefix: str = "", memo: set | None = None):
        """(dotted path, module) for this module ("" for itself) and every descendant,
        each module once (a shared one under its first path), as PyTorch's."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix.rstrip("."), self
        for name, m in self._modules.items():
            yield from m.named_modules(prefix + name + ".", memo)

    def modules(self):
        """This module and every descendant, each once."""
        return (m for _, m in self.named_modules())

    def named_children(self):
        """(name, module) of the direct children, each module once."""
        seen = set()
        for name, m in self._modules.items():
            if id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        """The direct children, each once."""
        return (m for _, m in self.named_children())

    def add_module(self, name: str, module) -> None:
        """Register ``module`` (a Module or None) as the child ``name``, as an attribute
        assignment does."""
        if not isinstance(name, str) or not name or "." in name:
            raise bad_value("add_module", "name", name, "a non-empty name without '.'")
        if module is not None and not isinstance(module, Module):
            raise bad_type("add_module", "module", module, "a dg.nn.Module or None")
        setattr(self, name, module)

    def register_parameter(self, name: str, param) -> None:
        """Register ``param`` (a Parameter or None) as ``name``, as an attribute assignment
        does."""
        if not isinstance(name, str) or not name or "." in name:
            raise bad_value("register_parameter", "name", name, "a non-empty name without '.'")
        if param is not None and not isinstance(param, Parameter):
            raise bad_type("register_parameter", "param", param, "a dg.nn.Parameter or None "
                           "(dg.ag_param(array))")
        setattr(self, name, param)

    def register_module(self, name: str, module) -> None:
        """``add_module``, under PyTorch's other name."""
        self.add_module(name, module)

    def get_parameter(self, target: str):
        """The parameter at dotted path ``target`` ("block.0.weight")."""
        return self._get_named("get_parameter", target, "_parameters")

    def get_buffer(self, target: str):
        """The buffer at dotted path ``target`` ("norm.running_mean")."""
        return self._get_named("get_buffer", target, "_buffers")

    def _get_named(self, fn: str, target: str, table: str):
        path, _, name = target.rpartition(".")
        owner = self.get_submodule(path)
        found = getattr(owner, table).get(name)
        if found is None:
            raise InvalidValueError(f"{fn}: {type(owner).__name__} has no "
                                    f"{table[1:-1]} '{name}' (path '{target}')")
        return found

    def get_submodule(self, target: str):
        """The descendant at dotted path ``target`` ("" for this module)."""
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise InvalidValueError(f"get_submodule: {type(module).__name__} has no "
                                        f"child '{part}' (path '{target}')")
            module = child
        return module

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` of every parameter (freezing or unfreezing); returns self."""
        flag = checks.flag("requires_grad_", "requires_grad", requires_grad)
        for p in self.parameters():
            p.requires_grad = flag
        return self

    def state_dict(self) -> dict:
        """Parameter and buffer name -> a NumPy copy of its current value."""
        return {name: t.numpy() for name, t in self._state_tensors().items()}

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Copy values into the parameters and buffers (keeping them resident on gpu).
        Every entry is checked (names, shapes, dtypes) before anything changes; with
        ``strict``, missing and unexpected names are errors."""
        if not isinstance(state, dict):
            raise bad_type("load_state_dict", "state", state, "a dict name -> array")
        params = self._state_tensors()
        if strict:
            missing = sorted(set(params) - set(state))
            unexpected = sorted(set(state) - set(params))
            if missing or unexpected:
                raise InvalidValueError(
                    f"load_state_dict: the state does not fit {type(self).__name__}: "
                    f"missing {missing}, unexpected {unexpected}")
        values = {}
        for name, p in params.items():
            if name not in state:
                continue
            value = host_array("load_state_dict", name, state[name], p.dtype)
            if value.shape != p.shape:
                raise bad_shape("load_state_dict", name, value.shape,
                                f"the parameter's shape {p.shape}")
            values[name] = value
        for name, value in values.items():
            store_weight(params[name], value)

    def extra_state(self) -> dict:
        """Non-tensor state worth checkpointing (JSON-serialisable), by module path."""
        return {name: m._own_extra_state() for name, m in self.named_modules()
                if m._own_extra_state()}

    def load_extra_state(self, state: dict) -> None:
        """Restore what ``extra_state()`` returned (unknown module paths are ignored)."""
        modules = dict(self.named_modules())
        for name, value in state.items():
            if name in modules:
                modules[name]._set_own_extra_state(value)

    def _own_extra_state(self) -> dict:
        return {}

    def _set_own_extra_state(self, value: dict) -> None:
        pass

    def apply(self, fn):
        """Call ``fn(module)`` on every descendant, then on this module (PyTorch's order:
        children first), e.g. to initialise weights; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- dtypes -------------------------------------------------------------------------------
    def to(self, *args, dtype=None, non_blocking: bool = False):
        """Convert every float parameter and buffer to ``dtype`` (float32, float64 on the
        cpu, float16, bfloat16) in place, as PyTorch's ``Module.to(dtype)``: the same
        Parameter objects, their gradients dropped; integer and boolean buffers stay.
        Returns the module. A float32 rounds to nearest even (as ``Tensor.to``); the
        optimizers update float32 and float64 parameters only (a 16-bit model is for
        running; train under ``dg.autocast``). A device name ("cpu", "gpu", "cuda")
        changes nothing: the model lives on the active backend (``dg.ag_device``)."""
        for arg in args:
            if not device.is_placement("Module.to", arg):
                if dtype is not None:
                    raise bad_type("Module.to", "dtype", arg, "one dtype")
                dtype = arg
        if dtype is None:
            return self
        dtype = resolve_dtype("Module.to", dtype, floats_only=True)
        if not device.active().supports(dtype):
            raise ArgumentTypeError(f"Module.to: the {device.active().name} backend has no "
                                    f"{dtype} tensors")
        for t in self._state_tensors().values():
            if is_floating(t.dtype) and t.dtype != dtype:
                value = host_array("Module.to", "dtype", t.numpy(), dtype)
                t.dtype, t.grad = dtype, None
                set_host_data(t, value, "Module.to")   # (moved to the device at first use)
        return self

    def float(self):
        """``to("float32")``."""
        return self.to(np.float32)

    def cpu(self):
        """The module itself: it lives on the active backend, whose values ``numpy()``
        reads on the host (as after PyTorch's ``cpu()``)."""
        return self.to("cpu")

    def cuda(self, device=None):
        """The module itself where the gpu backend is active (else an error saying how to
        select it): it lives on the active backend."""
        return self.to("cuda")

    def double(self):
        """``to("float64")`` (the cpu backend)."""
        return self.to(np.float64)

    def half(self):
        """``to("float16")``."""
        return self.to(np.float16)

    def bfloat16(self):
        """``to("bfloat16")``."""
        return self.to("bfloat16")

    # -- modes --------------------------------------------------------------------------------
    def train(self, mode: bool = True):
        """Set training mode (Dropout active) on this module and its children."""
        for _, m in self.named_modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        """Set evaluation mode (Dropout is the identity)."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: to None, or (``set_to_none=False``) to zeros
        in place, as PyTorch's."""
        if checks.flag("zero_grad", "set_to_none", set_to_none):
            for p in self.parameters():
                p.grad = None
            return
        backend = device.active()
        for p in self.parameters():
            if p.grad is not None:
                backend.fill(handle(backend, p.grad), 0.0)
                p.grad.written()

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({name}): " + repr(m).replace("\n", "\n  ")
                        for name, m in self._modules.items())
        return f"{type(self).__name__}({self.extra_repr()}{inner}{chr(10) if inner else ''})"

    def extra_repr(self) -> str:
        """The module's own settings, shown in its repr."""
        return ""


def _uniform(bound: float, shape: tuple) -> np.ndarray:
    """U(-bound, bound) drawn in float32 (no float64 copy of a large layer)."""
    u = random.generator().random(shape, dtype=np.float32)
    return u * np.float32(2 * bound) - np.float32(bound)


class Linear(Module):
    """y = x @ weight.T + bias; weight (out, in) and bias initialised from
    U(-1/sqrt(in), 1/sqrt(in)) as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.in_features = checks.integer("Linear", "in_features", in_features, 1)
        self.out_features = checks.integer("Linear", "out_features", out_features, 1)
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight = ag_param(_uniform(bound, (self.out_features, self.in_features)))
        self.bias = ag_param(_uniform(bound, (self.out_features,))) if bias else None

    def forward(self, x) -> Tensor:
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Sequential(Module):
    """Modules applied in order. A ``Linear`` followed by a ``ReLU`` runs as one
    ``linear(..., activation="relu")`` (the same values and gradients, one kernel fewer)."""

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise bad_type("Sequential", f"modules[{i}]", m, "a dg.nn.Module")
            setattr(self, str(i), m)

    def forward(self, x):
        modules = list(self._modules.values())
        i = 0
        while i < len(modules):
            m = modules[i]
            if (type(m) is Linear and i + 1 < len(modules)    # (not subclasses: they may
                    and type(modules[i + 1]) is ReLU  # noqa: F821 (made below)
                    and not _hooked(m) and not _hooked(modules[i + 1])):   # (hooks see both)
                x = ops.linear(x, m.weight, m.bias, activation="relu")
                i += 2
                continue
            x = m(x)
            i += 1
        return x

    def __getitem__(self, i):
        """The i-th module, or for a slice a Sequential of those modules (as PyTorch's)."""
        modules = list(self._modules.values())
        return Sequential(*modules[i]) if isinstance(i, slice) else modules[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        """Add ``module`` at the end; returns self."""
        if not isinstance(module, Module):
            raise bad_type("Sequential.append", "module", module, "a dg.nn.Module")
        setattr(self, str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """Modules held in a list, registered as "0", "1", ... (their parameters train and are
    checkpointed); indexing, ``len``, iteration, ``append``, ``extend``. It has no forward:
    the model calls its modules."""

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    def append(self, module: Module) -> "ModuleList":
        if not isinstance(module, Module):
            raise bad_type("ModuleList", f"modules[{len(self)}]", module, "a dg.nn.Module")
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(items[i])
        return items[checks.integer("ModuleList", "index", i, -len(items), len(items))]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """Modules held by name (their parameters train and are checkpointed under that name);
    ``d[name]``, ``d[name] = module``, ``in``, ``len``, ``keys``, ``values``, ``items``, in
    insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        for name, m in (dict(modules) if modules is not None else {}).items():
            self[name] = m

    def __setitem__(self, name: str, module: Module) -> None:
        if not isinstance(name, str) or not name or "." in name:
            raise bad_value("ModuleDict", "name", name, "a non-empty string without '.'")
        if not isinstance(module, Module):
            raise bad_type("ModuleDict", name, module, "a dg.nn.Module")
        setattr(self, name, module)

    def __getitem__(self, name: str) -> Module:
        if name not in self._modules:
            raise KeyError(name)
        return self._modules[name]

    def __contains__(self, name) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


class Identity(Module):
    """Returns its input (a placeholder layer; arguments are accepted and ignored, as in
    PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """``flatten(x, start_dim, end_dim)``: by default every axis but the batch's merged."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = checks.integer("Flatten", "start_dim", start_dim)
        self.end_dim = checks.integer("Flatten", "end_dim", end_dim)

    def forward(self, x):
        return flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Axis ``dim`` split into ``unflattened_size`` (one entry may be -1), as PyTorch's."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = checks.integer("Unflatten", "dim", dim)
        try:
            sizes = tuple(unflattened_size)
        except TypeError:
            raise bad_type("Unflatten", "unflattened_size", unflattened_size,
                           "a tuple of sizes") from None
        if not sizes:
            raise bad_value("Unflatten", "unflattened_size", unflattened_size,
                            "at least one size")
        self.unflattened_size = tuple(checks.integer("Unflatten", "unflattened_size", n, -1)
                                      for n in sizes)

    def forward(self, x):
        x = ops._tensor("Unflatten", "x", x, any_dtype=True, low_precision=True)
        if not -x.ndim <= self.dim < x.ndim:
            raise AxisOutOfRange(f"Unflatten: dim {self.dim} is out of range for an input "
                                 f"of shape {x.shape}")
        d = self.dim % x.ndim
        sizes = self.unflattened_size
        known = math.prod(n for n in sizes if n != -1)
        if sizes.count(-1) > 1 or (x.shape[d] != known if -1 not in sizes else
                                   known == 0 or x.shape[d] % known):
            raise bad_value("Unflatten", "unflattened_size", sizes,
                            f"sizes whose product is {x.shape[d]}, the length of dim "
                            f"{self.dim} of the input's shape {x.shape} (one may be -1)")
        return ops.reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _Softmax(Module):
    """A softmax-like op along ``dim`` (PyTorch's choice from the rank where None)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = None if dim is None else checks.integer(type(self).__name__, "dim", dim)

    def forward(self, x):
        from . import functional
        return getattr(functional, self.function)(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_Softmax):
    """``softmax(x, dim)``."""
    function = "softmax"


class LogSoftmax(_Softmax):
    """``log_softmax(x, dim)``."""
    function = "log_softmax"


class Softmin(_Softmax):
    """``softmax(-x, dim)``."""
    function = "softmin"


class _ParameterType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Parameter)


class NNParameter(metaclass=_ParameterType):    # (dg.nn.Parameter)
    """``dg.nn.Parameter(data, requires_grad=True)``, as PyTorch's: a trainable copy of
    ``data`` (an array or a tensor), made by ``ag_param`` (its class is ``dg.Parameter``,
    which ``isinstance(p, dg.nn.Parameter)`` also recognises)."""

    def __new__(cls, data=None, requires_grad: bool = True):
        flag = checks.flag("Parameter", "requires_grad", requires_grad)
        if data is None:
            data = np.zeros(0, np.float32)
        dtype = None
        if isinstance(data, Tensor):
            dtype, data = data.dtype, data.numpy()
        p = ag_param(data, dtype=dtype)
        p.requires_grad = flag
        return p


NNParameter.__name__ = NNParameter.__qualname__ = "Parameter"


def _activation(op: KernelOp) -> type:
    """``dg.nn.<op.layer>``: a module applying the public unary op ``op`` (its registry
    entry in ``dualgrad.kernel_ops`` names the layer)."""
    name = op.name

    def forward(self, x):
        return getattr(ops, name)(x)
    return type(op.layer, (Module,), {"forward": forward, "__doc__": op.doc,
                                      "__module__": __name__, "__qualname__": op.layer})


# ReLU GELU Sigmoid Tanh ... : a module for each unary op whose entry names a layer.
ACTIVATIONS = tuple(op.layer for op in UNARY if op.layer)
for _op in UNARY:
    if _op.layer:
        globals()[_op.layer] = _activation(_op)


class Softplus(Module):
    """``softplus(x, beta, threshold)``: log(1 + e**(beta x)) / beta, x itself where beta x
    > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = checks.number("Softplus", "beta", beta)
        self.threshold = checks.number("Softplus", "threshold", threshold)
        if self.beta == 0.0:
            raise bad_value("Softplus", "beta", beta, "a nonzero number")

    def forward(self, x):
        return ops.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """``hardtanh(x, min_val, max_val)``: x limited to [min_val, max_val]."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val, self.max_val = ops.hardtanh_bounds("Hardtanh", min_val, max_val)

    def forward(self, x):
        return ops.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class GELU(Module):
    """``gelu(x, approximate)``: x * Phi(x), exact or by its tanh form."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        ops.gelu_op("GELU", approximate)
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """``leaky_relu(x, negative_slope)``: x, or negative_slope * x below 0."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = checks.number("LeakyReLU", "negative_slope", negative_slope)

    def forward(self, x):
        return ops.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """``elu(x, alpha)``: x, or alpha * (e**x - 1) below 0."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = checks.number("ELU", "alpha", alpha)

    def forward(self, x):
        return ops.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class CELU(Module):
    """``celu(x, alpha)``: x, or alpha * (e**(x / alpha) - 1) below 0."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = ops.celu_alpha("CELU", alpha)

    def forward(self, x):
        return ops.celu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class ReLU6(Module):
    """``relu6(x)``: min(max(x, 0), 6)."""

    def forward(self, x):
        return ops.relu6(x)


class PReLU(Module):
    """``prelu(x, weight)``: ``num_parameters`` slopes (1, or one a channel), starting at
    ``init``, as PyTorch's."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25):
        super().__init__()
        self.num_parameters = checks.integer("PReLU", "num_parameters", num_parameters, 1)
        value = checks.number("PReLU", "init", init)
        self.weight = ag_param(np.full(self.num_parameters, value, np.float32))

    def forward(self, x):
        from .pointwise import prelu
        return prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _Shrink(Module):
    """A shrinkage with ``lambd``."""

    function = "hardshrink"

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = checks.number(type(self).__name__, "lambd", lambd, 0.0)

    def forward(self, x):
        from . import pointwise
        return getattr(pointwise, self.function)(x, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """``hardshrink(x, lambd)``: x where |x| > lambd, else 0."""
    function = "hardshrink"


class Softshrink(_Shrink):
    """``softshrink(x, lambd)``: x shrunk toward 0 by lambd, 0 within it."""
    function = "softshrink"


class Tanhshrink(Module):
    """``tanhshrink(x)``: x - tanh(x)."""

    def forward(self, x):
        from .pointwise import tanhshrink
        return tanhshrink(x)


class Threshold(Module):
    """``threshold(x, threshold, value)``: x above the threshold, else value."""

    def __init__(self, threshold: float, value: float):
        super().__init__()
        self.threshold = checks.number("Threshold", "threshold", threshold)
        self.value = checks.number("Threshold", "value", value)

    def forward(self, x):
        from .pointwise import threshold
        return threshold(x, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class GLU(Module):
    """``glu(x, dim)``: the first half along ``dim`` times the sigmoid of the second."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = checks.integer("GLU", "dim", dim)

    def forward(self, x):
        from .functional import glu
        return glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Bilinear(Module):
    """y = x1 . weight . x2 + bias: weight (out, in1, in2) and bias from
    U(-1/sqrt(in1), 1/sqrt(in1)), as PyTorch's."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True):
        super().__init__()
        fn = "Bilinear"
        self.in1_features = checks.integer(fn, "in1_features", in1_features, 1)
        self.in2_features = checks.integer(fn, "in2_features", in2_features, 1)
        self.out_features = checks.integer(fn, "out_features", out_features, 1)
        bound = 1.0 / math.sqrt(self.in1_features)
        self.weight = ag_param(_uniform(bound, (self.out_features, self.in1_features,
                                                self.in2_features)))
        self.bias = ag_param(_uniform(bound, (self.out_features,))) \
            if checks.flag(fn, "bias", bias) else None

    def forward(self, x1, x2):
        from .functional import bilinear
        return bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class ParameterList(Module):
    """Parameters held in a list, registered as "0", "1", ... (they train and are
    checkpointed); an array or a tensor given becomes a Parameter, as in PyTorch. Indexing,
    ``len``, iteration, ``append``, ``extend``."""

    def __init__(self, values=()):
        super().__init__()
        self.extend(values)

    def append(self, value) -> "ParameterList":
        setattr(self, str(len(self)), _as_parameter("ParameterList", f"values[{len(self)}]",
                                                    value))
        return self

    def extend(self, values) -> "ParameterList":
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, i):
        items = list(self._parameters.values())
        return items[checks.integer("ParameterList", "index", i, -len(items), len(items))]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class ParameterDict(Module):
    """Parameters held by name (they train and are checkpointed under it); ``d[name]``,
    ``d[name] = value`` (an array or tensor becomes a Parameter), ``in``, ``len``, ``keys``,
    ``values``, ``items``, in insertion order."""

    def __init__(self, parameters=None):
        super().__init__()
        for name, value in (dict(parameters) if parameters is not None else {}).items():
            self[name] = value

    def __setitem__(self, name: str, value) -> None:
        if not isinstance(name, str) or not name or "." in name:
            raise bad_value("ParameterDict", "name", name, "a non-empty string without '.'")
        setattr(self, name, _as_parameter("ParameterDict", name, value))

    def __getitem__(self, name: str):
        if name not in self._parameters:
            raise KeyError(name)
        return self._parameters[name]

    def __contains__(self, name) -> bool:
        return name in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()


def _as_parameter(fn: str, name: str, value) -> Parameter:
    """A Parameter as it is, else a new one holding the value (an array or a tensor)."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return ag_param(value.numpy(), dtype=value.dtype)
    if isinstance(value, (np.ndarray, list, tuple)) or checks.is_number(value):
        return ag_param(value)
    raise bad_type(fn, name, value, "a Parameter, a tensor or an array")


def layer_norm_over(x, normalized_shape: tuple, weight, bias, eps: float,
                    fn: str = "LayerNorm") -> Tensor:
    """Layer norm (``fn``, named in errors) over the trailing axes ``normalized_shape``
    (checked sizes) taken together, scaled by ``weight`` and shifted by ``bias`` of that
    shape where given (ones made on the device where no weight is; no shift where no bias
    is)."""
    shape, size = normalized_shape, math.prod(normalized_shape)
    if len(shape) == 1 and weight is not None:        # the common case, as it is
        return ops.layer_norm(x, weight, bias, eps)
    x = ops._tensor(fn, "x", x, low_precision=True)
    if tuple(x.shape[x.ndim - len(shape):]) != shape or x.ndim < len(shape):
        raise bad_shape(fn, "x", x.shape, f"trailing axes {shape}")
    dtype = weight.dtype if weight is not None else np.float32
    weight = ops._constant((size,), 1.0, dtype) if weight is None else \
        ops.reshape(weight, (size,))
    bias = None if bias is None else ops.reshape(bias, (size,))
    flat = ops.reshape(x, x.shape[:x.ndim - len(shape)] + (size,))
    return ops.reshape(ops.layer_norm(flat, weight, bias, eps), x.shape)


def lookup(weight, indices, padding_idx=None) -> Tensor:
    """Rows of the table ``weight`` at ``indices``; the row ``padding_idx`` (checked, in
    [0, rows)) read as a constant, so it takes no gradient, as PyTorch's."""
    rows = ops.embedding(weight, indices)
    if padding_idx is None:
        return rows
    # the padding row's lookups as a constant copy (no gradient flows to the table)
    backend = device.active()
    copied = backend.empty(tuple(rows.shape), rows.dtype)
    backend.copy(copied, handle(backend, rows))
    constant = adopt(backend, Tensor(rows.shape, rows.dtype), copied)
    return where(unsqueeze(eq(indices, padding_idx), -1), constant, rows)


class LayerNorm(Module):
    """Normalises the trailing axes ``normalized_shape`` (an int: the last axis; a tuple:
    that many trailing axes, taken together), then scales by ``weight`` (ones) and shifts
    by ``bias`` (zeros), as PyTorch's: no bias with ``bias=False``, neither with
    ``elementwise_affine=False``."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True):
        super().__init__()
        fn = "LayerNorm"
        dims = normalized_shape if isinstance(normalized_shape, (tuple, list)) else \
            (normalized_shape,)
        if not dims:
            raise bad_value(fn, "normalized_shape", normalized_shape, "at least one size")
        self.normalized_shape = tuple(checks.integer(fn, "normalized_shape", n, 1)
                                      for n in dims)
        self.eps = checks.number(fn, "eps", eps, 0.0, lo_open=True)
        affine = checks.flag(fn, "elementwise_affine", elementwise_affine)
        with_bias = checks.flag(fn, "bias", bias)
        self.weight = ag_param(np.ones(self.normalized_shape, np.float32)) if affine else None
        self.bias = ag_param(np.zeros(self.normalized_shape, np.float32)) \
            if affine and with_bias else None

    def forward(self, x):
        return layer_norm_over(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        shape = self.normalized_shape[0] if len(self.normalized_shape) == 1 else \
            self.normalized_shape
        return f"{shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim`` (initialised from
    N(0, 1) as in PyTorch), looked up by integer index arrays. With ``padding_idx`` (as
    PyTorch's), that row starts at zeros and takes no gradient: its lookups read it as a
    constant."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None):
        super().__init__()
        fn = "Embedding"
        self.num_embeddings = checks.integer(fn, "num_embeddings", num_embeddings, 1)
        self.embedding_dim = checks.integer(fn, "embedding_dim", embedding_dim, 1)
        if padding_idx is not None:
            padding_idx = checks.integer(fn, "padding_idx", padding_idx, -self.num_embeddings,
                                         self.num_embeddings) % self.num_embeddings
        self.padding_idx = padding_idx
        table = random.generator().standard_normal((self.num_embeddings, self.embedding_dim),
                                                   dtype=np.float32)
        if padding_idx is not None:
            table[padding_idx] = 0.0
        self.weight = ag_param(table)

    def forward(self, indices):
        return lookup(self.weight, indices, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None,
                        max_norm=None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, sparse: bool = False):
        """An Embedding holding a copy of ``embeddings`` (rows, dim), frozen (no gradient)
        unless ``freeze`` is False, as PyTorch's. ``max_norm``, ``scale_grad_by_freq`` and
        ``sparse`` are not offered."""
        fn = "Embedding.from_pretrained"
        for name, value, default in (("max_norm", max_norm, None),
                                     ("scale_grad_by_freq", scale_grad_by_freq, False),
                                     ("sparse", sparse, False)):
            if value is not default and value != default:
                raise bad_value(fn, name, value, f"{default!r} (not offered)")
        table = embeddings.numpy() if isinstance(embeddings, Tensor) else \
            host_array(fn, "embeddings", embeddings)
        if table.ndim != 2:
            raise bad_shape(fn, "embeddings", table.shape, "(rows, dim)")
        layer = cls(table.shape[0], table.shape[1], padding_idx)
        store_weight(layer.weight, table.astype(layer.weight.dtype))
        layer.weight.requires_grad = not checks.flag(fn, "freeze", freeze)
        return layer

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Dropout(Module):
    """In training mode, zeroes each element with probability ``p`` and scales the rest by
    1/(1-p); the identity in eval mode. Each call in training mode draws a fresh mask: the
    module keeps a seed (from dualgrad's generator) and a call counter, both checkpointed."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = checks.number("Dropout", "p", p, 0.0, 1.0)
        self.seed = int(random.generator().integers(0, 2 ** 63))
        self.step = 0

    def forward(self, x):
        if not self.training or self.p == 0.0:
            # A step recorded in eval mode fits only eval mode.
            capture.on_replay(lambda: (self.training, self.p))
            return x
        recorded = (self.seed, self.step)
        out = self._drop(x)
        if ops.recomputing():            # (the first run's draw, already counted)
            return out
        self.step += 1
        # A replayed step draws the next mask: the recorded kernel reads seed and step
        # from a slot rewritten here.
        capture.on_replay(lambda: (self.training, self.p), lambda: self._replayed(recorded))
        return out

    def _drop(self, x):
        return ops.dropout(x, self.p, self.seed, self.step)

    def _replayed(self, recorded: tuple) -> None:
        device.active().replay_dropout(recorded, self.seed, self.step)
        self.step += 1

    def _own_extra_state(self) -> dict:
        return {"seed": self.seed, "step": self.step}

    def _set_own_extra_state(self, value: dict) -> None:
        self.seed, self.step = int(value["seed"]), int(value["step"])

    def extra_repr(self) -> str:
        return f"p={self.p}"


class _ChannelDropout(Dropout):
    """Dropout of whole channels: each (sample, channel) kept or zeroed as one, as
    PyTorch's Dropout1d / Dropout2d: a mask of shape (N, C, 1, ...) dropped out, times x."""

    spatial = 2

    def _drop(self, x):
        x, ones = channel_ones(type(self).__name__, "x", x, self.spatial)
        return ops.mul(x, ops.dropout(ones, self.p, self.seed, self.step))


def channel_ones(fn: str, name: str, x, spatial: int) -> tuple:
    """(x, checked as (N, C, ...) or (C, ...) with ``spatial`` trailing axes; ones of its
    channels' shape (N, C, 1, ...), made on the device): what a channel dropout drops out
    and multiplies x by."""
    x = ops._tensor(fn, name, x, low_precision=True)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise bad_shape(fn, name, x.shape, f"{spatial + 2}-D (N, C, ...) or {spatial + 1}-D "
                        "(C, ...)")
    lead = x.ndim - spatial
    return x, ops._constant(x.shape[:lead] + (1,) * spatial, 1.0, x.dtype)


class Dropout1d(_ChannelDropout):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs with probability ``p``, scaling
    the rest by 1 / (1 - p), in training mode."""
    spatial = 1


class Dropout2d(_ChannelDropout):
    """Zeroes whole channels of (N, C, H, W) or (C, H, W) inputs with probability ``p``,
    scaling the rest by 1 / (1 - p), in training mode."""
    spatial = 2


__all__ = ["Module", "Linear", "Sequential", "ModuleList", "ModuleDict", "Identity", "Flatten",
           *ACTIVATIONS, "GELU", "LeakyReLU", "ELU", "CELU",
           "Hardtanh", "ReLU6", "LayerNorm",
           "Embedding", "Dropout", "Unflatten", "Softmax", "LogSoftmax", "Softmin",
           "Dropout1d", "Dropout2d", "PReLU", "ParameterList", "ParameterDict", "Hardshrink",
           "Softshrink", "Tanhshrink", "Threshold", "GLU", "Bilinear"]
