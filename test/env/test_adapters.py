"""Tests for the gymnasium adapter and the duck-typed entity-gym adapter."""
import logging
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from entmachin.env import action as em
from entmachin.env.adapters import (
    EntityGymAdapter,
    GymnasiumEnvironment,
    ensure_environment,
    from_gymnasium,
)
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.env_list import EnvList
from entmachin.env.time_limit import TimeLimit
from entmachin.env.environment import Observation as EmObservation
from entmachin.ragged.array import RaggedArrayF32, RaggedArrayI64


def ragged(rows: List[List[int]]) -> RaggedArrayI64:
    flat = np.array([v for row in rows for v in row], dtype=np.int64).reshape(-1, 1)  # [n_items, 1]
    return RaggedArrayI64.from_flattened(flat, np.array([len(r) for r in rows], dtype=np.int64))


# --------------------------------------------------------------------------- gymnasium


class ToyEnv(gym.Env):
    """Records the actions it receives; ends as told by ``script`` (terminated, truncated)."""

    def __init__(self, action_space, observation_space=None, script=None, step_result_len=5, info=None, frame=None):
        self.action_space = action_space
        self.observation_space = observation_space or spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float32)
        self.script = script or {}
        self.step_result_len = step_result_len
        self.info = info or {}
        self.frame = frame
        self.received: List[Any] = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.arange(6, dtype=np.float32).reshape(2, 3), {}

    def step(self, action):
        self.received.append(action)
        self.t += 1
        terminated, truncated = self.script.get(self.t, (False, False))
        obs = np.full((2, 3), self.t, dtype=np.float32)
        result = (obs, 1, terminated, truncated, dict(self.info))
        return result[:4] if self.step_result_len == 4 else result

    def render(self):
        return self.frame


def global_action(index: int) -> em.GlobalCategoricalAction:
    return em.GlobalCategoricalAction(index=index, label=str(index))


def test_cartpole_spaces_and_step():
    env = from_gymnasium(gym.make("CartPole-v1"))
    assert isinstance(env, GymnasiumEnvironment)
    assert env.obs_space().global_features == ["obs_0", "obs_1", "obs_2", "obs_3"]
    assert env.obs_space().entities == {}
    assert env.action_space() == {"action": em.GlobalCategoricalActionSpace(["0", "1"])}
    env.seed(3)
    obs = env.reset()
    assert obs.global_features.dtype == np.float32 and obs.global_features.shape == (4,)
    obs = env.act({"action": global_action(1)})
    assert obs.reward == 1.0 and isinstance(obs.reward, float)
    assert not obs.done and not obs.truncated
    env.close()


def test_cartpole_through_env_list():
    envs = EnvList(lambda: from_gymnasium(gym.make("CartPole-v1")), 3, seed=0)
    vec = envs.reset()
    assert vec.features[GLOBAL_ENTITY].size1().tolist() == [1, 1, 1]
    assert vec.features[GLOBAL_ENTITY].size2() == 4
    assert vec.action_masks["action"].actors.as_array().reshape(-1).tolist() == [0, 0, 0]
    for _ in range(40):  # long enough for episodes to end under a constant push
        vec = envs.act({"action": ragged([[1], [1], [1]])})
    assert len(vec) == 3


def test_discrete_start_offsets_the_received_action():
    toy = ToyEnv(spaces.Discrete(3, start=-1))
    env = from_gymnasium(toy)
    assert env.action_space()["action"].index_to_label == ["0", "1", "2"]
    env.reset()
    env.act({"action": global_action(0)})
    env.act({"action": global_action(2)})
    assert toy.received == [-1, 1]
    assert env.obs_space().global_features == [f"obs_{i}" for i in range(6)]


def test_multidiscrete_one_action_per_component():
    toy = ToyEnv(spaces.MultiDiscrete([3, 2], start=[10, 0]))
    envs = EnvList(lambda: from_gymnasium(toy), 1)
    assert envs.action_space() == {
        "action_0": em.GlobalCategoricalActionSpace(["0", "1", "2"]),
        "action_1": em.GlobalCategoricalActionSpace(["0", "1"]),
    }
    envs.reset()
    envs.act({"action_0": ragged([[2]]), "action_1": ragged([[1]])})
    (received,) = toy.received
    assert isinstance(received, np.ndarray) and received.tolist() == [12, 1]
    assert toy.action_space.contains(received)


def test_multidiscrete_2d_nvec_keeps_its_shape():
    toy = ToyEnv(spaces.MultiDiscrete([[2, 3], [4, 5]]))
    env = from_gymnasium(toy)
    assert list(env.action_space()) == ["action_0", "action_1", "action_2", "action_3"]
    env.reset()
    env.act({f"action_{i}": global_action(i) for i in range(4)})
    assert toy.received[0].tolist() == [[0, 1], [2, 3]]


def test_time_limit_truncation_through_env_list():
    envs = EnvList(lambda: from_gymnasium(gym.make("CartPole-v1", max_episode_steps=3)), 2, seed=1)
    envs.reset()
    for _ in range(2):
        vec = envs.act({"action": ragged([[0], [1]])})
        assert not vec.done.any()
    vec = envs.act({"action": ragged([[0], [1]])})
    assert vec.done.tolist() == [True, True]
    assert vec.truncated.tolist() == [True, True]
    assert vec.final_index.tolist() == [0, 1]


@pytest.mark.parametrize(
    "terminated, truncated, done, expect_truncated",
    [(True, False, True, False), (False, True, True, True), (True, True, True, False), (False, False, False, False)],
)
def test_terminated_and_truncated_kept_apart(terminated, truncated, done, expect_truncated):
    env = from_gymnasium(ToyEnv(spaces.Discrete(2), script={1: (terminated, truncated)}))
    env.reset()
    obs = env.act({"action": global_action(0)})
    assert (obs.done, obs.truncated) == (done, expect_truncated)


def test_numeric_info_becomes_metrics():
    info = {"score": 2, "ratio": np.float32(0.5), "zero_d": np.array(3.0), "flag": True,
            "name": "x", "nan": float("nan"), "episode": {"r": 1.0}, "vector": np.ones(2)}
    env = from_gymnasium(ToyEnv(spaces.Discrete(2), info=info))
    env.reset()
    obs = env.act({"action": global_action(0)})
    assert obs.metrics == {"score": 2.0, "ratio": 0.5, "zero_d": 3.0}


def _rollout(seed: int, n_steps: int) -> List[np.ndarray]:
    envs = EnvList(lambda: from_gymnasium(gym.make("CartPole-v1")), 2, seed=seed)
    frames = [envs.reset().features[GLOBAL_ENTITY].as_array().copy()]
    for t in range(n_steps):
        vec = envs.act({"action": ragged([[t % 2], [1]])})
        frames.append(vec.features[GLOBAL_ENTITY].as_array().copy())
    return frames


def test_env_list_seed_is_reproducible():
    first, second = _rollout(0, 30), _rollout(0, 30)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0][0], first[0][1])  # each environment has its own seed
    assert not np.array_equal(_rollout(1, 0)[0], first[0])


def test_later_resets_continue_the_stream():
    env = from_gymnasium(gym.make("CartPole-v1"))
    env.seed(5)
    a = env.reset().global_features
    b = env.reset().global_features
    env.seed(np.int64(5))  # numpy integers are accepted too
    np.testing.assert_array_equal(env.reset().global_features, a)
    assert not np.array_equal(a, b)


def test_render_and_close_forward():
    env = from_gymnasium(ToyEnv(spaces.Discrete(2), frame=np.zeros((4, 5, 3), np.uint8)))
    env.reset()
    assert env.render().shape == (4, 5, 3)
    with pytest.raises(TypeError, match="render takes no arguments.*'mode'"):
        env.render(mode="human")
    closed = []
    toy = ToyEnv(spaces.Discrete(2))
    toy.close = lambda: closed.append(True)
    from_gymnasium(toy).close()
    assert closed == [True]


def test_render_without_render_mode_raises():
    env = from_gymnasium(ToyEnv(spaces.Discrete(2)))
    with pytest.raises(ValueError, match=r"returned None.*render_mode='rgb_array'"):
        env.render()


def box_action(*values: float) -> em.GlobalContinuousAction:
    names = [str(i) for i in range(len(values))]
    return em.GlobalContinuousAction(values=np.array(values, dtype=np.float32), names=names)


def ragged_f32(rows: List[List[float]]) -> RaggedArrayF32:
    flat = np.array(rows, dtype=np.float32)  # [n_rows, n_values]: one actor per row
    return RaggedArrayF32.from_flattened(flat, np.ones(len(rows), dtype=np.int64))


@pytest.mark.parametrize("env_id, low, high", [("Pendulum-v1", -2.0, 2.0), ("MountainCarContinuous-v0", -1.0, 1.0)])
def test_a_box_action_becomes_one_global_continuous_action(env_id, low, high):
    env = from_gymnasium(gym.make(env_id))
    assert env.action_space() == {"action": em.GlobalContinuousActionSpace(low=[low], high=[high], names=["0"])}
    assert env.obs_space().entities == {}
    env.seed(0)
    obs = env.reset()
    assert obs.actions == {"action": em.GlobalContinuousActionMask()}
    obs = env.act({"action": box_action(high)})
    assert isinstance(obs.reward, float) and obs.global_features.dtype == np.float32


def test_a_box_of_several_dimensions_is_flattened_and_reshaped():
    box = spaces.Box(low=np.array([[-1.0, 0.0, -3.0], [0.0, -2.0, 1.0]], np.float32),
                     high=np.array([[1.0, 5.0, 3.0], [0.5, 2.0, 4.0]], np.float32), dtype=np.float32)
    toy = ToyEnv(box)
    env = from_gymnasium(toy)
    (space,) = env.action_space().values()
    assert space.names == ["0", "1", "2", "3", "4", "5"]
    assert space.low.tolist() == [-1.0, 0.0, -3.0, 0.0, -2.0, 1.0] and space.high.tolist() == [1, 5, 3, 0.5, 2, 4]
    env.reset()
    values = np.array([0.5, 4.0, -3.0, 0.25, 2.0, 1.5], dtype=np.float32)
    sent = box_action(*values)
    env.act({"action": sent})
    (received,) = toy.received
    assert received.dtype == np.float32 and received.shape == (2, 3) and box.contains(received)
    np.testing.assert_array_equal(received, values.reshape(2, 3))
    assert not np.shares_memory(received, sent.values)  # the environment may keep what it receives


def test_pendulum_random_actions_through_env_list_truncate_at_its_time_limit():
    envs = EnvList(lambda: from_gymnasium(gym.make("Pendulum-v1")), 2, seed=0)
    vec = envs.reset()
    rng = np.random.default_rng(0)
    for t in range(200):
        values = rng.uniform(-2.0, 2.0, size=(2, 1))
        vec = envs.act({"action": ragged_f32(values.tolist())})
        assert vec.done.all() == (t == 199)
    assert vec.truncated.tolist() == [True, True]  # gymnasium's TimeLimit: bootstrapped, not terminal
    assert vec.final_index.tolist() == [0, 1] and np.isfinite(vec.reward).all()


@pytest.mark.parametrize("low, high, dimension", [
    (-np.inf, 1.0, 0),
    (np.array([-1.0, 0.0], np.float32), np.array([1.0, np.inf], np.float32), 1),
])
def test_a_box_action_with_an_infinite_bound_is_refused(low, high, dimension):
    toy = ToyEnv(spaces.Box(low, high, shape=(2,), dtype=np.float32))
    with pytest.raises(ValueError, match=rf"from_gymnasium: ToyEnv's Box action space has bounds .* in dimension "
                                         rf"{dimension} .*need finite bounds"):
        from_gymnasium(toy)


def test_bad_box_actions_are_refused():
    toy = ToyEnv(spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32))
    env = from_gymnasium(toy)
    env.reset()
    with pytest.raises(ValueError, match=r"value '1' \(dimension 1\) is 1.5; expected a finite value in \[-1.0, 1.0\]"):
        env.act({"action": box_action(0.0, 1.5)})
    with pytest.raises(ValueError, match=r"value '0' \(dimension 0\) is nan"):
        env.act({"action": box_action(np.nan, 0.0)})
    with pytest.raises(ValueError, match=r"values has shape \(3,\); the Box action .* takes \(2,\)"):
        env.act({"action": box_action(0.0, 0.0, 0.0)})
    with pytest.raises(TypeError, match=r"actions\['action'\] must be a GlobalContinuousAction, got GlobalCategorical"):
        env.act({"action": global_action(0)})
    with pytest.raises(ValueError, match=r"actions \['action'\] are missing"):
        env.act({})
    assert toy.received == []
    envs = EnvList(lambda: from_gymnasium(ToyEnv(spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32))), 2)
    envs.reset()
    with pytest.raises(ValueError, match=r"actions\['action'\] row 1, actor 0, value '0' \(dimension 0\): 2.0 is "
                                         r"outside"):
        envs.act({"action": ragged_f32([[0.0, 0.0], [2.0, 0.0]])})
    with pytest.raises(TypeError, match=r"actions\['action'\]: expected a RaggedArrayF32 \(a continuous action\)"):
        envs.act({"action": ragged([[0], [1]])})


def test_other_action_spaces_are_rejected():
    with pytest.raises(TypeError, match=r"from_gymnasium: MultiBinary action spaces are not supported yet.*"
                                        r"Discrete, MultiDiscrete and Box"):
        from_gymnasium(ToyEnv(spaces.MultiBinary(3)))


@pytest.mark.parametrize(
    "obs_space, name",
    [
        (spaces.Dict({"a": spaces.Discrete(2)}), "Dict"),
        (spaces.Tuple([spaces.Discrete(2)]), "Tuple"),
    ],
)
def test_unsupported_observation_space_is_rejected(obs_space, name):
    with pytest.raises(TypeError, match=f"from_gymnasium: {name} observation spaces are not supported yet"):
        from_gymnasium(ToyEnv(spaces.Discrete(2), observation_space=obs_space))


def test_not_a_gymnasium_env_is_rejected():
    with pytest.raises(TypeError, match=r"expected a gymnasium.Env, got object without \['observation_space'"):
        from_gymnasium(object())


def test_old_gym_step_api_is_rejected():
    env = from_gymnasium(ToyEnv(spaces.Discrete(2), step_result_len=4))
    env.reset()
    with pytest.raises(TypeError, match=r"step returned a 4-tuple; expected \(observation, reward, terminated"):
        env.act({"action": global_action(0)})


def test_reset_without_info_is_rejected():
    toy = ToyEnv(spaces.Discrete(2))
    toy.reset = lambda **kw: np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"reset returned ndarray; expected \(observation, info\)"):
        from_gymnasium(toy).reset()


def test_observation_of_the_wrong_size_is_rejected():
    toy = ToyEnv(spaces.Discrete(2))
    toy.reset = lambda **kw: (np.zeros(5, np.float32), {})
    with pytest.raises(ValueError, match="observation has 5 values; the observation space .* declares 6"):
        from_gymnasium(toy).reset()


def test_bad_actions_are_rejected():
    env = from_gymnasium(ToyEnv(spaces.MultiDiscrete([3, 2])))
    env.reset()
    with pytest.raises(ValueError, match=r"actions \['action_1'\] are missing; got \['action_0'\]"):
        env.act({"action_0": global_action(0)})
    with pytest.raises(ValueError, match=r"actions\['action_1'\].index is 2; expected \[0, 2\)"):
        env.act({"action_0": global_action(0), "action_1": global_action(2)})
    wrong = em.CategoricalAction(actors=[0], indices=np.zeros(1, np.int64), index_to_label=["0"])
    match = r"actions\['action_0'\] must be a GlobalCategoricalAction, got CategoricalAction"
    with pytest.raises(TypeError, match=match):
        env.act({"action_0": wrong, "action_1": global_action(0)})


# --------------------------------------------------------------------------- entity-gym look-alikes

FAKE = "fake_entity_gym"


@dataclass
class Entity:
    features: List[str]


@dataclass
class ObsSpace:
    global_features: List[str] = field(default_factory=list)
    entities: Dict[str, Entity] = field(default_factory=dict)


@dataclass
class CategoricalActionSpace:
    index_to_label: List[str]


@dataclass
class GlobalCategoricalActionSpace:
    index_to_label: List[str]


@dataclass
class SelectEntityActionSpace:
    pass


@dataclass
class CategoricalActionMask:
    actor_ids: Optional[List[Any]] = None
    actor_types: Optional[List[str]] = None
    mask: Any = None


@dataclass
class GlobalCategoricalActionMask:
    mask: Any = None


@dataclass
class SelectEntityActionMask:
    actor_ids: Optional[List[Any]] = None
    actor_types: Optional[List[str]] = None
    actee_types: Optional[List[str]] = None
    actee_ids: Optional[List[Any]] = None
    mask: Any = None


@dataclass
class CategoricalAction:
    actors: List[Any]
    indices: np.ndarray
    index_to_label: List[str]
    probs: Any = None


@dataclass
class SelectEntityAction:
    actors: List[Any]
    actees: List[Any]
    probs: Any = None


@dataclass
class GlobalCategoricalAction:
    index: int
    label: str
    probs: Any = None


class FakeObservation:
    def __init__(self, *, features, ids, actions, done, reward, global_features=None, visible=None, metrics=None):
        self.features, self.ids, self.actions = features, ids, actions
        self.done, self.reward = done, reward
        self.global_features = global_features if global_features is not None else []
        self.visible = visible or {}
        self.metrics = metrics or {}


FAKE_CLASSES = [
    Entity, ObsSpace, CategoricalActionSpace, GlobalCategoricalActionSpace, SelectEntityActionSpace,
    CategoricalActionMask, GlobalCategoricalActionMask, SelectEntityActionMask,
    CategoricalAction, SelectEntityAction, GlobalCategoricalAction,
]
for _cls in FAKE_CLASSES:
    _cls.__module__ = FAKE
FakeObservation.__name__ = FakeObservation.__qualname__ = "Observation"
FakeObservation.__module__ = FAKE


@pytest.fixture
def fake_package(monkeypatch):
    module = types.ModuleType(FAKE)
    for cls in FAKE_CLASSES + [FakeObservation]:
        setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, FAKE, module)
    return module


class FakeEnv:
    """Two robots move and pick one of three boxes; a global mode is chosen each step."""

    def __init__(self, n_steps: int = 3):
        self.n_steps = n_steps
        self.received: List[Dict[str, Any]] = []
        self.t = 0

    def obs_space(self):
        return ObsSpace(
            global_features=["t"],
            entities={"Robot": Entity(["x", "y"]), "Box": Entity(["w"])},
        )

    def action_space(self):
        return {
            "move": CategoricalActionSpace(["left", "right", "stay"]),
            "pick": SelectEntityActionSpace(),
            "mode": GlobalCategoricalActionSpace(["a", "b"]),
        }

    def reset(self):
        self.t = 0
        return self._obs()

    def act(self, actions):
        self.received.append(dict(actions))
        self.t += 1
        return self._obs()

    def _obs(self):
        return FakeObservation(
            features={
                "Robot": np.array([[self.t, 0.0], [self.t, 1.0]], dtype=np.float32),
                "Box": np.array([[1.0], [2.0], [3.0]], dtype=np.float32),
            },
            ids={"Robot": ["r0", "r1"], "Box": ["b0", "b1", "b2"]},
            actions={
                "move": CategoricalActionMask(actor_types=["Robot"], mask=np.array([[1, 1, 0], [1, 1, 1]], bool)),
                "pick": SelectEntityActionMask(actor_ids=["r1"], actee_types=["Box"]),
                "mode": GlobalCategoricalActionMask(),
            },
            done=self.t >= self.n_steps,
            reward=float(self.t),
            global_features=[float(self.t)],
            visible={"Box": [True, False, True]},
            metrics={"t": float(self.t)},
        )


class SeedableFakeEnv(FakeEnv):
    def __init__(self):
        super().__init__()
        self.seeds: List[Optional[int]] = []

    def seed(self, seed):
        self.seeds.append(seed)


def test_env_list_runs_an_entity_gym_env(fake_package):
    created: List[FakeEnv] = []

    def make():
        created.append(FakeEnv())
        return EntityGymAdapter(created[-1])

    envs = EnvList(make, 3)
    assert list(envs.obs_space().entities) == ["Robot", "Box"]
    assert envs.obs_space().global_features == ["t"]
    assert type(envs.action_space()["move"]).__module__ == "entmachin.env.action"
    vec = envs.reset()
    assert vec.features["Robot"].size1().tolist() == [2, 2, 2]
    assert vec.features["Box"].size1().tolist() == [3, 3, 3]
    assert vec.visible["Box"].as_array().reshape(-1).tolist() == [True, False, True] * 3
    assert vec.action_masks["move"].actors.as_array().reshape(-1).tolist() == [0, 1] * 3
    assert vec.action_masks["pick"].actors.as_array().reshape(-1).tolist() == [1] * 3
    assert vec.action_masks["pick"].actees.as_array().reshape(-1).tolist() == [2, 3, 4] * 3
    assert vec.action_masks["mode"].actors.as_array().reshape(-1).tolist() == [5] * 3

    vec = envs.act({
        "move": ragged([[0, 1], [1, 2], [2, 0]]),
        "pick": ragged([[0], [1], [2]]),
        "mode": ragged([[1], [0], [1]]),
    })
    assert vec.reward.tolist() == [1.0, 1.0, 1.0]
    assert vec.metrics["t"].mean == 1.0
    for k, env in enumerate(created):
        (got,) = env.received
        assert type(got["move"]) is CategoricalAction  # the wrapped package's own classes
        assert type(got["pick"]) is SelectEntityAction
        assert type(got["mode"]) is GlobalCategoricalAction
        assert list(got["move"].actors) == ["r0", "r1"]
        assert got["move"].indices.tolist() == [[0, 1], [1, 2], [2, 0]][k]
        assert got["move"].index_to_label == ["left", "right", "stay"]
        assert list(got["pick"].actors) == ["r1"]
        assert list(got["pick"].actees) == [["b0"], ["b1"], ["b2"]][k]
        assert (got["mode"].index, got["mode"].label) == [(1, "b"), (0, "a"), (1, "b")][k]


def test_env_list_auto_resets_an_entity_gym_env(fake_package):
    envs = EnvList(lambda: EntityGymAdapter(FakeEnv(n_steps=2)), 2)
    envs.reset()
    actions = {"move": ragged([[0, 0]] * 2), "pick": ragged([[0]] * 2), "mode": ragged([[0]] * 2)}
    envs.act(actions)
    vec = envs.act(actions)
    assert vec.done.tolist() == [True, True] and not vec.truncated.any()
    assert vec.reward.tolist() == [2.0, 2.0]
    assert vec.features[GLOBAL_ENTITY].as_array().reshape(-1).tolist() == [0.0, 0.0]  # next episode
    assert vec.final_obs.features[GLOBAL_ENTITY].as_array().reshape(-1).tolist() == [2.0, 2.0]


def test_env_list_wraps_an_entity_gym_env_by_itself(fake_package):
    envs = EnvList(lambda: FakeEnv(n_steps=2), 2)
    assert all(isinstance(e, EntityGymAdapter) for e in envs.envs)
    envs.reset()
    actions = {"move": ragged([[0, 0]] * 2), "pick": ragged([[0]] * 2), "mode": ragged([[0]] * 2)}
    envs.act(actions)
    assert envs.act(actions).done.all()


def test_time_limit_wraps_an_entity_gym_env_through_its_adapter(fake_package):
    # A step limit on an unported environment: seeding and stepping go through the adapter (the
    # raw class has no seed()), and the cut is marked truncated as for any environment.
    envs = EnvList(lambda: TimeLimit(FakeEnv(n_steps=10), 2), 2, seed=0)
    assert all(isinstance(e.env, EntityGymAdapter) for e in envs.envs)
    envs.reset()
    actions = {"move": ragged([[0, 0]] * 2), "pick": ragged([[0]] * 2), "mode": ragged([[0]] * 2)}
    envs.act(actions)
    vec = envs.act(actions)
    assert vec.done.all() and vec.truncated.all()
    seedable = TimeLimit(SeedableFakeEnv(), 5)
    seedable.seed(7)
    assert seedable.env.env.seeds == [7]


def test_actions_fall_back_to_entmachin_classes_without_the_module():
    # FAKE is not in sys.modules here, so the adapter uses entmachin's dataclasses.
    fake = FakeEnv()
    env = EntityGymAdapter(fake)
    env.reset()
    env.act({"mode": em.GlobalCategoricalAction(index=0, label="a")})
    assert type(fake.received[0]["mode"]).__module__ == "entmachin.env.action"


def test_ensure_environment(fake_package):
    own = from_gymnasium(ToyEnv(spaces.Discrete(2)))
    assert ensure_environment(own) is own
    wrapped = ensure_environment(FakeEnv())
    assert isinstance(wrapped, EntityGymAdapter)
    envs = EnvList(lambda: ensure_environment(FakeEnv()), 2)
    assert envs.reset().features["Robot"].size1().tolist() == [2, 2]


def test_ensure_environment_rejects_other_objects():
    with pytest.raises(TypeError, match=r"object is neither .* lacks \['obs_space', 'action_space', 'reset', 'act'\]"):
        ensure_environment(object())
    match = r"ToyEnv is neither .* lacks \['obs_space', 'action_space', 'act'\]; for a gymnasium environment use"
    with pytest.raises(TypeError, match=match):
        ensure_environment(ToyEnv(spaces.Discrete(2)))
    with pytest.raises(TypeError, match=r"EntityGymAdapter: object lacks \['obs_space'"):
        EntityGymAdapter(object())


def test_seed_forwards_when_the_env_has_seed(fake_package):
    envs = EnvList(lambda: EntityGymAdapter(SeedableFakeEnv()), 2, seed=0)
    seeds = [e.env.seeds for e in envs.envs]
    assert len(seeds[0]) == 1 and len(seeds[1]) == 1 and seeds[0] != seeds[1]


def test_seed_without_env_seed_warns_once(fake_package, caplog):
    class UnseedableFakeEnv(FakeEnv):
        pass

    with caplog.at_level(logging.WARNING, logger="entmachin.env.adapters"):
        EnvList(lambda: EntityGymAdapter(UnseedableFakeEnv()), 3, seed=0)
        EntityGymAdapter(UnseedableFakeEnv()).seed(1)
    warnings = [r for r in caplog.records if "UnseedableFakeEnv has no seed" in r.getMessage()]
    assert len(warnings) == 1


def test_render_and_close_forward_to_the_entity_gym_env():
    fake = FakeEnv()
    calls = []
    fake.render = lambda **kw: calls.append(("render", kw)) or np.zeros((1, 1, 3), np.uint8)
    fake.close = lambda: calls.append(("close", {}))
    env = EntityGymAdapter(fake)
    assert env.render(scale=2).shape == (1, 1, 3)
    env.close()
    assert calls == [("render", {"scale": 2}), ("close", {})]
    with pytest.raises(NotImplementedError, match="FakeEnv does not implement render"):
        EntityGymAdapter(FakeEnv()).render()


def test_unknown_action_space_is_rejected():
    fake = FakeEnv()
    fake.action_space = lambda: {"jump": object()}
    with pytest.raises(TypeError, match=r"action_space\(\)\['jump'\] is a object; expected a CategoricalActionSpace"):
        EntityGymAdapter(fake).action_space()


def test_unknown_mask_is_rejected():
    fake = FakeEnv()
    obs = fake.reset()
    obs.actions = {"move": object()}
    fake.reset = lambda: obs
    with pytest.raises(TypeError, match=r"observation actions\['move'\] is a object; expected a CategoricalActionMask"):
        EntityGymAdapter(fake).reset()


def test_non_observation_is_rejected():
    fake = FakeEnv()
    fake.reset = lambda: {"features": {}}
    match = r"FakeEnv.reset\(\) returned a dict without \['features', 'actions', 'done', 'reward'\]"
    with pytest.raises(TypeError, match=match):
        EntityGymAdapter(fake).reset()


def test_entmachin_observation_passes_through():
    fake = FakeEnv()
    fake.reset = lambda: EmObservation(
        features={"Robot": np.zeros((1, 2), np.float32)}, ids={"Robot": ["r0"]},
        actions={"move": em.CategoricalActionMask(actor_ids=["r0"])}, done=False, reward=0.0, truncated=True,
    )
    obs = EntityGymAdapter(fake).reset()
    assert obs.truncated and obs.actions["move"].actor_ids == ["r0"]


def test_a_discrete_observation_becomes_one_hot_global_features():
    import gymnasium

    env = from_gymnasium(gymnasium.make("FrozenLake-v1"))
    env.seed(0)
    assert env.obs_space().global_features == [f"obs_{k}" for k in range(16)]
    features = np.asarray(env.reset().global_features)
    assert features.shape == (16,) and features[0] == 1.0 and features.sum() == 1.0  # the start cell
