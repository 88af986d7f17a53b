"""Frame construction: Machin's keywords, their checks, shared parameters, act / eval_act / criticize."""
import inspect
import math

import pytest
import torch
from torch import nn

from entmachin.buffer import Buffer
from entmachin.env.examples import NotHotdog
from entmachin.frame.a2c import A2C
from entmachin.frame.config import A2CConfig, PPOConfig
from entmachin.frame.ppo import PPO
from entmachin.model import MLPActor, MLPCritic
from test.frame._frames import D_STATE, LinearCritic, dense_frame, entity_frame, entity_states

MACHIN_KEYWORDS = [
    "lr_scheduler", "lr_scheduler_args", "lr_scheduler_kwargs", "batch_size", "actor_update_times",
    "critic_update_times", "actor_learning_rate", "critic_learning_rate", "entropy_weight", "value_weight",
    "gradient_max", "gae_lambda", "discount", "normalize_advantage", "replay_size", "replay_device",
    "replay_buffer", "visualize", "visualize_dir",
]


@pytest.mark.parametrize("cls", [A2C, PPO])
def test_machin_keywords_and_defaults(cls):
    params = inspect.signature(cls.__init__).parameters
    for name in MACHIN_KEYWORDS + (["surrogate_loss_clip"] if cls is PPO else []):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert f"{name}:" in (A2C.__doc__ + (PPO.__doc__ if cls is PPO else "")), f"{name} is not documented"
    defaults = {"batch_size": 100, "actor_update_times": 5, "critic_update_times": 10, "actor_learning_rate": 0.001,
                "critic_learning_rate": 0.001, "entropy_weight": None, "value_weight": 0.5, "gae_lambda": 1.0,
                "discount": 0.99, "normalize_advantage": True, "replay_size": 500000, "replay_device": "cpu",
                "visualize": False, "visualize_dir": ""}
    for name, value in defaults.items():
        assert params[name].default == value, name
    assert math.isinf(params["gradient_max"].default)
    if cls is PPO:
        assert params["surrogate_loss_clip"].default == 0.2


def test_unknown_keywords_raise():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'entropy_weigth'"):
        dense_frame(entropy_weigth=0.1)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'surrogate_loss_clip'"):
        dense_frame(A2C, surrogate_loss_clip=0.1)


@pytest.mark.parametrize(
    "name, value, error, match",
    [
        ("batch_size", 0, ValueError, r"PPO: batch_size must be >= 1, got 0"),
        ("batch_size", 2.0, TypeError, r"PPO: batch_size must be an int >= 1, got 2.0"),
        ("actor_update_times", -1, ValueError, r"PPO: actor_update_times must be >= 0, got -1"),
        ("critic_update_times", True, TypeError, r"PPO: critic_update_times must be an int >= 0, got True"),
        ("actor_learning_rate", 0.0, ValueError, r"PPO: actor_learning_rate must be in \(0.0, inf\], got 0.0"),
        ("critic_learning_rate", "1", TypeError, r"PPO: critic_learning_rate must be a finite real number, got '1'"),
        ("entropy_weight", math.nan, TypeError, r"PPO: entropy_weight must be a finite real number or None, got nan"),
        ("value_weight", -1.0, ValueError, r"PPO: value_weight must be in \[0.0, inf\], got -1.0"),
        ("gradient_max", 0, ValueError, r"PPO: gradient_max must be in \(0.0, inf\], got 0"),
        ("gae_lambda", 1.5, ValueError, r"PPO: gae_lambda must be in \[0.0, 1.0\], got 1.5"),
        ("discount", -0.1, ValueError, r"PPO: discount must be in \[0.0, 1.0\], got -0.1"),
        ("normalize_advantage", 1, TypeError, r"PPO: normalize_advantage must be a bool, got 1"),
        ("replay_size", 0, ValueError, r"PPO: replay_size must be >= 1, got 0"),
        ("replay_device", "nowhere", ValueError, r"PPO: replay_device is 'nowhere'; expected a torch.device or a device string"),
        ("visualize", "yes", TypeError, r"PPO: visualize must be a bool, got 'yes'"),
        ("visualize_dir", None, TypeError, r"PPO: visualize_dir must be a str, got None"),
        ("value_clip", 0.0, ValueError, r"PPO: value_clip must be in \(0.0, inf\], got 0.0"),
        ("target_kl", -1.0, ValueError, r"PPO: target_kl must be in \(0.0, inf\], got -1.0"),
        ("n_anneal_updates", 0, ValueError, r"PPO: n_anneal_updates must be >= 1, got 0"),
        ("seed", -1, ValueError, r"PPO: seed must be >= 0, got -1"),
        ("surrogate_loss_clip", 0.0, ValueError, r"PPO: surrogate_loss_clip must be in \(0.0, inf\], got 0.0"),
        ("lr_scheduler", 3, TypeError, r"PPO: lr_scheduler must be a scheduler class or None, got int 3"),
        ("lr_scheduler_args", ((1,),), TypeError, r"PPO: lr_scheduler_args must be a pair \(for the actor's and the critic's scheduler\) of tuples"),
        ("lr_scheduler_kwargs", ({}, ()), TypeError, r"PPO: lr_scheduler_kwargs must be a pair .* of dicts"),
        ("replay_buffer", object(), TypeError, r"PPO: replay_buffer has no append\(\) method; pass an entmachin Buffer"),
        ("writer", 3, TypeError, r"PPO: writer must be None, a log directory or a SummaryWriter"),
    ],
)
def test_keyword_errors(name, value, error, match):
    with pytest.raises(error, match=match):
        dense_frame(**{name: value})


N_CUDA = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize("value", ["cuda", "cuda:0", "past"])
def test_replay_device_this_machine_lacks_raises(value):
    value = f"cuda:{max(N_CUDA, 7)}" if value == "past" else value
    if N_CUDA and torch.device(value).index in (None, 0):
        assert dense_frame(replay_device=value).replay_buffer.buffer_device.type == "cuda"
        return
    expected = rf"has {N_CUDA} CUDA device" if N_CUDA else r"but this (torch build|machine) has no CUDA"
    with pytest.raises(RuntimeError, match=rf"^PPO: replay_device is '{value}', .*{expected}"):
        dense_frame(replay_device=value)


def test_positional_errors():
    actor, critic = MLPActor(D_STATE, 2), LinearCritic()
    with pytest.raises(TypeError, match=r"A2C: actor must be an nn.Module, got function"):
        A2C(lambda s: s, critic, torch.optim.Adam, nn.MSELoss())
    with pytest.raises(TypeError, match=r"A2C: critic must be an nn.Module, got NoneType"):
        A2C(actor, None, torch.optim.Adam, nn.MSELoss())
    with pytest.raises(TypeError, match=r"A2C: optimizer must be an optimizer class such as torch.optim.Adam, got str"):
        A2C(actor, critic, "Adam", nn.MSELoss())
    with pytest.raises(TypeError, match=r"A2C: criterion must be a loss such as nn.MSELoss\(\), got int"):
        A2C(actor, critic, torch.optim.Adam, 1)
    with pytest.raises(ValueError, match=r"A2C: give lr_scheduler or n_anneal_updates, not both"):
        A2C(actor, critic, torch.optim.Adam, nn.MSELoss(), lr_scheduler=torch.optim.lr_scheduler.StepLR,
            lr_scheduler_args=((1,), (1,)), n_anneal_updates=3)


def test_configs_are_frozen_and_typed():
    cfg = PPOConfig(batch_size=4)
    with pytest.raises(Exception):
        cfg.batch_size = 5  # type: ignore[misc]
    assert isinstance(cfg, A2CConfig) and A2CConfig().gae_lambda == 1.0


def test_separate_networks_get_two_optimizers_with_their_rates():
    frame = dense_frame(actor_learning_rate=0.01, critic_learning_rate=0.02)
    assert not frame.shared_parameters
    assert [o.param_groups[0]["lr"] for o in frame.optimizers] == [0.01, 0.02]
    assert frame.actor_optim is not frame.critic_optim


def test_torch_optimizer_classes_are_fused_and_factories_are_called_as_given():
    import functools

    assert dense_frame().actor_optim.defaults["fused"] is True
    plain = dense_frame(optimizer_factory=functools.partial(torch.optim.Adam, fused=False))
    assert plain.actor_optim.defaults["fused"] is False
    rms = dense_frame(optimizer_factory=torch.optim.RMSprop)  # has no fused implementation
    assert isinstance(rms.actor_optim, torch.optim.RMSprop)


def test_shared_parameters_are_detected():
    envs, _ = entity_states(NotHotdog, 2, 1)
    frame = entity_frame(envs, actor_learning_rate=0.01, critic_learning_rate=0.02)
    assert frame.shared_parameters and len(frame.optimizers) == 1
    assert frame.actor_optim is frame.critic_optim
    assert len(frame.actor_optim.param_groups) == 1  # net.critic() adds no parameter of its own

    class Head(nn.Module):
        def __init__(self, trunk):
            super().__init__()
            self.trunk, self.out = trunk, nn.Linear(4, 1)

        def forward(self, state):
            return self.out(self.trunk(state))

    trunk = nn.Linear(D_STATE, 4)
    actor = nn.Sequential(trunk)
    frame = A2C(actor, Head(trunk), torch.optim.SGD, nn.MSELoss(), actor_learning_rate=0.1, critic_learning_rate=0.2)
    groups = frame.actor_optim.param_groups
    assert frame.shared_parameters and [g["lr"] for g in groups] == [0.1, 0.2]
    assert len(groups[0]["params"]) == 2 and len(groups[1]["params"]) == 2


@pytest.mark.filterwarnings(r"ignore:Detected call of `lr_scheduler.step\(\)` before")
def test_lr_scheduler_one_per_optimizer():
    frame = dense_frame(lr_scheduler=torch.optim.lr_scheduler.StepLR, lr_scheduler_args=((1,), (1,)),
                        lr_scheduler_kwargs=({"gamma": 0.5}, {"gamma": 0.1}))
    frame.update_lr_scheduler()
    assert [o.param_groups[0]["lr"] for o in frame.optimizers] == pytest.approx([0.0005, 0.0001])
    assert len(frame.lr_schedulers) == 2


def test_replay_buffer_and_device():
    buffer = Buffer(50)
    assert dense_frame(replay_buffer=buffer).replay_buffer is buffer
    assert dense_frame(replay_size=7).replay_buffer.buffer_size == 7


def test_act_collects_stats_and_eval_act_criticize_do_not():
    torch.manual_seed(0)
    actor = MLPActor(D_STATE, 2, normalize_inputs=True)
    critic = MLPCritic(D_STATE, normalize_inputs=True)
    frame = PPO(actor, critic, torch.optim.Adam, nn.MSELoss())
    state = {"state": torch.randn(5, D_STATE)}
    action, log_prob, _ = frame.act(state)
    assert int(actor.norm.count) == 5 and not log_prob.requires_grad
    frame.eval_act(state, {"action": action})
    frame.criticize(state)
    frame.act(state, collect_stats=False)
    assert int(actor.norm.count) == 5 and int(critic.norm.count) == 0
    assert frame.eval_act(state, {"action": action})[1].requires_grad


def test_deterministic_act():
    frame = dense_frame()
    state = {"state": torch.randn(4, D_STATE)}
    a = frame.act(state, deterministic=True)[0]
    assert torch.equal(a, frame.act(state, deterministic=True)[0])

    class NoFlag(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = MLPActor(D_STATE, 2)

        def forward(self, state, action=None):
            return self.inner(state, action)

    frame = PPO(NoFlag(), LinearCritic(), torch.optim.Adam, nn.MSELoss())
    with pytest.raises(TypeError, match=r"PPO.act: deterministic=True, but NoFlag.forward takes no 'deterministic'"):
        frame.act(state, deterministic=True)


def test_criticize_accepts_a_tuple_and_rejects_others():
    frame = dense_frame()
    state = {"state": torch.randn(2, D_STATE)}
    value = frame.criticize(state)
    frame.critic.forward = lambda state: (value, "extra")
    assert frame.criticize(state) is value
    frame.critic.forward = lambda state: "nope"
    with pytest.raises(TypeError, match=r"PPO.criticize: the critic returned a str; expected a tensor \[B, 1\]"):
        frame.criticize(state)


def test_ragged_actor_through_act_and_eval_act():
    envs, states = entity_states(NotHotdog, 3, 1)
    frame = entity_frame(envs)
    out = frame.act(states[0])
    again = frame.eval_act(states[0], {"action": out.action})
    for name in out.log_prob:
        assert torch.allclose(out.log_prob[name].data, again.log_prob[name].data, atol=1e-6)
    assert frame.criticize(states[0]).shape == (3, 1)
