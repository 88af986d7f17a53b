"""generate_config / init_from_config: user values win, unknown keys raise, round trips."""
import dataclasses
import inspect
import pydoc
import math

import pytest
import torch
from torch import nn

from entmachin.frame.a2c import A2C
from entmachin.frame.config import A2CConfig, DQNConfig, PPOConfig, resolve
from entmachin.frame.dqn import DQN
from entmachin.settings import doc_of
from entmachin.frame.ppo import PPO
from entmachin.model import MLPActor, MLPCritic


class SharedNet(nn.Module):
    """An actor with a ``critic()`` sharing its trunk, for the ``"@actor.critic"`` entry."""

    def __init__(self, d_state=3):
        super().__init__()
        self.trunk = nn.Linear(d_state, 8)
        self.actor_head = MLPActor(8, 2, d_hidden=())

    def forward(self, state, action=None):
        return self.actor_head(torch.tanh(self.trunk(state)), action)

    def critic(self):
        return SharedCritic(self)


class SharedCritic(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net, self.head = net, nn.Linear(8, 1)

    def forward(self, state):
        return self.head(torch.tanh(self.net.trunk(state)))


MLP_CONFIG = {"model_kwargs": [{"d_state": 3, "n_actions": 2}, {"d_state": 3}]}


def test_generate_config_has_every_keyword_with_machins_defaults():
    config = PPO.generate_config()
    assert config["frame"] == "PPO"
    fc = config["frame_config"]
    assert fc["batch_size"] == 100 and fc["surrogate_loss_clip"] == 0.2 and math.isinf(fc["gradient_max"])
    assert fc["optimizer"] == "Adam" and fc["criterion"] == "MSELoss"
    assert "surrogate_loss_clip" not in A2C.generate_config()["frame_config"]


def test_user_values_override_defaults_and_other_keys_stay():
    config = PPO.generate_config({"frame_config": {"batch_size": 7, "discount": 0.5}, "env": "CartPole"})
    assert config["frame_config"]["batch_size"] == 7 and config["frame_config"]["discount"] == 0.5
    assert config["env"] == "CartPole" and config["frame_config"]["actor_update_times"] == 5


def test_unknown_keys_list_the_allowed_ones():
    with pytest.raises(ValueError, match=r"frame_config.batchsize: unknown key for PPO; allowed keys are \[.*'batch_size'"):
        PPO.generate_config({"frame_config": {"batchsize": 7}})
    with pytest.raises(ValueError, match=r"frame_config.surrogate_loss_clip: unknown key for A2C"):
        A2C.init_from_config({"frame": "A2C", "frame_config": {"surrogate_loss_clip": 0.1}})
    with pytest.raises(TypeError, match=r"PPO.generate_config: expected a dict or None, got list"):
        PPO.generate_config([])
    with pytest.raises(TypeError, match=r"frame_config: expected a dict of settings, got str"):
        PPO.generate_config({"frame_config": "x"})


def test_round_trip_builds_the_configured_frame():
    config = PPO.generate_config({"frame_config": {**MLP_CONFIG, "batch_size": 7, "entropy_weight": -0.01,
                                                   "optimizer": "SGD", "criterion": "SmoothL1Loss",
                                                   "lr_scheduler": "StepLR", "lr_scheduler_args": [[1], [1]]}})
    frame = PPO.init_from_config(config)
    assert isinstance(frame.actor, MLPActor) and isinstance(frame.critic, MLPCritic)
    assert frame.config.batch_size == 7 and frame.config.entropy_weight == -0.01
    assert isinstance(frame.actor_optim, torch.optim.SGD) and isinstance(frame.criterion, nn.SmoothL1Loss)
    assert len(frame.lr_schedulers) == 2
    again = PPO.init_from_config(PPO.generate_config(config))
    assert again.config == frame.config


@pytest.mark.parametrize("model_device, error, match", [
    ("gpu", ValueError, r"PPO.init_from_config: model_device is 'gpu'; expected a torch.device or a device string"),
    ("cuda:7", RuntimeError, r"PPO.init_from_config: model_device is 'cuda:7', but this .*(no CUDA|CUDA device)"),
])
def test_init_from_config_checks_the_model_device(model_device, error, match):
    if torch.cuda.device_count() > 7 and model_device == "cuda:7":
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(error, match=match):
        PPO.init_from_config(PPO.generate_config({"frame_config": MLP_CONFIG}), model_device=model_device)


def test_shared_critic_from_the_actor():
    config = A2C.generate_config({"frame_config": {
        "models": ["test.frame.test_frame_config.SharedNet", "@actor.critic"], "model_kwargs": [{}, {}]}})
    frame = A2C.init_from_config(config)
    assert frame.shared_parameters and frame.critic.net is frame.actor


@pytest.mark.parametrize(
    "frame_config, match",
    [
        ({"models": ["nowhere.Model", "entmachin.model.MLPCritic"]}, r"frame_config.models\[0\]: cannot find 'nowhere.Model'"),
        ({"models": ["entmachin.model.MLPActor"]}, r"frame_config.models: expected two entries \(actor, critic\)"),
        ({"models": ["@actor.critic", "entmachin.model.MLPCritic"]}, r"frame_config.models\[0\]: '@actor.critic' refers to the actor"),
        ({"models": ["entmachin.model.MLPActor", "@actor.value"]}, r"frame_config.models\[1\]: the actor has no method 'value'"),
        ({"models": ["entmachin.model.MLP_DIM", "x.y"]}, r"frame_config.models\[0\]: cannot find 'entmachin.model.MLP_DIM'"),
        ({"optimizer": "Adamm"}, r"frame_config.optimizer: cannot find 'Adamm'"),
        ({"models": ["math.pi", "entmachin.model.MLPCritic"]}, r"frame_config.models\[0\]: 'math.pi' is not a class or a callable"),
        ({"models": ["MLPActor", "MLPCritic"]}, r"frame_config.models\[0\]: 'MLPActor' is not an import path"),
    ],
)
def test_init_from_config_errors(frame_config, match):
    config = PPO.generate_config({"frame_config": {**MLP_CONFIG, **frame_config}})
    with pytest.raises(ValueError, match=match):
        PPO.init_from_config(config)


def test_init_from_config_checks_the_frame_name():
    with pytest.raises(ValueError, match=r"PPO.init_from_config: config\['frame'\] is 'A2C'; expected 'PPO'"):
        PPO.init_from_config(A2C.generate_config({"frame_config": MLP_CONFIG}))
    with pytest.raises(ValueError, match=r"PPO.init_from_config: expected a dict with a 'frame_config' entry"):
        PPO.init_from_config({})


def test_resolve_accepts_objects_and_colon_paths():
    assert resolve(torch.optim.Adam, "torch.optim", "x") is torch.optim.Adam
    assert resolve("torch.optim:SGD", None, "x") is torch.optim.SGD
    assert resolve("entmachin.model.MLPActor", None, "x") is MLPActor


@pytest.mark.parametrize(("cls", "config_cls"), [(A2C, A2CConfig), (PPO, PPOConfig), (DQN, DQNConfig)])
def test_signature_and_help_show_every_setting_from_its_one_declaration(cls, config_cls):
    """The constructor's keywords, defaults and Args lines are generated from the settings record."""
    signature = inspect.signature(cls)
    assert list(signature.parameters)[:4] == [*cls.network_names, "optimizer", "criterion"]
    assert inspect.signature(cls.__init__).parameters.keys() - {"self"} == signature.parameters.keys()
    help_text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    for field in dataclasses.fields(config_cls):
        parameter = signature.parameters[field.name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is field.default
        assert f"{field.name}: {doc_of(config_cls, field.name)} (default {field.default!r})." in help_text
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\(\) got an unexpected keyword argument 'batch_sise'; "
                                        r"did you mean 'batch_size'\?"):
        cls(None, None, None, None, batch_sise=3)


def test_a_subclass_keeps_its_own_constructor_and_inherits_the_generated_one_otherwise():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class MyConfig(PPOConfig):
        bonus: float = 0.0

    class Plain(PPO):  # no settings of its own: PPO's constructor, its own name in messages
        pass

    class Own(PPO):
        _config_cls = MyConfig

        def __init__(self, actor, critic, **kwargs):
            self.built_by_own = True
            super().__init__(actor, critic, torch.optim.Adam, nn.MSELoss(), **kwargs)

    actor, critic = MLPActor(3, 2), MLPCritic(3)
    assert inspect.signature(Plain) == inspect.signature(PPO)
    with pytest.raises(TypeError, match=r"^Plain\(\) got an unexpected keyword argument 'batch_sise'"):
        Plain(actor, critic, torch.optim.Adam, nn.MSELoss(), batch_sise=3)
    own = Own(actor, critic, batch_size=7)
    assert own.built_by_own and own.config.batch_size == 7
