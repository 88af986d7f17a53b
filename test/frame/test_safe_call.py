"""safe_call: name matching, signature caching, devices, input/output conversion, wrappers."""
import collections
import inspect
import os
import tempfile
from typing import NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from entmachin.frame import model_devices, safe_call
from entmachin.model import MLPActor, RogueNet, RogueNetConfig, RogueNetOutput
from entmachin.ragged import arrdict, ragged_from_arrays
from entmachin.ragged.tensor import RaggedTensor, ragged_tensor_equal
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state

META = torch.device("meta")
CPU = torch.device("cpu")


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


class Echo(nn.Module):
    """Returns what it received, so tests can look at the arguments' devices and types."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))

    def forward(self, state, action=None, *, scale=1.0):
        return {"state": state, "action": action, "scale": scale}


class Devices(nn.Module):
    """Records the devices its inputs arrived on and returns a tensor built from the weight."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2))
        self.seen = None

    def forward(self, x):
        self.seen = x.device
        return self.w.new_empty(x.shape)  # on the weight's device (arithmetic on meta is slow to load)


class NoParams(nn.Module):
    def forward(self, x):
        return x


# ---------------------------------------------------------------------------- names


def test_matches_names_later_dicts_win_and_extra_keys_are_ignored():
    out = safe_call(Echo(), {"state": 1, "reward": 5}, {"state": 2, "action": 3, "other": 4})
    assert out == {"state": 2, "action": 3, "scale": 1.0}


def test_defaults_and_keyword_only_parameters():
    assert safe_call(Echo(), {"state": 1}) == {"state": 1, "action": None, "scale": 1.0}
    assert safe_call(Echo(), {"state": 1, "scale": 3.0})["scale"] == 3.0


def test_missing_required_parameters_list_names_accepted_and_offered():
    with pytest.raises(TypeError, match=r"Echo.forward\): missing required parameter\(s\) \['state'\]; "
                       r"it accepts \['state', 'action', 'scale'\]; the dicts offer \['obs', 'reward'\]"):
        safe_call(Echo(), {"obs": 1, "reward": 2})


def test_var_positional_is_not_fed_and_var_keyword_receives_the_extras():
    def positional(state, *args):
        return state, args

    def keywords(state, **kwargs):
        return state, kwargs

    assert safe_call(positional, {"state": 1, "args": 2}) == (1, ())
    assert safe_call(keywords, {"state": 1, "a": 2}, {"b": 3}) == (1, {"a": 2, "b": 3})
    with pytest.raises(TypeError, match=r"accepts \['state'\] and \*\*kwargs"):
        safe_call(keywords, {"a": 2})


def test_positional_only_parameters_are_passed_by_position():
    def fn(a, b=10, /, c=0, **rest):
        return a, b, c, rest

    assert safe_call(fn, {"a": 1, "c": 3}) == (1, 10, 3, {})
    assert safe_call(fn, {"a": 1, "b": 2, "z": 9}) == (1, 2, 0, {"z": 9})  # a, b not repeated in rest
    with pytest.raises(TypeError, match=r"missing required parameter\(s\) \['a'\]"):
        safe_call(fn, {"b": 2})


def test_other_methods_and_bound_methods():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(1))

        def forward(self, state):
            return state

        def value(self, state, visible=None):
            return state + 1, visible

    net = Net()
    assert safe_call(net, {"state": 1}, method="value") == (2, None)
    assert safe_call(net.value, {"state": 1, "visible": 7}) == (2, 7)
    with pytest.raises(AttributeError, match="Net has no method 'policy'"):
        safe_call(net, {"state": 1}, method="policy")


def test_arguments_must_be_mappings():
    with pytest.raises(TypeError, match=r"argument 2 after the model is a list; expected a mapping"):
        safe_call(Echo(), {"state": 1}, [("action", 2)])


def test_callables_without_a_signature_raise_clearly():
    with pytest.raises(TypeError, match="cannot read the parameters of .*wrap them in a Python function"):
        safe_call(torch._C._nn.linear, {"input": torch.zeros(1, 1)})


def test_result_is_returned_unchanged():
    marker = object()
    assert safe_call(lambda state: marker, {"state": 1}) is marker
    x = torch.zeros(2, 2)
    output = Pair(x, x)
    assert safe_call(lambda: output) is output  # nothing to move: the same object comes back


# ---------------------------------------------------------------------- signature cache


def test_signature_is_read_once_per_class_and_method(monkeypatch):
    class Fresh(nn.Module):
        def forward(self, x):
            return x

    calls = []
    real = inspect.signature
    monkeypatch.setattr(inspect, "signature", lambda fn, *a, **k: calls.append(fn) or real(fn, *a, **k))
    for _ in range(3):
        safe_call(Fresh(), {"x": 1})
    assert len(calls) == 1


def test_a_replaced_method_is_read_again():
    class Patched(nn.Module):
        def forward(self, x):
            return x

    assert safe_call(Patched(), {"x": 1, "y": 2}) == 1
    Patched.forward = lambda self, y: y
    assert safe_call(Patched(), {"x": 1, "y": 2}) == 2
    module = Patched()
    module.forward = lambda x, y: x + y  # set on one instance only
    assert safe_call(module, {"x": 1, "y": 2}) == 3
    assert safe_call(Patched(), {"x": 1, "y": 2}) == 2


def test_bound_and_unbound_uses_of_one_function_keep_separate_signatures():
    class Obj:
        def method(self, x):
            return x

    obj = Obj()
    assert safe_call(obj.method, {"x": 1}) == 1
    assert safe_call(Obj.method, {"self": obj, "x": 2}) == 2


# ---------------------------------------------------------------------------- devices


def test_inputs_follow_the_parameters_at_call_time():
    model = Devices()
    out = safe_call(model, {"x": torch.ones(3, 2)})
    assert model.seen == CPU and out.device == CPU
    model.to(META)  # not cached: the next call sees the move
    out = safe_call(model, {"x": torch.ones(3, 2)})
    assert model.seen == META and out.device == META and out.shape == (3, 2)


def test_explicit_attributes_win_over_the_parameters():
    model = Echo()
    model.input_device = "meta"
    model.output_device = torch.device("meta")
    assert model_devices(model) == (META, META)
    assert safe_call(model, {"state": torch.ones(1)})["state"].device == META  # weights stay on cpu
    echo = Echo()
    echo.output_device = "meta"  # the input side still follows the parameters
    out = safe_call(echo, {"state": torch.ones(1)})
    assert out["state"].device == META
    assert model_devices(echo) == (CPU, META)


def test_explicit_attributes_may_be_properties_and_none_means_unset():
    class WithProperty(Echo):
        @property
        def input_device(self):
            return "meta"

    assert model_devices(WithProperty()) == (META, CPU)
    echo = Echo()
    echo.input_device = None
    assert model_devices(echo) == (CPU, CPU)


def test_class_attributes_set_after_a_call_are_seen():
    class Late(Echo):
        pass

    assert model_devices(Late()) == (CPU, CPU)
    Late.input_device = Late.output_device = "meta"
    assert model_devices(Late()) == (META, META)


def test_invalid_explicit_device_raises():
    echo = Echo()
    echo.input_device = "gpu0"
    with pytest.raises(ValueError, match=r"Echo.input_device is 'gpu0'; expected a torch.device"):
        safe_call(echo, {"state": 1})


N_CUDA = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize("attribute", ["input_device", "output_device"])
@pytest.mark.parametrize("value", ["cuda", "cuda:0", "cuda:7", "past"])
def test_explicit_cuda_device_this_machine_lacks_raises(attribute, value):
    value = f"cuda:{max(N_CUDA, 7)}" if value == "past" else value
    echo = Echo()
    setattr(echo, attribute, value)
    if N_CUDA and torch.device(value).index in (None, 0):
        assert torch.device(value) in model_devices(echo)  # this machine has it
        return
    expected = rf"has {N_CUDA} CUDA device\(s\)" if N_CUDA else r"but this (torch build|machine) has no CUDA"
    for _ in range(2):  # a failed check is not cached
        with pytest.raises(RuntimeError, match=rf"safe_call: Echo.{attribute} is '{value}', .*{expected}"):
            safe_call(echo, {"state": torch.ones(1)})
    with pytest.raises(RuntimeError, match=rf"Echo.{attribute} is '{value}'"):
        model_devices(echo)


def test_invalid_explicit_device_string_gpu():
    echo = Echo()
    echo.output_device = "gpu"
    with pytest.raises(ValueError, match=r"safe_call: Echo.output_device is 'gpu'; expected a torch.device or a "
                       r"device string such as 'cpu' or 'cuda:0'"):
        safe_call(echo, {"state": 1})


def test_module_without_parameters_runs_on_cpu_or_its_explicit_device():
    model = NoParams()
    assert model_devices(model) == (CPU, CPU)
    model.input_device = "meta"
    assert model_devices(model) == (META, META)
    assert safe_call(model, {"x": torch.ones(2)}).device == META


def test_buffers_count_as_tensors_of_the_module():
    model = NoParams()
    model.register_buffer("stats", torch.zeros(1, device=META))
    assert model_devices(model) == (META, META)


def test_parameters_on_several_devices_need_both_attributes():
    model = Echo()
    model.extra = nn.Linear(1, 1, device=META)
    with pytest.raises(RuntimeError, match=r"Echo has parameters on several devices \['cpu', 'meta'\]; "
                       "set both model.input_device and model.output_device"):
        safe_call(model, {"state": torch.ones(1)})
    model.input_device = "cpu"
    with pytest.raises(RuntimeError, match="several devices"):
        safe_call(model, {"state": torch.ones(1)})
    model.output_device = "meta"
    assert safe_call(model, {"state": torch.ones(1)})["state"].device == META


def test_plain_callables_are_not_moved_unless_they_have_attributes():
    def fn(x):
        return x

    meta = torch.ones(2, device=META)
    cpu = torch.ones(2)
    assert safe_call(fn, {"x": meta}) is meta and safe_call(fn, {"x": cpu}) is cpu
    assert model_devices(fn) == (None, None)
    fn.input_device = "meta"
    assert safe_call(fn, {"x": cpu}).device == META
    assert model_devices(fn) == (META, META)


def test_bound_method_of_a_module_uses_the_module_devices():
    class Net(Devices):
        def value(self, x):
            self.seen = x.device
            return x

    net = Net().to(META)
    safe_call(net.value, {"x": torch.ones(1)})
    assert net.seen == META


# ------------------------------------------------------------------ inputs and outputs


def test_inputs_move_recursively_and_keep_their_container_types():
    echo = Echo()
    echo.input_device = echo.output_device = "meta"
    seen = {}
    echo.forward = lambda state: seen.update(state=state)
    ragged = RaggedTensor.from_lengths(torch.zeros(3, 1), [1, 2])
    array = np.zeros(3)
    state = {
        "nested": {"t": torch.ones(2), "list": [torch.ones(1), 3], "pair": Pair(torch.ones(1), torch.ones(1))},
        "ragged": ragged,
        "buffer": ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 1]),
        "numpy": array,
        "arrdict": arrdict(a=torch.ones(1)),
        "ordered": collections.OrderedDict(a=torch.ones(1)),
        "default": collections.defaultdict(list, a=torch.ones(1)),
        "tuple": (torch.ones(1),),
        "text": "kept",
    }
    safe_call(echo, {"state": state})
    got = seen["state"]
    assert got["nested"]["t"].device == META and got["nested"]["list"][1] == 3
    assert isinstance(got["nested"]["pair"], Pair) and got["nested"]["pair"].second.device == META
    assert isinstance(got["ragged"], RaggedTensor) and got["ragged"].lengths.device == META
    assert isinstance(got["buffer"], RaggedTensor) and got["buffer"].device == META
    assert got["buffer"].trailing_shape == (2,) and len(got["buffer"]) == 2
    assert got["numpy"] is array
    assert type(got["arrdict"]) is arrdict and got["arrdict"].a.device == META
    assert type(got["ordered"]) is collections.OrderedDict and got["ordered"]["a"].device == META
    assert type(got["default"]) is collections.defaultdict and got["default"].default_factory is list
    assert type(got["tuple"]) is tuple and got["tuple"][0].device == META
    assert got["text"] == "kept"
    assert state["nested"]["t"].device == CPU  # the caller's data is not mutated


def test_inputs_already_in_place_keep_their_identity():
    state = {"a": [torch.ones(1)], "b": arrdict(c=torch.ones(1))}
    assert safe_call(Echo(), {"state": state})["state"] is state


def test_ragged_buffers_stay_buffers_for_plain_callables():
    buffer = ragged_from_arrays(np.zeros((1, 1), np.float32), [1])
    assert safe_call(lambda x: x, {"x": buffer}) is buffer
    assert isinstance(safe_call(NoParams(), {"x": buffer}), RaggedTensor)


def test_outputs_move_to_the_output_device_keeping_their_types():
    ragged = RaggedTensor.from_lengths(torch.zeros(3, 1), [1, 2])

    class Outputs(nn.Module):
        def forward(self):
            return (Pair(torch.ones(1), torch.ones(1)), {"r": ragged, "n": 1}, [torch.ones(1)], torch.Size([2]))

    model = Outputs()
    model.output_device = "meta"
    pair, mapping, listed, size = safe_call(model)
    assert isinstance(pair, Pair) and pair.first.device == META
    assert isinstance(mapping["r"], RaggedTensor) and mapping["r"].device == META and mapping["n"] == 1
    assert listed[0].device == META and size == torch.Size([2])


def test_entmachin_mlp_actor_through_safe_call():
    actor = MLPActor(4, 2)
    action, log_prob, entropy = safe_call(actor, {"state": torch.zeros(3, 4), "reward": 1.0}, {"action": None})
    assert action.shape == log_prob.shape == entropy.shape == (3, 1)


def test_rogue_net_takes_the_canonical_state_through_safe_call():
    torch.manual_seed(0)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(d_model=16, n_layer=1))
    state = zoo_state(zoo_observations(0, 5))  # ragged buffers: converted on the way in
    out = safe_call(net, state, {"deterministic": True, "reward": 1.0})
    assert isinstance(out, RogueNetOutput)
    direct = net(state["entities"], state["action_masks"], state.get("visible"), deterministic=True)
    for name in ACTION_SPACE:
        assert ragged_tensor_equal(out.action[name], direct.action[name])
    again = safe_call(net, state, {"action": out.action})  # re-evaluation of the chosen actions
    assert torch.allclose(again.log_prob_sum, out.log_prob_sum)
    value = safe_call(net, state, method="value")
    assert value.shape == (5, 1)
    assert torch.allclose(safe_call(net.critic(), state), value)


# ---------------------------------------------------------------------------- wrappers


def test_data_parallel_is_looked_through_and_called():
    inner = Devices()
    wrapped = nn.DataParallel(inner)
    out = safe_call(wrapped, {"x": torch.ones(1, 2), "extra": 1})
    # DataParallel itself scatters the inputs to its first GPU where there is one.
    assert out.shape == (1, 2) and inner.seen == (torch.device("cuda", 0) if torch.cuda.is_available() else CPU)
    inner.input_device = inner.output_device = "meta"
    assert model_devices(wrapped) == (META, META)


def _fake_ddp(module: nn.Module) -> nn.parallel.DistributedDataParallel:
    """A DistributedDataParallel without a process group: it only forwards to its module."""
    ddp = nn.parallel.DistributedDataParallel.__new__(nn.parallel.DistributedDataParallel)
    nn.Module.__init__(ddp)
    ddp.module = module
    ddp.forward = lambda *args, **kwargs: ("wrapper", module(*args, **kwargs))
    return ddp


def test_distributed_data_parallel_is_looked_through_and_called():
    inner = Echo()
    inner.input_device = inner.output_device = "meta"
    tag, out = safe_call(_fake_ddp(inner), {"state": torch.ones(1), "scale": 2.0})
    assert tag == "wrapper" and out["state"].device == META and out["scale"] == 2.0
    with pytest.raises(TypeError, match=r"Echo.forward\): missing"):
        safe_call(_fake_ddp(inner), {})


@pytest.mark.slow
def test_real_distributed_data_parallel_on_one_cpu_process():
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=0, world_size=1)
        try:
            inner = Devices()
            out = safe_call(nn.parallel.DistributedDataParallel(inner), {"x": torch.ones(3, 2), "y": 0})
            assert out.shape == (3, 2) and inner.seen == CPU
        finally:
            dist.destroy_process_group()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_inputs_outputs_and_later_moves():
    model = Devices().cuda()
    buffer = ragged_from_arrays(np.zeros((3, 2), np.float32), [2, 1])
    out = safe_call(model, {"x": torch.ones(3, 2)})
    assert model.seen.type == "cuda" and out.is_cuda
    echo = Echo().cuda()
    got = safe_call(echo, {"state": {"buffer": buffer, "t": torch.ones(1)}})["state"]
    assert got["buffer"].device.type == "cuda" and got["buffer"].lengths.is_cuda and got["t"].is_cuda
    model.output_device = "cpu"
    assert not safe_call(model, {"x": torch.ones(3, 2)}).is_cuda
    model.cpu()
    del model.output_device
    assert safe_call(model, {"x": torch.ones(3, 2, device="cuda")}).device == CPU
    if torch.cuda.device_count() > 0:
        wrapped = nn.DataParallel(Devices().cuda())
        assert safe_call(wrapped, {"x": torch.ones(4, 2)}).is_cuda
