"""RogueNet compiled (``RogueNetConfig(compile=True)``): the same network, the same checkpoints, an
eager fallback that names its cause, and (slow) outputs within 1e-5 of eager after a cold compile."""
import dataclasses
import warnings

import pytest
import torch

from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model import compiled
from entmachin.model.compiled import KERNELS, CompileWarning, compile_problem, is_compiled, set_compiled
from entmachin.run.build import decide_compile
from entmachin.run.config import ConfigError, config_from_dict
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state

SMALL = RogueNetConfig(d_model=8, n_layer=1, n_head=2, d_qk=4)


@pytest.fixture(autouse=True)
def fresh_kernels(monkeypatch):
    """Each test starts with no compiled kernel, no failure and no probe answer, and leaves none."""
    monkeypatch.setattr(compiled, "_PROBLEMS", {})
    for kernel in KERNELS:
        kernel.reset()
    yield
    for kernel in KERNELS:
        kernel.reset()


def _net(compile=False, config=SMALL, seed=0):
    torch.manual_seed(seed)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, dataclasses.replace(config, compile=compile))
    torch.nn.init.normal_(net.value_head.weight)
    return net


def _outputs(net, state, action=None):
    out, value = net.forward_with_value(state["entities"], state["action_masks"], action=action)
    return out, value


def test_the_setting_takes_true_or_false_and_a_run_config_also_auto():
    assert RogueNetConfig(compile=True).compile is True
    with pytest.raises(TypeError, match="compile: expected one of \\[True, False\\], got 'auto'"):
        RogueNetConfig(compile="auto")
    assert config_from_dict({"env": {"name": "MineSweeper"}}).model.compile == "auto"
    with pytest.raises(ConfigError, match="model.compile: expected true or false or one of 'auto', got 'yes'"):
        config_from_dict({"env": {"name": "MineSweeper"}, "model": {"compile": "yes"}})
    with pytest.raises(ConfigError, match="model.compile: a setting of kind: rogue_net"):
        config_from_dict({"env": {"name": "Pendulum-v1"}, "model": {"kind": "mlp", "compile": True}})


def test_compiled_and_eager_networks_share_every_weight_name_so_checkpoints_load_both_ways():
    eager, fast = _net(False), _net(True)
    assert not is_compiled(eager) and is_compiled(fast)
    assert list(eager.state_dict()) == list(fast.state_dict())
    fast.load_state_dict(eager.state_dict())
    eager.load_state_dict(fast.state_dict())
    set_compiled(fast, False)
    assert not is_compiled(fast)


def test_a_compiler_that_fails_warns_once_naming_the_cause_and_the_network_runs_eagerly(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore lines")

    monkeypatch.setattr(compiled, "_probe", lambda device: None)  # the probe passed; the kernels then fail
    monkeypatch.setattr(torch, "compile", broken)
    state = zoo_state(zoo_observations(0, 5))
    eager, fast = _net(False), _net(True)
    with pytest.warns(CompileWarning, match=r"compiling .* failed \(RuntimeError: InvalidCxxCompiler: No working C\+\+ "
                                            r"compiler found\); it runs eagerly") as caught:
        torch.manual_seed(1)
        out, value = _outputs(fast, state)
    torch.manual_seed(1)
    expected, expected_value = _outputs(eager, state)
    assert len({str(w.message) for w in caught}) == len(caught)  # each kernel once
    for name in ACTION_SPACE:
        assert torch.equal(out.action[name].data, expected.action[name].data)
        assert torch.equal(out.log_prob[name].data, expected.log_prob[name].data)
    assert torch.equal(value, expected_value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        _outputs(fast, state)


def test_no_working_compiler_on_the_device_warns_before_the_first_forward_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(compiled, "_probe", lambda device: "InvalidCxxCompiler: No working C++ compiler found")
    net = _net(True)
    state = zoo_state(zoo_observations(0, 3))
    with pytest.warns(CompileWarning, match=r"RogueNet: cannot compile on cpu \(InvalidCxxCompiler: No working C\+\+ "
                                            r"compiler found\); running eagerly"):
        _outputs(net, state)
    assert not is_compiled(net)


def test_an_unsupported_device_is_named():
    assert compile_problem(torch.device("meta")) == "torch.compile's inductor backend does not run on meta devices here"


@pytest.mark.parametrize("settings, device, compiles, says", [
    ({"model": {"compile": False}}, "cpu", False, "runs eagerly"),
    ({}, "cpu", False, "auto chose eager: 100000 steps are too few to repay the compile time"),
    ({"train": {"total_steps": 1_000_000}}, "cpu", True, "auto chose compiled on cpu"),
    ({"train": {"total_steps": 2_000_000}}, "cuda", False, "auto chose eager: on cuda, the compiled network was not"),
    ({"model": {"compile": True}}, "cuda", True, "true: compiled on cuda"),
    ({"train": {"total_steps": 2_000_000}}, "mps", False, "auto chose eager: on mps, the compiled network was not"),
    ({"model": {"compile": True}}, "cpu", True, "true: compiled on cpu"),
])
def test_the_runner_resolves_model_compile_and_says_why(monkeypatch, settings, device, compiles, says):
    monkeypatch.setattr(compiled, "_probe", lambda device: None)
    raw = {"env": {"name": "MineSweeper"}, **settings}
    raw["train"] = {**raw.get("train", {}), "device": device}
    decision, why = decide_compile(config_from_dict(raw))
    assert decision is compiles and says in why


def test_true_without_a_working_compiler_runs_the_run_eagerly_with_a_warning(monkeypatch):
    monkeypatch.setattr(compiled, "_probe", lambda device: "BackendCompilerFailed: no cl")
    config = config_from_dict({"env": {"name": "MineSweeper"}, "model": {"compile": True}})
    with pytest.warns(CompileWarning, match=r"model.compile: cannot compile on cpu \(BackendCompilerFailed: no cl\)"):
        decision, why = decide_compile(config)
    assert decision is False and "running eagerly" in why


@pytest.mark.slow
@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu,
                                pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]),
])
def test_a_cold_compile_gives_eager_outputs_and_gradients_within_1e_5(tmp_path, monkeypatch, device):
    """The smallest network, compiled in an empty inductor cache (a warm one cannot hide a cold
    compile): outputs, values and gradients within 1e-5 of eager on the same inputs, the same
    sampled actions for the same seed (sampling stays eager), and few graphs over batches of
    several sizes, with and without gradients. On CUDA the kernels are inductor's Triton code."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    with torch.no_grad():  # as a first forward that acts: the probe still compiles a backward
        assert compile_problem(device) is None
    eager, fast = _net(False).to(device), _net(True).to(device)
    fast.load_state_dict(eager.state_dict())
    graphs_before = compiled.recompiles()
    for n_rows in (7, 12, 3):
        state = zoo_state(zoo_observations(n_rows, n_rows))
        with torch.no_grad():
            torch.manual_seed(n_rows)
            sampled, _ = _outputs(fast, state)
            torch.manual_seed(n_rows)
            expected, _ = _outputs(eager, state)
        for name in ACTION_SPACE:
            assert torch.equal(sampled.action[name].data, expected.action[name].data)
        action = expected.action
        results = []
        for net in (eager, fast):
            net.zero_grad(set_to_none=True)
            out, value = _outputs(net, state, action)
            (out.log_prob_sum.sum() + out.entropy_sum.sum() + value.sum()).backward()
            results.append((out, value, {k: p.grad.clone() for k, p in net.named_parameters() if p.grad is not None}))
        (out_e, value_e, grads_e), (out_c, value_c, grads_c) = results
        for name in ACTION_SPACE:
            torch.testing.assert_close(out_c.log_prob[name].data, out_e.log_prob[name].data, atol=1e-5, rtol=0)
            torch.testing.assert_close(out_c.entropy[name].data, out_e.entropy[name].data, atol=1e-5, rtol=0)
        torch.testing.assert_close(value_c, value_e, atol=1e-5, rtol=0)
        assert grads_c.keys() == grads_e.keys()
        for key in grads_e:
            torch.testing.assert_close(grads_c[key], grads_e[key], atol=1e-5, rtol=1e-4, msg=key)
    assert all(kernel.failed is None for kernel in KERNELS)
    assert compiled.recompiles() - graphs_before <= 10
