"""GymnasiumVecEnv: the same VecObs as EnvList over from_gymnasium, its errors, and PPO collection."""
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from entmachin.env import EnvList, GlobalContinuousActionSpace, GymnasiumVecEnv, ObsSpace, VecObs, from_gymnasium
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.frame import PPO, RolloutCollector, global_actions, global_state
from entmachin.model import MLPActor, MLPCritic
from entmachin.ragged.array import RaggedArrayF32, RaggedArrayI64


class Dice(gym.Env):
    """Draws observations, rewards and endings from its seeded stream; info depends on the action."""

    def __init__(self, action_space: spaces.Space, obs_shape=(2, 3)):
        self.action_space = action_space
        self.observation_space = spaces.Box(-1.0, 1.0, shape=obs_shape, dtype=np.float64)
        self.received: List[Any] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, self.observation_space.shape), {"start": 1, "name": "dice"}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"Dice received {action!r}, outside {self.action_space}")
        self.received.append(action)
        total = float(np.sum(action))
        obs = self.np_random.uniform(-1, 1, self.observation_space.shape)  # float64, cast by the adapters
        terminated = bool(self.np_random.random() < 0.15)
        info: Dict[str, Any] = {"score": total, "flag": True, "vector": np.ones(2)}
        if terminated:
            info["bonus"] = np.float32(self.np_random.random())  # a key that appears only sometimes
        return obs, np.float64(total * 0.25 + self.np_random.random()), terminated, False, info


def make_dice(action_space: spaces.Space, max_steps: int = 6):
    return lambda: gym.wrappers.TimeLimit(Dice(action_space), max_episode_steps=max_steps)


def ragged(values, lengths=None) -> RaggedArrayI64:
    flat = np.asarray(values, dtype=np.int64).reshape(-1, 1)  # [n_items, 1]
    lengths = np.ones(len(flat), np.int64) if lengths is None else np.asarray(lengths, np.int64)
    return RaggedArrayI64.from_flattened(flat, lengths)


def box_values(values) -> RaggedArrayF32:
    flat = np.asarray(values, dtype=np.float32)  # [num_envs, n_values]: one actor per row
    return RaggedArrayF32.from_flattened(flat, np.ones(len(flat), np.int64))


def random_actions(rng: np.random.Generator, envs) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, space in envs.action_space().items():
        if isinstance(space, GlobalContinuousActionSpace):
            out[name] = box_values(rng.uniform(space.low, space.high, size=(len(envs), len(space))))
        else:
            out[name] = ragged(rng.integers(0, len(space.index_to_label), len(envs)))
    return out


def assert_same_ragged(a, b, where: str) -> None:
    assert type(a) is type(b), where
    np.testing.assert_array_equal(a.size1(), b.size1(), err_msg=where)
    assert a.size2() == b.size2(), where
    np.testing.assert_array_equal(a.as_array(), b.as_array(), err_msg=where)


def assert_same_vec(a: VecObs, b: VecObs, where: str = "vec") -> None:
    assert list(a.features) == list(b.features), where
    for etype in a.features:
        assert_same_ragged(a.features[etype], b.features[etype], f"{where}.features[{etype}]")
    assert a.visible == {} and b.visible == {}, where
    assert list(a.action_masks) == list(b.action_masks), where
    for name, mask in a.action_masks.items():
        other = b.action_masks[name]
        assert type(mask) is type(other), where
        assert_same_ragged(mask.actors, other.actors, f"{where}.action_masks[{name}].actors")
        assert (mask.mask is None) == (other.mask is None), where
        if mask.mask is not None:
            assert_same_ragged(mask.mask, other.mask, f"{where}.action_masks[{name}].mask")
        for side in ("low", "high"):  # continuous bounds
            x, y = getattr(mask, side, None), getattr(other, side, None)
            assert (x is None) == (y is None), f"{where}.action_masks[{name}].{side}"
            if x is not None:
                assert_same_ragged(x, y, f"{where}.action_masks[{name}].{side}")
    for field in ("reward", "done", "truncated", "final_index"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype, f"{where}.{field}: {x.dtype} != {y.dtype}"
        np.testing.assert_array_equal(x, y, err_msg=f"{where}.{field}")
    assert list(a.metrics) == list(b.metrics) and a.metrics == b.metrics, where
    assert (a.final_obs is None) == (b.final_obs is None), where
    if a.final_obs is not None:
        assert_same_vec(a.final_obs, b.final_obs, f"{where}.final_obs")


def run_both(create_env, num_envs: int, n_steps: int, seed: int = 3,
             filters: Optional[Dict[int, ObsSpace]] = None, obs_config: Optional[ObsSpace] = None) -> List[VecObs]:
    """Steps GymnasiumVecEnv and EnvList side by side, asserting equal VecObs; returns ours."""
    filters = filters or {}
    fast = GymnasiumVecEnv(create_env, num_envs, seed=seed)
    slow = EnvList(lambda: from_gymnasium(create_env()), num_envs, seed=seed)
    assert fast.obs_space() == slow.obs_space() and fast.action_space() == slow.action_space()
    assert len(fast) == len(slow) == num_envs
    ours = [fast.reset(obs_config)]
    assert_same_vec(ours[0], slow.reset(obs_config), "reset")
    rng = np.random.default_rng(seed)
    for t in range(n_steps):
        actions = random_actions(rng, fast)
        vec = fast.act(actions, filters.get(t))
        assert_same_vec(vec, slow.act(actions, filters.get(t)), f"step {t}")
        ours.append(vec)
    return ours


def ended(vecs: List[VecObs]):
    terminated = sum(int((v.done & ~v.truncated).sum()) for v in vecs)
    truncated = sum(int((v.done & v.truncated).sum()) for v in vecs)
    return terminated, truncated


def test_cartpole_matches_env_list():
    vecs = run_both(lambda: gym.make("CartPole-v1", max_episode_steps=30), 4, 200)
    terminated, truncated = ended(vecs)
    assert terminated > 0 and truncated > 0  # both ways of ending were compared
    assert vecs[0].features[GLOBAL_ENTITY].size2() == 4


def test_multidiscrete_with_metrics_matches_env_list():
    vecs = run_both(make_dice(spaces.MultiDiscrete([3, 2], start=[1, -1])), 3, 150)
    terminated, truncated = ended(vecs)
    assert terminated > 0 and truncated > 0
    assert {"start"} == set(vecs[0].metrics)
    assert any("bonus" in v.metrics for v in vecs) and all("vector" not in v.metrics for v in vecs)


def test_multidiscrete_2d_nvec_matches_env_list():
    run_both(make_dice(spaces.MultiDiscrete([[2, 3], [4, 2]])), 2, 40)


def test_discrete_with_start_matches_env_list():
    vecs = run_both(make_dice(spaces.Discrete(3, start=-1)), 3, 100)
    assert all(ended(vecs))


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCarContinuous-v0"])
def test_box_actions_match_env_list(env_id):
    vecs = run_both(lambda: gym.make(env_id, max_episode_steps=25), 3, 60)
    assert ended(vecs) == (0, 6)  # both cut by gymnasium's TimeLimit at step 25 and 50: truncated, bootstrapped
    space = GlobalContinuousActionSpace(low=-2.0, high=2.0) if env_id == "Pendulum-v1" else \
        GlobalContinuousActionSpace(low=-1.0, high=1.0)
    for vec in vecs[:3] + [vecs[25].final_obs]:  # every actor's bounds: the space's, as EnvList's batches carry them
        mask = vec.action_masks["action"]
        np.testing.assert_array_equal(mask.low.as_array(), np.tile(space.low, (len(vec), 1)))
        np.testing.assert_array_equal(mask.high.as_array(), np.tile(space.high, (len(vec), 1)))


def test_pendulum_is_truncated_at_its_own_time_limit():
    envs = GymnasiumVecEnv(lambda: gym.make("Pendulum-v1"), 2, seed=0)
    assert envs.action_space() == {"action": GlobalContinuousActionSpace(low=[-2.0], high=[2.0], names=["0"])}
    envs.reset()
    rng = np.random.default_rng(0)
    for t in range(200):
        vec = envs.act(random_actions(rng, envs))
        assert vec.done.all() == (t == 199)
    assert vec.truncated.tolist() == [True, True] and vec.final_index.tolist() == [0, 1]


def test_a_multidimensional_box_matches_env_list_and_reaches_the_environments():
    box = spaces.Box(np.array([[-1, 0], [2, -3]], np.float32), np.array([[1, 1], [4, 3]], np.float32))
    run_both(make_dice(box), 2, 40)
    envs = GymnasiumVecEnv(lambda: Dice(box), 2)
    envs.reset()
    sent = box_values([[0.5, 0.25, 3.0, -3.0], [-1.0, 1.0, 2.0, 3.0]])
    envs.act({"action": sent})
    received = [env.received[0] for env in envs.envs]
    assert all(r.dtype == np.float32 and r.shape == (2, 2) and box.contains(r) for r in received)
    assert [r.tolist() for r in received] == [[[0.5, 0.25], [3.0, -3.0]], [[-1.0, 1.0], [2.0, 3.0]]]
    assert not any(np.shares_memory(r, sent.as_array()) for r in received)


@pytest.fixture
def pendulums():
    envs = GymnasiumVecEnv(lambda: gym.make("Pendulum-v1"), 2, seed=0)
    envs.reset()
    return envs


@pytest.mark.parametrize(
    "actions, error, match",
    [
        ({"action": ragged([0, 1])}, TypeError, r"actions\['action'\]: expected a RaggedArrayF32 \(a continuous "
                                                r"action\), got RaggedArrayI64"),
        ({"action": box_values([[0.0], [2.5]])}, ValueError,
         r"actions\['action'\] row 1, actor 0, value '0' \(dimension 0\): 2.5 is outside its bounds \[-2.0, 2.0\]"),
        ({"action": box_values([[np.nan], [0.0]])}, ValueError,
         r"row 0, actor 0, value '0' \(dimension 0\): nan is not finite"),
        ({"action": box_values([[0.0, 0.0], [0.0, 0.0]])}, ValueError,
         r"actions\['action'\] has 2 values per actor; the space has 1"),
        ({"action": box_values([[0.0], [0.0], [0.0]])}, ValueError,
         r"actions\['action'\] has 3 rows; expected one per environment \(2\)"),
        ({}, ValueError, r"GymnasiumVecEnv.act: actions \['action'\] are missing; got \[\]"),
        ({"action": box_values([[0.0], [0.0]]), "jump": ragged([0, 1])}, ValueError,
         r"actions\['jump'\]: unknown action; the environment has \['action'\]"),
    ],
)
def test_bad_box_actions_are_rejected(pendulums, actions, error, match):
    before = [env.unwrapped.state.copy() for env in pendulums.envs]
    with pytest.raises(error, match=match):
        pendulums.act(actions)
    for env, state in zip(pendulums.envs, before):  # refused before any environment stepped
        np.testing.assert_array_equal(env.unwrapped.state, state)
    slow = EnvList(lambda: from_gymnasium(gym.make("Pendulum-v1")), 2, seed=0)
    slow.reset()
    with pytest.raises(error, match=match.replace("GymnasiumVecEnv.act: ", "")):  # EnvList's own words
        slow.act(actions)


def test_get_state_continues_the_episodes(pendulums):
    rng = np.random.default_rng(1)
    for _ in range(5):
        pendulums.act(random_actions(rng, pendulums))
    state = pendulums.get_state()
    again = GymnasiumVecEnv(lambda: gym.make("Pendulum-v1"), 2, seed=7)
    again.set_state(state)
    actions = random_actions(rng, pendulums)
    assert_same_vec(pendulums.act(actions), again.act(actions))
    with pytest.raises(ValueError, match=r"set_state: the state holds 2 environments .*; this GymnasiumVecEnv has 3"):
        GymnasiumVecEnv(lambda: gym.make("Pendulum-v1"), 3).set_state(state)


class ListObs(Dice):
    """Returns observations as nested lists, or flattened, instead of arrays of the declared shape."""

    def step(self, action):
        obs, *rest = super().step(action)
        return (obs.tolist() if len(self.received) % 2 else obs.reshape(-1), *rest)


def test_observations_that_are_not_arrays_of_the_declared_shape_match_env_list():
    run_both(lambda: gym.wrappers.TimeLimit(ListObs(spaces.Discrete(2)), max_episode_steps=5), 2, 30)


def test_feature_filters_match_env_list():
    some = ObsSpace(global_features=["obs_3", "obs_0"])
    none = ObsSpace(global_features=[])
    vecs = run_both(lambda: gym.make("CartPole-v1", max_episode_steps=12), 3, 40, obs_config=some,
                    filters={20: none, 30: ObsSpace(global_features=[f"obs_{i}" for i in range(4)])})
    assert vecs[5].features[GLOBAL_ENTITY].size2() == 2
    assert vecs[25].features[GLOBAL_ENTITY].size2() == 0  # a filter given to act stays in force
    assert vecs[-1].features[GLOBAL_ENTITY].size2() == 4


def test_actions_reach_the_environments():
    envs = GymnasiumVecEnv(lambda: Dice(spaces.MultiDiscrete([3, 2], start=[10, 0])), 2)
    envs.reset()
    envs.act({"action_0": ragged([2, 0]), "action_1": ragged([1, 0])})
    received = [env.received[0] for env in envs.envs]
    assert all(isinstance(r, np.ndarray) and r.dtype == np.int64 for r in received)
    assert [r.tolist() for r in received] == [[12, 1], [10, 0]]
    envs = GymnasiumVecEnv(lambda: Dice(spaces.Discrete(3, start=-1)), 2)
    envs.reset()
    envs.act({"action": ragged([0, 2])})
    assert [env.received for env in envs.envs] == [[-1], [1]]
    assert all(type(env.received[0]) is int for env in envs.envs)


def test_returned_buffers_are_the_callers():
    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), 2, seed=0)
    first = envs.reset()
    kept = first.features[GLOBAL_ENTITY].as_array().copy()
    second = envs.act({"action": ragged([0, 1])})
    first.extend(second)  # extending one result leaves the environments' own state alone
    np.testing.assert_array_equal(first.features[GLOBAL_ENTITY].as_array()[:2], kept)
    assert len(envs.act({"action": ragged([1, 1])})) == 2


def test_a_gymnasium_environment_adapter_is_accepted():
    envs = GymnasiumVecEnv(lambda: from_gymnasium(gym.make("CartPole-v1")), 2, seed=0)
    other = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), 2, seed=0)
    assert_same_vec(envs.reset(), other.reset())


def test_render_stacks_and_close_closes():
    class Framed(Dice):
        def render(self):
            return np.zeros((4, 5, 3), np.uint8)

        def close(self):
            closed.append(self)

    closed: List[Any] = []
    envs = GymnasiumVecEnv(lambda: Framed(spaces.Discrete(2)), 3)
    envs.reset()
    assert envs.render().shape == (3, 4, 5, 3)
    with pytest.raises(TypeError, match="render takes no arguments.*'mode'"):
        envs.render(mode="human")
    envs.close()
    assert len(closed) == 3


# --------------------------------------------------------------------------- bad input


@pytest.fixture
def cartpoles():
    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), 2, seed=0)
    envs.reset()
    return envs


@pytest.mark.parametrize(
    "actions, error, match",
    [
        ({"action": np.zeros(2)}, TypeError, r"actions\['action'\]: expected a RaggedArrayI64, got ndarray"),
        ({"action": RaggedArrayF32.from_flattened(np.zeros((2, 1), np.float32), np.ones(2, np.int64))},
         TypeError, r"actions\['action'\]: expected a RaggedArrayI64, got RaggedArrayF32"),
        ({"action": ragged([0, 1, 0])}, ValueError,
         r"actions\['action'\] has 3 rows; expected one per environment \(2\)"),
        ({"action": ragged([0, 1], [2, 0])}, ValueError,
         r"actions\['action'\] row 0 has 2 choices; the observation has 1 actors"),
        ({"action": ragged([0, 2])}, ValueError, r"actions\['action'\] item 1 is 2; expected a value in \[0, 2\)"),
        ({"action": ragged([-1, 0])}, ValueError, r"actions\['action'\] item 0 is -1; expected a value in \[0, 2\)"),
        ({"action": ragged([0, 1]), "jump": ragged([0, 1])}, ValueError,
         r"actions\['jump'\]: unknown action; the environment has \['action'\]"),
        ({}, ValueError, r"GymnasiumVecEnv.act: actions \['action'\] are missing; got \[\]"),
        ({"action": RaggedArrayI64.from_flattened(np.zeros((2, 2), np.int64), np.ones(2, np.int64))}, ValueError,
         r"every action needs one value per actor; got widths \{'action': 2\}"),
    ],
)
def test_bad_actions_are_rejected(cartpoles, actions, error, match):
    with pytest.raises(error, match=match):
        cartpoles.act(actions)


def test_missing_component_of_a_multidiscrete_action():
    envs = GymnasiumVecEnv(lambda: Dice(spaces.MultiDiscrete([3, 2])), 2)
    envs.reset()
    with pytest.raises(ValueError, match=r"actions \['action_1'\] are missing; got \['action_0'\]"):
        envs.act({"action_0": ragged([0, 1])})


def test_act_before_reset():
    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), 2)
    with pytest.raises(RuntimeError, match=r"GymnasiumVecEnv.act called before reset\(\)"):
        envs.act({"action": ragged([0, 1])})


def test_construction_errors():
    with pytest.raises(TypeError, match=r"expected a gymnasium.Env, got object without \['observation_space'"):
        GymnasiumVecEnv(object, 2)
    with pytest.raises(TypeError, match=r"from_gymnasium: MultiBinary action spaces are not supported yet"):
        GymnasiumVecEnv(lambda: Dice(spaces.MultiBinary(2)), 2)
    with pytest.raises(ValueError, match=r"from_gymnasium: Dice's Box action space has bounds \[-inf, 1.0\] in "
                                         r"dimension 0 .*need finite bounds"):
        GymnasiumVecEnv(lambda: Dice(spaces.Box(-np.inf, 1.0, shape=(2,), dtype=np.float32)), 2)
    with pytest.raises(ValueError, match=r"GymnasiumVecEnv: num_envs must be >= 1, got 0"):
        GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), 0)
    with pytest.raises(TypeError, match=r"GymnasiumVecEnv: num_envs must be an int, got str"):
        GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), "2")
    with pytest.raises(TypeError, match=r"GymnasiumVecEnv: num_envs must be an int, got bool"):
        GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), True)
    sizes = iter([2, 3])
    with pytest.raises(ValueError, match=r"GymnasiumVecEnv: environment 1 has observation space .*; environment 0 has"):
        GymnasiumVecEnv(lambda: Dice(spaces.Discrete(next(sizes))), 2)


def test_bad_filters_are_rejected_before_stepping(cartpoles):
    with pytest.raises(ValueError, match=r"observation filter names entity type 'Robot'; the environment has \[\]"):
        cartpoles.reset(ObsSpace(entities={"Robot": None}))
    before = [env.unwrapped.state.copy() for env in cartpoles.envs]
    with pytest.raises(ValueError, match=r"observation filter global_features asks for features \['obs_9'\]"):
        cartpoles.act({"action": ragged([0, 1])}, ObsSpace(global_features=["obs_9"]))
    for env, state in zip(cartpoles.envs, before):
        np.testing.assert_array_equal(env.unwrapped.state, state)


class Broken(Dice):
    def __init__(self, mode: str):
        super().__init__(spaces.Discrete(2))
        self.mode = mode

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.mode == "four":
            return obs, reward, terminated, info
        if self.mode == "size":
            return np.zeros(5), reward, terminated, truncated, info
        if self.mode == "raise":
            raise RuntimeError("physics exploded")
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize(
    "mode, error, match",
    [
        ("four", TypeError, r"environment 1 \(Broken\).step returned a 4-tuple; expected \(observation, reward"),
        ("size", ValueError, r"environment 1 returned an observation of 5 values; the observation space .* declares 6"),
        ("raise", RuntimeError, "physics exploded"),
    ],
)
def test_broken_environments_are_named(mode, error, match):
    modes = iter(["ok", mode])
    envs = GymnasiumVecEnv(lambda: Broken(next(modes)), 2)
    envs.reset()
    with pytest.raises(error, match=match) as info:
        envs.act({"action": ragged([0, 1])})
    assert info.value.env_index == 1
    assert info.value.__notes__ == ["in environment 1 (Broken)"]


def test_a_failing_reset_is_named():
    class NoInfo(Dice):
        def reset(self, *, seed=None, options=None):
            return np.zeros((2, 3)), None, None

    envs = GymnasiumVecEnv(lambda: NoInfo(spaces.Discrete(2)), 2)
    with pytest.raises(TypeError, match=r"NoInfo.reset returned tuple; expected \(observation, info\)") as info:
        envs.reset()
    assert info.value.env_index == 0 and info.value.__notes__ == ["in environment 0 (NoInfo)"]


# --------------------------------------------------------------------------- PPO


def test_rollout_collector_with_dense_ppo():
    torch.manual_seed(0)
    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1", max_episode_steps=4), 3, seed=0)
    ppo = PPO(MLPActor(4, 2, d_hidden=(8,)), MLPCritic(4, d_hidden=(8,)), torch.optim.Adam, nn.MSELoss(),
              batch_size=6, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=6, state_fn=global_state, action_fn=global_actions())
    stats = collector.collect()
    assert stats.n_env_steps == 18 and ppo.replay_buffer.size() == 18
    assert stats.episode_lengths == (4, 4, 4)  # truncated rows bootstrapped from final_obs
    assert np.isfinite(ppo.update()).all()

