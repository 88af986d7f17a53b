"""``safe_call``: call a model with the keys of dicts matched to its parameter names.

Frames never call a model positionally: they hold named data (a sampled ``state`` dict, an ``action`` dict) and
let :func:`safe_call` pick the entries the model's method asks for, move them to the model's input device, and
move the result to its output device. A model declares what it needs by naming its ``forward`` parameters, as in
Machin::

    class Critic(nn.Module):
        def forward(self, entities, visible=None): ...

    value = safe_call(critic, state)  # state = {"entities": ..., "visible": ..., "action_masks": ...}

Devices, decided at every call (nothing is cached, so ``model.to(...)`` is always honoured):

* explicit ``input_device`` / ``output_device`` attributes that a user set on the model win (Machin's
  convention; ``None`` counts as unset);
* otherwise the single device of the module's parameters and buffers, or, if it has none, the explicit
  attribute that is set, or the CPU; parameters on several devices need both attributes (``RuntimeError``);
* an explicit attribute naming a CUDA device that this torch build or machine lacks raises ``RuntimeError``
  naming the model and attribute (checked once per value, not per call);
* a callable that is not a module (a plain function, a ``functools.partial``) gets no device moves at all
  unless it has the attributes. A bound method of a module (``safe_call(net.value, state)``) uses its
  module's devices.

What moves: tensors and ``RaggedTensor``s, recursively through dicts (``arrdict`` and other dict subclasses
keep their type), lists and tuples (NamedTuples keep their type). On the way in, ragged array values become
``RaggedTensor``s on the input device. Numpy arrays and every other object pass through untouched (as in
Machin); a model that wants tensors converts them itself. Only the entries the method receives are moved;
extra keys are ignored.
"""
from __future__ import annotations

import copy
import inspect
import types
import weakref
from collections.abc import Mapping
from itertools import chain
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import torch
from torch import nn

from entmachin.model.input_norm import collecting_stats_of
from entmachin.model.wrappers import unwrap
from entmachin.ragged.arrays import is_ragged_array
from entmachin.ragged.arrdict import arrdict
from entmachin.ragged.device import check_device
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor

__all__ = ["safe_call", "model_devices"]

_EMPTY = inspect.Parameter.empty


class _Signature(NamedTuple):
    """What ``safe_call`` needs to know about one method, computed once."""

    where: str  # the method's name in error messages, such as "Critic.forward"
    source: Any  # the attribute it was read from; a different one invalidates the entry
    positional: Tuple[Tuple[str, Any], ...]  # positional-only (name, default), in order
    named: Tuple[str, ...]  # parameters that can be passed by keyword, in order
    required: frozenset  # parameters without a default (positional-only included)
    var_keyword: bool  # the method has ``**kwargs``: it receives the extra keys


# (class, attribute name) -> _Signature. Other callables are cached by identity: functions in _BY_FUNCTION,
# bound methods by their function in _BY_METHOD (without ``self``).
_BY_CLASS: Dict[Tuple[type, str], _Signature] = {}
_BY_FUNCTION: "weakref.WeakKeyDictionary[Any, _Signature]" = weakref.WeakKeyDictionary()
_BY_METHOD: "weakref.WeakKeyDictionary[Any, _Signature]" = weakref.WeakKeyDictionary()


def _read_signature(fn: Callable, source: Any, where: str) -> _Signature:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError(f"safe_call: cannot read the parameters of {where} ({e}); TorchScript and builtin "
                        "callables have no Python signature: wrap them in a Python function or module") from e
    positional, named, required, var_keyword = [], [], set(), False
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_keyword = True
        elif p.kind is not p.VAR_POSITIONAL:  # *args is never fed by name
            if p.kind is p.POSITIONAL_ONLY:
                positional.append((p.name, p.default))
            else:
                named.append(p.name)
            if p.default is _EMPTY:
                required.add(p.name)
    return _Signature(where, source, tuple(positional), tuple(named), frozenset(required), var_keyword)


def _method_signature(obj: Any, name: str) -> _Signature:
    """The signature of ``obj.<name>`` (without ``self``), cached per (class, name)."""
    cls = type(obj)
    instance_dict = getattr(obj, "__dict__", None)
    if instance_dict is not None and name in instance_dict:  # set on the instance: not cacheable
        return _read_signature(instance_dict[name], None, f"{cls.__name__}.{name}")
    source = getattr(cls, name, None)
    if source is None:
        raise AttributeError(f"safe_call: {cls.__name__} has no method {name!r}")
    cached = _BY_CLASS.get((cls, name))
    if cached is None or cached.source != source:  # first use, or the class was patched
        cached = _BY_CLASS[(cls, name)] = _read_signature(getattr(obj, name), source, f"{cls.__name__}.{name}")
    return cached


def _callable_signature(fn: Any) -> _Signature:
    """Signature of a callable that is not a module (function, bound method, partial, ...)."""
    where = getattr(fn, "__qualname__", None) or type(fn).__name__
    cache, key = (_BY_METHOD, fn.__func__) if isinstance(fn, types.MethodType) else (_BY_FUNCTION, fn)
    try:
        cached = cache.get(key)
    except TypeError:  # not weak-referenceable or not hashable: inspect every time
        return _read_signature(fn, None, where)
    if cached is None:
        cached = cache[key] = _read_signature(fn, None, where)
    return cached


# ------------------------------------------------------------------------------- devices

# Explicit device values already checked by check_device: a Machin-style ``input_device`` costs a lookup per call.
_CHECKED: Dict[Any, torch.device] = {}
_WALK_BUDGET = 100_000  # modules _tensor_devices walks before it suspects a cycle


def _explicit_device(obj: Any, name: str) -> Optional[torch.device]:
    instance_dict = getattr(obj, "__dict__", None)
    if instance_dict is not None and name in instance_dict:
        value = instance_dict[name]
    else:  # a class attribute or a property, looked up every call: a class may gain it later
        value = getattr(obj, name) if hasattr(type(obj), name) else None
    if value is None:
        return None
    try:
        return _CHECKED[value]
    except (KeyError, TypeError):  # not seen yet, or unhashable
        pass
    device = check_device(value, f"safe_call: {type(obj).__name__}.{name}")
    if len(_CHECKED) < 64:
        _CHECKED[value] = device
    return device


def _tensor_devices(module: nn.Module) -> List[torch.device]:
    """The distinct devices of a module's parameters and buffers, in first-seen order.

    Walks the ``_modules`` dicts directly: several times faster than ``parameters()`` and ``buffers()`` (it
    runs at every call). A submodule reached twice is read twice (same devices); a tree larger than any real
    model (a module that contains itself) is walked again with ``modules()``, which visits each module once.
    """
    devices: List[torch.device] = []
    stack = [module]
    for _ in range(_WALK_BUDGET):
        if not stack:
            return devices
        m = stack.pop()
        for t in chain(m._parameters.values(), m._buffers.values()) if m._buffers else m._parameters.values():
            if t is not None and (d := t.device) not in devices:
                devices.append(d)
        if m._modules:  # skips leaves: an empty extend costs more than this test
            stack.extend(m._modules.values())
    tensors = chain.from_iterable(chain(m._parameters.values(), m._buffers.values()) for m in module.modules())
    return list(dict.fromkeys(t.device for t in tensors if t is not None))


def model_devices(model: Any) -> Tuple[Optional[torch.device], Optional[torch.device]]:
    """Returns the ``(input_device, output_device)`` that :func:`safe_call` uses for ``model``, by the rules of
    this module's docstring; ``None`` means "do not move". Wrappers (``DataParallel``, ...) are looked through.

    Raises:
        RuntimeError: parameters on several devices without both explicit attributes, or an unavailable CUDA device.
        ValueError: an explicit attribute is not a device.
    """
    return _devices(unwrap(model))


def _devices(inner: Any) -> Tuple[Optional[torch.device], Optional[torch.device]]:
    if isinstance(inner, types.MethodType) and isinstance(inner.__self__, nn.Module):
        inner = inner.__self__  # net.value: the devices of net
    explicit_in, explicit_out = _explicit_device(inner, "input_device"), _explicit_device(inner, "output_device")
    if explicit_in is not None and explicit_out is not None:
        return explicit_in, explicit_out
    auto = explicit_in or explicit_out  # a torch.device is never falsy; None: a plain callable is not moved
    if isinstance(inner, nn.Module):
        devices = _tensor_devices(inner)
        if len(devices) > 1:
            raise RuntimeError(f"safe_call: {type(inner).__name__} has parameters on several devices "
                               f"{[str(d) for d in devices]}; set both model.input_device and model.output_device "
                               "to say where its inputs go and where its outputs come back")
        auto = devices[0] if devices else auto or torch.device("cpu")
    return explicit_in or auto, explicit_out or auto


def _move(value: Any, device: Optional[torch.device], inputs: bool) -> Any:
    """Moves tensors and ragged tensors in ``value`` to ``device`` (None: not moved); unchanged values
    keep identity. ``inputs``: ragged arrays become ``RaggedTensor``s."""
    if device is None:
        return value
    if isinstance(value, (torch.Tensor, RaggedTensor)):
        return value if value.device == device else value.to(device)
    if isinstance(value, dict):
        moved = {k: _move(v, device, inputs) for k, v in value.items()}
        if all(moved[k] is v for k, v in value.items()):
            return value
        if type(value) is dict:
            return moved
        if isinstance(value, arrdict):
            return arrdict(moved)
        out = copy.copy(value)  # OrderedDict, defaultdict, subclasses: keep the type and extras
        out.update(moved)
        return out
    if isinstance(value, (list, tuple)):
        if all(type(v) is torch.Tensor and v.device == device for v in value):
            return value  # the usual result: a tuple of tensors on the output device
        moved_items = [_move(v, device, inputs) for v in value]
        if all(a is b for a, b in zip(moved_items, value)):
            return value
        if hasattr(value, "_make"):  # NamedTuple
            return value._make(moved_items)
        return type(value)(moved_items)  # list, tuple, torch.Size, torch.return_types, subclasses
    if inputs and is_ragged_array(value):
        return to_ragged_tensor(value, device, "safe_call")
    return value


# ---------------------------------------------------------------------------- safe_call

def safe_call(model: Any, *named_dicts: Mapping[str, Any], method: str = "__call__") -> Any:
    """Calls ``model.<method>`` with the entries of ``named_dicts`` that its parameters name.

    Args:
        model: an ``nn.Module`` (possibly wrapped in ``DataParallel`` / ``DistributedDataParallel``) or any
            Python callable.
        *named_dicts: mappings from parameter names to values; when several hold a key, the later one wins.
            Keys that name no parameter are ignored, unless the method takes ``**kwargs``, which receives them.
        method: the method to call. ``"__call__"`` calls the model itself (hooks and wrappers run) with the
            parameters of its ``forward``; any other name is called on the wrapped module.

    Returns:
        The method's result unchanged, except that tensors and ``RaggedTensor``s in it (also inside tuples,
        NamedTuples, lists and dicts) are on the output device.

    Raises:
        TypeError: a required parameter has no entry (the message lists the missing names, the accepted names
            and the keys offered), an argument is not a mapping, or the method has no readable signature.
        AttributeError: the model has no such method.
        RuntimeError / ValueError: the devices cannot be decided (see :func:`model_devices`).

    Example:
        >>> actor = MLPActor(4, 2)
        >>> action, log_prob, entropy = safe_call(actor, {"state": torch.zeros(3, 4)})
    """
    inner, fn = unwrap(model), model  # "__call__" goes through the wrapper and the module's hooks
    if method != "__call__":
        sig, fn = _method_signature(inner, method), getattr(inner, method)
    else:
        sig = _method_signature(inner, "forward") if isinstance(inner, nn.Module) else _callable_signature(model)

    if len(named_dicts) == 1 and (type(named_dicts[0]) is dict or isinstance(named_dicts[0], Mapping)):
        merged = named_dicts[0]
    else:
        merged = {}
        for i, d in enumerate(named_dicts):
            if not isinstance(d, Mapping):
                raise TypeError(f"safe_call({sig.where}): argument {i + 1} after the model is a "
                                f"{type(d).__name__}; expected a mapping from parameter names to values")
            merged.update(d)
    input_device, output_device = _devices(inner)  # model_devices(model) without unwrapping twice
    args, kwargs, missing = [], {}, []
    for name, default in sig.positional:
        if name in merged:
            args.append(_move(merged[name], input_device, True))
        elif default is _EMPTY:
            missing.append(name)
        else:
            args.append(default)
    for name in sig.named:
        if name in merged:
            kwargs[name] = _move(merged[name], input_device, True)
        elif name in sig.required:
            missing.append(name)
    if missing:
        accepted = [n for n, _ in sig.positional] + list(sig.named)
        raise TypeError(f"safe_call({sig.where}): missing required parameter(s) {missing}; it accepts "
                        f"{accepted}{' and **kwargs' if sig.var_keyword else ''}; the dicts offer "
                        f"{sorted(map(str, merged))}. Store the missing keys in the transition's dicts, "
                        "or give the parameters defaults")
    if sig.var_keyword:
        taken = set(kwargs).union(n for n, _ in sig.positional)
        kwargs.update((key, _move(value, input_device, True)) for key, value in merged.items() if key not in taken)
    return _move(fn(*args, **kwargs), output_device, False)


def accepts(model: Any, parameter: str) -> bool:
    """Whether the model's ``forward`` (a callable's signature) takes ``parameter`` (or ``**kwargs``)."""
    inner = unwrap(model)
    fn = inner.forward if isinstance(inner, nn.Module) else inner
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return parameter in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class ActorCriticCalls:
    """How an actor-critic frame (``A2C``, ``PPO``, ``BC``) calls its networks through :func:`safe_call`: acting
    without gradients, scoring given actions, the critic's value, both in one pass of a shared network, and
    the unroll length of a network with memory (``_sequence``: ``{}``, or ``{"sequence_length": L}`` while an
    update trains on sequences)."""

    def act(self, state: Mapping[str, Any], deterministic: bool = False, *, collect_stats: bool = True) -> Any:
        """Runs the actor on ``state`` without gradients and returns its result unchanged.

        Running input statistics of the actor learn from ``state`` (``collecting_stats``)
        unless ``collect_stats=False`` (evaluation).

        Raises:
            TypeError: ``deterministic=True`` but the actor's forward has no ``deterministic``.
        """
        extra: Dict[str, Any] = {}
        if deterministic:
            if not self._takes_deterministic:
                raise TypeError(
                    f"{type(self).__name__}.act: deterministic=True, but {type(self.actor).__name__}.forward "
                    "takes no 'deterministic' parameter"
                )
            extra["deterministic"] = True
        if collect_stats and self._actor_norms:
            with torch.no_grad(), collecting_stats_of(self._actor_norms):
                return safe_call(self.actor, state, extra) if extra else safe_call(self.actor, state)
        with torch.no_grad():  # no context to enter on the fast path: this runs once per environment step
            return safe_call(self.actor, state, extra) if extra else safe_call(self.actor, state)

    def eval_act(self, state: Mapping[str, Any], action: Mapping[str, Any]) -> Any:
        """Scores ``action`` in ``state`` with the actor (with gradients); returns its result."""
        if self._sequence:
            return safe_call(self.actor, state, action, self._sequence)
        return safe_call(self.actor, state, action)

    def criticize(self, state: Mapping[str, Any]) -> torch.Tensor:
        """The critic's value of ``state``, ``[B, 1]`` (the first element if it returns a tuple)."""
        return self._value_of(safe_call(self.critic, state, self._sequence) if self._sequence else
                              safe_call(self.critic, state))

    def _eval_act_and_criticize(self, state: Mapping[str, Any], action: Mapping[str, Any]) -> Tuple[Any, torch.Tensor]:
        """``(eval_act(state, action), criticize(state))``, in one pass of a shared network
        when the critic is a view of the actor (see the class docstring)."""
        if not self._joint:
            return self.eval_act(state, action), self.criticize(state)
        result, value = safe_call(self.actor, state, action, self._sequence, method="forward_with_value")
        return result, self._value_of(value)

    def _value_of(self, value: Any) -> torch.Tensor:
        if isinstance(value, (tuple, list)):
            value = value[0]
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{type(self).__name__}.criticize: the critic returned a {type(value).__name__}; expected "
                "a tensor [B, 1] or a tuple whose first element is one"
            )
        return value

    def _criticize_sequences(self, state: Mapping[str, Any], length: int) -> torch.Tensor:
        self._sequence = {"sequence_length": length}
        try:
            return self.criticize(state)
        finally:
            self._sequence = {}
