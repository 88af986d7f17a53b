import numpy as np
import pytest

from entmachin.env import EnvList, ObsSpace, Entity, env_seeds, random_actions
from entmachin.env.env_list import to_env_actions
from entmachin.env.examples import MineSweeper
from entmachin.ragged.arrays import ragged_from_arrays, ragged_to_arrays
from test.env.toy import Toy


def rollout(envs, steps, seed=0):
    rng = np.random.default_rng(seed)
    out = [envs.reset()]
    for _ in range(steps):
        out.append(envs.act(random_actions(out[-1], envs.action_space(), rng)))
    return out


def flat(vec, etype):
    return ragged_to_arrays(vec.features[etype])


def test_same_seed_same_observations_and_different_envs_differ():
    a = rollout(EnvList(Toy, 4, seed=3), 6)
    b = rollout(EnvList(Toy, 4, seed=3), 6)
    for va, vb in zip(a, b):
        for etype in ("A", "B", "__global__"):
            for x, y in zip(flat(va, etype), flat(vb, etype)):
                np.testing.assert_array_equal(x, y)
    seeds = env_seeds(3, 4)
    assert len(set(seeds)) == 4 and env_seeds(3, 2) == seeds[:2]  # prefix-stable across sizes


def test_unseeded_envlist_leaves_envs_alone():
    assert env_seeds(None, 3) == [None, None, None]


def test_auto_reset_keeps_terminal_reward_metrics_and_final_obs():
    envs = EnvList(lambda: Toy(length=2), 3, seed=0)
    obs = rollout(envs, 2)
    last = obs[-1]
    assert last.done.all() and last.truncated.all()
    np.testing.assert_array_equal(last.reward, [2.0, 2.0, 2.0])  # the finished step's reward
    assert last.metrics["t"].mean == 2.0
    assert last.final_index.tolist() == [0, 1, 2]
    # the row already holds the new episode (t == 0); final_obs holds the last step (t == 2)
    assert ragged_to_arrays(last.features["__global__"])[0].reshape(-1).tolist() == [0, 0, 0]
    assert ragged_to_arrays(last.final_obs.features["__global__"])[0].reshape(-1).tolist() == [2, 2, 2]
    mid = obs[1]
    assert not mid.done.any() and mid.final_obs is None and mid.final_index.tolist() == []


def test_actions_reach_envs_as_ids_and_actee_positions():
    envs = EnvList(Toy, 2, seed=1)
    obs = envs.reset()
    acts = random_actions(obs, envs.action_space(), np.random.default_rng(0))
    envs.act(acts)
    for i, env in enumerate(envs.envs):
        got = env.received[-1]
        n_a = obs.features["A"].size1()[i]
        assert got["move"].actors == [("A", k) for k in range(n_a)]
        assert list(got["move"].indices) == ragged_to_arrays(acts["move"])[0].reshape(-1)[
            obs.features["A"].size1()[:i].sum():][:n_a].tolist()
        assert got["mode"].label in ("a", "c")  # "b" is masked
        chosen = ragged_to_arrays(acts["pick"])[0].reshape(-1)[obs.features["A"].size1()[:i].sum():][:n_a]
        assert got["pick"].actees == [("B", int(c)) for c in chosen]  # position in actee list -> id


def test_obs_filter_applies_to_every_step():
    envs = EnvList(Toy, 2, seed=0)
    filt = ObsSpace(global_features=["t"], entities={"B": Entity(["z"]), "A": Entity(["y"])})
    obs = envs.reset(filt)
    assert list(obs.features) == ["B", "A", "__global__"] and obs.features["A"].size2() == 1
    obs = envs.act(random_actions(obs, envs.action_space(), np.random.default_rng(0)))
    assert obs.features["A"].size2() == 1


@pytest.mark.parametrize(
    "mutate, exc, match",
    [
        (lambda a: {**a, "jump": a["move"]}, ValueError, r"actions\['jump'\]: unknown action; the environment has"),
        (lambda a: {**a, "move": np.zeros(3)}, TypeError, r"actions\['move'\]: expected a RaggedArrayI64, got ndarray"),
        (lambda a: {**a, "mode": ragged_from_arrays(np.zeros((1, 1), np.int64), [1])}, ValueError,
         r"actions\['mode'\] has 1 rows; expected one per environment \(2\)"),
        (lambda a: {**a, "mode": ragged_from_arrays(np.zeros((3, 1), np.int64), [2, 1])}, ValueError,
         r"actions\['mode'\] row 0 has 2 choices; the observation has 1 actors"),
        (lambda a: {**a, "mode": ragged_from_arrays(np.array([[0], [3]]), [1, 1])}, ValueError,
         r"actions\['mode'\] item 1 is 3; expected a value in \[0, 3\)"),
    ],
)
def test_bad_actions_raise_before_touching_envs(mutate, exc, match):
    envs = EnvList(lambda: Toy(max_a=1), 2, seed=0)  # no A entities: only the global action acts
    obs = envs.reset()
    acts = random_actions(obs, envs.action_space(), np.random.default_rng(0))
    with pytest.raises(exc, match=match):
        envs.act(mutate(acts))
    assert all(not env.received for env in envs.envs)


def test_select_entity_choice_out_of_actee_range_is_rejected():
    envs = EnvList(lambda: Toy(max_a=4), 8, seed=2)
    obs = envs.reset()
    acts = random_actions(obs, envs.action_space(), np.random.default_rng(0))
    values, lengths = ragged_to_arrays(acts["pick"])
    assert values.size, "seed should give some actors"
    values = np.full_like(values, 5)
    acts["pick"] = ragged_from_arrays(values, lengths)
    with pytest.raises(ValueError, match=r"actions\['pick'\] item 0 is 5; expected a value in \[0, [12]\)"):
        envs.act(acts)


def test_filter_dropping_a_type_that_actions_use_is_explained():
    envs = EnvList(Toy, 1, seed=0)
    with pytest.raises(ValueError, match=r"refers to entity types \['B'\], which the observation space \(or observation filter\) lacks"):
        envs.reset(ObsSpace(global_features=["t"], entities={"A": Entity(["y"])}))


def test_filter_dropping_a_type_whose_ids_actions_use_is_explained():
    envs = EnvList(lambda: MineSweeper(orbital_cannon=True, cooldown_period=0), 1, seed=0)
    no_mines = ObsSpace(entities={"Robot": Entity(["y", "x"]), "Orbital Cannon": Entity(["cooldown"])})
    with pytest.raises(ValueError, match=r"action 'Fire Orbital Cannon' refers to entity ids \[\('Mine', 0\).*which this "
                                         r"observation lacks \(or the observation filter dropped\)"):
        envs.reset(no_mines)


def test_act_before_reset_and_bad_sizes():
    with pytest.raises(RuntimeError, match="before reset"):
        EnvList(Toy, 1).act({})
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        EnvList(Toy, 0)


def test_env_errors_carry_the_environment_index():
    class Boom(Toy):
        def act(self, actions):
            raise RuntimeError("kaboom")

    envs = EnvList(Boom, 2, seed=0)
    obs = envs.reset()
    with pytest.raises(RuntimeError, match="kaboom") as info:
        envs.act(random_actions(obs, envs.action_space(), np.random.default_rng(0)))
    assert info.value.env_index == 0


@pytest.mark.parametrize("done", [False, True])
def test_malformed_observations_carry_the_environment_index(done):
    class Wide(Toy):
        def act(self, actions):
            obs = super().act(actions)
            obs.features["A"] = np.zeros((len(obs.features["A"]), 5), np.float32)
            obs.done = done
            return obs

    made = []

    def create():
        made.append(None)
        return Wide() if len(made) == 2 else Toy()  # environment 1 is the second one made

    envs = EnvList(create, 3, seed=0)
    obs = envs.reset()
    with pytest.raises(ValueError, match=r"row 1: features\['A'\] has shape \(\d+, 5\)") as info:
        envs.act(random_actions(obs, envs.action_space(), np.random.default_rng(0)))
    assert info.value.env_index == 1


def test_to_env_actions_skips_actions_absent_from_the_step():
    env = Toy()
    env.seed(0)
    o = env.reset()
    o.actions = {}
    assert to_env_actions(env.obs_space(), env.action_space(), {"move": np.zeros(0, np.int64)}, o) == {}


class _NoAddNote(ValueError):
    """An error as Python 3.10 raises them: without ``add_note``."""

    @property
    def add_note(self):
        raise AttributeError("add_note")


@pytest.mark.parametrize("error", [ValueError("bad"), _NoAddNote("bad")], ids=["add_note", "python-3.10"])
def test_an_environments_error_is_marked_with_its_index_and_a_note(error):
    from entmachin.env.common import mark_environment

    mark_environment(error, 3, MineSweeper())
    mark_environment(error, 3, MineSweeper())  # a second mark adds a second note, as add_note does
    assert error.env_index == 3
    assert error.__notes__ == ["in environment 3 (MineSweeper)"] * 2
