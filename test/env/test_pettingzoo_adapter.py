"""Tests for the PettingZoo Parallel-API adapter (``from_pettingzoo``).

Environments used:

* ``Race``, a small ``pettingzoo.ParallelEnv`` defined here: it removes agents mid-episode by
  termination, truncation or by simply dropping them from ``agents``, records the actions it
  receives and has seeded observations, so each rule of the adapter can be checked exactly.
* ``pettingzoo.classic.rps_v2`` (rock-paper-scissors, a Parallel env with a one-hot ``Discrete``
  observation), which needs ``pygame`` at import but no display: a whole shipped game, in
  ``EnvList`` rows per seat and trained by the runner.
* ``pettingzoo.test.example_envs.generated_agents_parallel_v0`` and its twin
  ``generated_agents_parallel_cust_agentid_v0`` (agents named by tuples), which PettingZoo ships
  and which import with gymnasium alone. They have no ``possible_agents``, give their agent types
  different spaces and add agents mid-episode, so they serve for the refusals and for one full
  (one-step, truncated) game with a seed whose agents all share one type.

Of the other shipped families, butterfly/sisl need pymunk or Box2D, Atari the compiled
``multi_agent_ale_py``, and MPE and MAgent moved to packages of their own.
"""
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

pettingzoo = pytest.importorskip("pettingzoo")
from gymnasium import spaces  # noqa: E402
from pettingzoo.test.example_envs import (  # noqa: E402
    generated_agents_parallel_cust_agentid_v0,
    generated_agents_parallel_v0,
)

from entmachin.env import (  # noqa: E402
    GlobalCategoricalAction,
    GlobalCategoricalActionSpace,
    PettingZooEnvironment,
    SpacesDifferError,
    batch_obs,
    from_pettingzoo,
    validate_observation,
)
from entmachin.env.multi_agent import check_game_step, game_results  # noqa: E402

AGENTS = ["runner_0", "runner_1", "runner_2"]


class Race(pettingzoo.ParallelEnv):
    """Agents run for at most ``max_cycles`` steps; each step's reward is the chosen action.

    ``leave[agent] = (step, how)`` removes ``agent`` after step ``step`` (1-based), ``how`` being
    ``"terminated"``, ``"truncated"`` or ``"vanish"`` (dropped from ``agents`` without a flag);
    its reward on that step gets 10 added. At ``max_cycles`` every remaining agent is truncated.
    Observations are ``(2, 2)`` floats: the step number and three seeded random numbers.
    """

    metadata = {"name": "race_v0"}

    def __init__(self, max_cycles=5, leave=None, action_space=None, spaces_of=None, render_mode=None,
                 possible_agents=None):
        self.possible_agents = list(possible_agents or AGENTS)
        self.max_cycles = max_cycles
        self.leave = leave or {}
        self._action_space = action_space or spaces.Discrete(3)
        self._observation_space = spaces.Box(0.0, 100.0, shape=(2, 2), dtype=np.float32)
        self.spaces_of = spaces_of or {}  # agent -> (observation space, action space) overrides
        self.render_mode = render_mode
        self.received: List[Dict[str, Any]] = []
        self.reset_seeds: List[Optional[int]] = []
        self.closed = False
        self.agents = []

    def observation_space(self, agent):
        return self.spaces_of.get(agent, (self._observation_space, None))[0]

    def action_space(self, agent):
        return self.spaces_of.get(agent, (None, self._action_space))[1]

    def _obs(self, agent):
        out = self.np_random.random((2, 2)).astype(np.float32)  # [2, 2]
        out[0, 0] = self.t
        return out

    def reset(self, seed=None, options=None):
        self.reset_seeds.append(seed)
        self.np_random = np.random.default_rng(seed)
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {"start": 1.0} for a in self.agents}

    def step(self, actions):
        self.received.append(dict(actions))
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        rewards = {a: float(np.sum(actions[a])) for a in self.agents}
        terminations = {a: False for a in self.agents}
        truncations = {a: self.t >= self.max_cycles for a in self.agents}
        infos = {a: {"t": self.t, "note": "text"} for a in self.agents}
        gone = []
        for agent in self.agents:
            step, how = self.leave.get(agent, (None, None))
            if step == self.t:
                rewards[agent] += 10.0
                if how == "terminated":
                    terminations[agent] = True
                elif how == "truncated":
                    truncations[agent] = True
                gone.append(agent)
        obs = {a: self._obs(a) for a in self.agents}
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a]) and a not in gone]
        return obs, rewards, terminations, truncations, infos

    def render(self):
        return None if self.render_mode is None else np.zeros((2, 2, 3), np.uint8)

    def close(self):
        self.closed = True


def pick(index: int) -> GlobalCategoricalAction:
    return GlobalCategoricalAction(index=index, label=str(index))


def random_actions(env: PettingZooEnvironment, by_seat, rng) -> Dict[str, Dict[str, GlobalCategoricalAction]]:
    """A random choice for every action of every seat with actors; an empty mapping for the others."""
    space = env.action_space()
    return {seat: {name: pick(int(rng.integers(len(space[name])))) for name in obs.actions}
            for seat, obs in by_seat.items()}


def play(env: PettingZooEnvironment, rng_seed: int = 0, max_steps: int = 100):
    """One game with random actions, every step checked; returns the observations of each step."""
    rng = np.random.default_rng(rng_seed)
    seats = env.seats()
    steps = [env.reset()]
    for _ in range(max_steps):
        for seat, obs in steps[-1].items():
            validate_observation(obs, env.obs_space(), env.action_space(), where=f"seat {seat}")
        if check_game_step("game", steps[-1], seats):
            return steps
        steps.append(env.act(random_actions(env, steps[-1], rng)))
    raise AssertionError(f"the game did not end in {max_steps} steps")


def features(steps) -> List[Dict[str, List[float]]]:
    return [{seat: np.asarray(o.global_features).tolist() for seat, o in by_seat.items()} for by_seat in steps]


# --------------------------------------------------------------------------- spaces and seats


def test_seats_and_spaces():
    env = from_pettingzoo(Race())
    assert isinstance(env, PettingZooEnvironment)
    assert env.seats() == AGENTS
    assert env.obs_space().global_features == ["obs_0", "obs_1", "obs_2", "obs_3"]
    assert env.obs_space().entities == {}
    assert env.action_space() == {"action": GlobalCategoricalActionSpace(["0", "1", "2"])}
    multi = from_pettingzoo(Race(action_space=spaces.MultiDiscrete([2, 4])))
    assert list(multi.action_space()) == ["action_0", "action_1"]


def test_non_string_agents_become_string_seats():
    env = from_pettingzoo(Race(possible_agents=[0, 1]))
    assert env.seats() == ["0", "1"]
    assert env.agent_of == {"0": 0, "1": 1}
    obs = env.reset()
    assert set(obs) == {"0", "1"}
    env.act({"0": {"action": pick(2)}, "1": {"action": pick(1)}})
    assert env.env.received == [{0: 2, 1: 1}]  # PettingZoo gets its own agent ids back


def test_agents_with_the_same_string_form_are_refused():
    with pytest.raises(ValueError, match=r"agents 1 and '1' both become seat '1'"):
        from_pettingzoo(Race(possible_agents=[1, "1"]))


def test_not_a_parallel_env_is_refused():
    with pytest.raises(TypeError, match=r"expected a PettingZoo ParallelEnv, got object without \['possible_agents'"):
        from_pettingzoo(object())
    nobody = Race()
    nobody.possible_agents = []
    with pytest.raises(ValueError, match=r"possible_agents is empty"):
        from_pettingzoo(nobody)


@pytest.mark.parametrize("kind, override", [
    ("observation", (spaces.Box(0.0, 1.0, shape=(5,), dtype=np.float32), spaces.Discrete(3))),
    ("action", (spaces.Box(0.0, 100.0, shape=(2, 2), dtype=np.float32), spaces.Discrete(4))),
])
def test_agents_with_different_spaces_are_refused(kind, override):
    with pytest.raises(SpacesDifferError, match=rf"agents 'runner_0' and 'runner_2' have different {kind} spaces") as e:
        from_pettingzoo(Race(spaces_of={"runner_2": override}))
    assert e.value.agents == ("runner_0", "runner_2") and e.value.kind == kind
    assert isinstance(e.value, ValueError)


def test_unsupported_spaces_are_refused():
    box = spaces.Box(-1.0, 1.0, shape=(2,))
    with pytest.raises(TypeError, match=r"from_pettingzoo: Box action spaces are not supported yet"):
        from_pettingzoo(Race(action_space=box))


def test_pettingzoo_is_not_imported_by_the_env_package():
    code = "import sys, entmachin.env; assert 'pettingzoo' not in sys.modules, 'pettingzoo imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- games


def test_a_random_game_checks_out_step_by_step():
    env = from_pettingzoo(Race(max_cycles=4))
    env.seed(1)
    steps = play(env)
    assert len(steps) == 5  # reset + 4 steps
    first, last = steps[0], steps[-1]
    assert all(not o.done and o.reward == 0.0 and list(o.actions) == ["action"] for o in first.values())
    assert first["runner_0"].metrics == {"start": 1.0}
    assert all(o.done and o.truncated and o.actions == {} for o in last.values())
    assert steps[1]["runner_1"].metrics == {"t": 1.0}  # numeric info only
    for by_seat, received in zip(steps[1:], env.env.received):  # rewards are the chosen actions
        assert {s: o.reward for s, o in by_seat.items()} == {a: float(v) for a, v in received.items()}
    returns = [sum(by_seat[s].reward for by_seat in steps) for s in env.seats()]
    assert sum(game_results([None] * 3, returns)) == pytest.approx(1.0)
    assert all(o.result is None for o in last.values())


def test_multidiscrete_actions_are_assembled():
    env = from_pettingzoo(Race(action_space=spaces.MultiDiscrete([2, 4], start=[1, 0])))
    env.reset()
    env.act({seat: {"action_0": pick(1), "action_1": pick(3)} for seat in env.seats()})
    assert [v.tolist() for v in env.env.received[0].values()] == [[2, 3]] * 3


def test_seeded_runs_repeat_and_later_resets_draw_their_seeds():
    def run(seed):
        env = from_pettingzoo(Race(max_cycles=3))
        env.seed(seed)
        games = [features(play(env, rng_seed=7)) for _ in range(2)]
        return games, env.env.reset_seeds

    (games_a, seeds_a), (games_b, seeds_b) = run(5), run(5)
    assert games_a == games_b and seeds_a == seeds_b
    assert seeds_a[0] == 5 and isinstance(seeds_a[1], int) and seeds_a[1] != 5
    assert games_a[0] != games_a[1]  # the second game has its own seed
    assert run(6)[0] != games_a
    unseeded = from_pettingzoo(Race())
    unseeded.reset()
    unseeded.reset()
    assert unseeded.env.reset_seeds == [None, None]


# --------------------------------------------------------------------------- agents leaving


def test_a_removed_agent_becomes_a_seat_without_actors():
    leave = {"runner_0": (2, "terminated"), "runner_1": (3, "truncated")}
    env = from_pettingzoo(Race(max_cycles=5, leave=leave))
    env.seed(0)
    seats = env.seats()
    env.reset()
    all_act = {seat: {"action": pick(1)} for seat in seats}
    s1 = env.act(all_act)
    assert all(list(o.actions) == ["action"] for o in s1.values())
    s2 = env.act(all_act)
    assert s2["runner_0"].actions == {} and s2["runner_0"].reward == 11.0  # its last reward, on its last step
    assert not check_game_step("step 2", s2, seats)
    final_features = np.asarray(s2["runner_0"].global_features).tolist()
    batch = batch_obs(list(s2.values()), env.obs_space(), env.action_space())
    assert batch.action_masks["action"].actors.size1().tolist() == [0, 1, 1]

    with pytest.raises(ValueError, match=r"seat 'runner_0' has no actors \(agent 'runner_0' is not in the game\)"):
        env.act(all_act)
    s3 = env.act({**all_act, "runner_0": {}})
    assert "runner_0" not in env.env.received[-1]  # PettingZoo receives no action for it
    assert s3["runner_0"].reward == 0.0 and s3["runner_0"].actions == {}
    assert np.asarray(s3["runner_0"].global_features).tolist() == final_features  # its last observation
    assert s3["runner_1"].reward == 11.0 and s3["runner_1"].actions == {}
    s4 = env.act({"runner_0": {}, "runner_1": {}, "runner_2": {"action": pick(2)}})
    assert env.env.received[-1] == {"runner_2": 2}
    assert [o.reward for o in s4.values()] == [0.0, 0.0, 2.0]
    s5 = env.act({"runner_0": {}, "runner_1": {}, "runner_2": {"action": pick(0)}})
    assert check_game_step("step 5", s5, seats)
    # runner_0 terminated, runner_1 and runner_2 were truncated without termination
    assert {s: o.truncated for s, o in s5.items()} == {"runner_0": False, "runner_1": True, "runner_2": True}
    for obs in s5.values():
        validate_observation(obs, env.obs_space(), env.action_space())


def test_the_game_ends_when_every_agent_has_left():
    leave = {"runner_0": (1, "vanish"), "runner_1": (2, "terminated"), "runner_2": (2, "truncated")}
    env = from_pettingzoo(Race(max_cycles=9, leave=leave))
    steps = play(env)
    assert len(steps) == 3
    # the end came by a termination: runner_2 alone was truncated; runner_0 just left env.agents
    assert {s: o.truncated for s, o in steps[-1].items()} == {"runner_0": False, "runner_1": False, "runner_2": True}
    first, second = env.env.received
    assert first.keys() == set(AGENTS) and second.keys() == {"runner_1", "runner_2"}
    assert steps[1]["runner_0"].reward == first["runner_0"] + 10.0  # its last reward, on the step it left
    assert steps[1]["runner_0"].actions == {}
    assert {s: o.reward for s, o in steps[2].items()} == {
        "runner_0": 0.0, "runner_1": second["runner_1"] + 10.0, "runner_2": second["runner_2"] + 10.0}
    with pytest.raises(RuntimeError, match=r"the game is over .* call reset\(\) first"):
        env.act({seat: {} for seat in env.seats()})
    assert all(list(o.actions) == ["action"] for o in env.reset().values())  # a new game: every seat acts


# --------------------------------------------------------------------------- bad input


def test_bad_actions_are_refused():
    env = from_pettingzoo(Race())
    with pytest.raises(RuntimeError, match=r"was never started"):
        env.act({})
    env.reset()
    good = {seat: {"action": pick(0)} for seat in env.seats()}
    with pytest.raises(ValueError, match=r"actions omit seat\(s\) \['runner_2'\]"):
        env.act({"runner_0": good["runner_0"], "runner_1": good["runner_1"]})
    with pytest.raises(ValueError, match=r"actions name unknown seat\(s\) \['runner_9'\]"):
        env.act({**good, "runner_9": {}})
    with pytest.raises(ValueError, match=r"seat 'runner_1': actions \['action'\] are missing"):
        env.act({**good, "runner_1": {}})
    with pytest.raises(ValueError, match=r"seat 'runner_1': actions\['action'\].index is 3; expected \[0, 3\)"):
        env.act({**good, "runner_1": {"action": pick(3)}})
    with pytest.raises(TypeError, match=r"seat 'runner_1': actions\['action'\] must be a GlobalCategoricalAction"):
        env.act({**good, "runner_1": {"action": 1}})
    with pytest.raises(TypeError, match=r"actions\['runner_1'\] must be a mapping"):
        env.act({**good, "runner_1": [pick(0)]})
    assert env.env.received == []  # nothing reached the environment
    env.act(good)
    assert len(env.env.received) == 1


def test_bad_environment_output_is_refused():
    env = Race()
    env.reset = lambda seed=None, options=None: {a: np.zeros((2, 2), np.float32) for a in AGENTS}
    with pytest.raises(TypeError, match=r"reset returned dict; expected \(observations, infos\)"):
        from_pettingzoo(env).reset()
    env = Race()
    original = env.step
    env.step = lambda actions: original(actions)[:4]
    adapted = from_pettingzoo(env)
    adapted.reset()
    with pytest.raises(TypeError, match=r"step returned a 4-tuple; expected \(observations, rewards"):
        adapted.act({seat: {"action": pick(0)} for seat in adapted.seats()})


def test_render_and_close_forward():
    env = from_pettingzoo(Race(render_mode="rgb_array"))
    assert env.render().shape == (2, 2, 3)
    with pytest.raises(TypeError, match=r"render takes no arguments"):
        env.render(mode="human")
    with pytest.raises(ValueError, match=r"render\(\) returned None; create it with render_mode='rgb_array'"):
        from_pettingzoo(Race()).render()
    env.close()
    assert env.env.closed


# --------------------------------------------------------------------------- an environment PettingZoo ships


def generated(seed: int, max_cycles: int, module=generated_agents_parallel_v0):
    """A generated-agents env after ``reset(seed)``, with ``possible_agents`` set to the agents
    that reset made (it declares none, since it adds agents as it goes)."""
    env = module.parallel_env(max_cycles=max_cycles)
    env.reset(seed=seed)
    env.possible_agents = list(env.agents)
    return env


def agent_type(agent) -> str:
    return agent[0] if isinstance(agent, tuple) else agent.rsplit("_", 1)[0]


def one_type_seed(module=generated_agents_parallel_v0) -> int:
    """A seed whose five starting agents all have one type, hence one pair of spaces."""
    for seed in range(1000):
        env = module.parallel_env()
        env.reset(seed=seed)
        if len({agent_type(agent) for agent in env.agents}) == 1:
            return seed
    raise AssertionError("no seed in range(1000) gives agents of a single type")


def test_shipped_env_without_possible_agents_is_refused():
    with pytest.raises(TypeError, match=r"without \['possible_agents'\]"):
        from_pettingzoo(generated_agents_parallel_v0.parallel_env())


def test_shipped_env_agent_types_with_different_spaces_are_refused():
    env = generated(0, max_cycles=0)
    assert len({agent_type(agent) for agent in env.agents}) > 1
    with pytest.raises(SpacesDifferError, match=r"have different observation spaces \(Box"):
        from_pettingzoo(env)


@pytest.mark.parametrize("module", [generated_agents_parallel_v0, generated_agents_parallel_cust_agentid_v0])
def test_shipped_env_plays_a_seeded_truncated_game(module):
    seed = one_type_seed(module)

    def game():
        env = from_pettingzoo(generated(seed, max_cycles=0, module=module))  # max_cycles=0: all truncated at once
        env.seed(seed)  # the same seed, hence the same agents and spaces
        return env, play(env)

    env, steps = game()
    assert env.seats() == [str(agent) for agent in env.env.possible_agents] and len(steps) == 2
    assert all(o.done and o.truncated and o.actions == {} for o in steps[-1].values())
    assert sum(o.reward for o in steps[-1].values()) == 1.0  # the env rewards one agent per step
    assert features(steps) == features(game()[1])


def test_shipped_env_adding_an_agent_is_refused():
    env = from_pettingzoo(generated(one_type_seed(), max_cycles=1000))
    env.seed(one_type_seed())
    by_seat = env.reset()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"env.agents holds \['type\d_\d+'\], which possible_agents lacks"):
        for _ in range(200):  # the env adds an agent with probability ~0.27 per step
            by_seat = env.act(random_actions(env, by_seat, rng))


def rock_paper_scissors():
    """PettingZoo's own rock-paper-scissors (``pettingzoo.classic.rps_v2``) as entmachin sees it: two seats, a
    one-hot Discrete observation (the other's last throw), a Discrete(3) throw, games of 5 simultaneous steps."""
    pytest.importorskip("pygame")  # pettingzoo.classic imports it (no display is needed)
    from pettingzoo.classic import rps_v2

    return from_pettingzoo(rps_v2.parallel_env(num_actions=3, max_cycles=5))


def test_a_shipped_game_plays_in_env_list_rows_per_seat_and_trains():
    from entmachin.env import EnvList, ValidatingEnv, random_actions
    from entmachin.run.config import config_from_dict
    from entmachin.run.runner import Runner

    env = rock_paper_scissors()
    assert env.seats() == ["player_0", "player_1"]
    assert env.obs_space().global_features == ["obs_0", "obs_1", "obs_2", "obs_3"]  # one-hot: 3 throws, or none
    envs = EnvList(lambda: ValidatingEnv(rock_paper_scissors()), 3, seed=0)
    vec, rng, ended = envs.reset(), np.random.default_rng(0), 0
    np.testing.assert_array_equal(vec.features["__global__"].as_array(), np.tile([0, 0, 0, 1], (6, 1)))
    for _ in range(10):
        vec = envs.act(random_actions(vec, envs.action_space(), rng))
        ended += int(vec.done.sum())
        assert vec.features["__global__"].as_array().sum(axis=1).tolist() == [1.0] * 6
    assert ended == 12  # two games of 5 steps in each of 3 environments, 2 seats each
    assert set(vec.result[vec.done].tolist()) <= {0.0, 0.5, 1.0} and vec.truncated[vec.done].all()
    config = config_from_dict({"env": {"name": "test.env.test_pettingzoo_adapter:rock_paper_scissors"},
                               "model": {"d_model": 16, "n_layer": 1}, "frame": {"batch_size": 32},
                               "rollout": {"num_envs": 4, "n_steps": 8}, "train": {"total_steps": 64},
                               "log": {"eval_interval": 64, "eval_episodes": 6, "eval_opponents": ["random"]}})
    runner = Runner(config, os.path.join(tempfile.mkdtemp(), "run"), progress=False)
    result = runner.train()
    assert result.env_steps == 64 and 0.0 <= runner.state.evals[-1]["win_rate"]["random"] <= 1.0


def test_a_discrete_observation_out_of_its_space_is_refused():
    env = rock_paper_scissors()
    with pytest.raises(ValueError, match=r"observation 7 is not a value of Discrete\(4\)"):
        env.spaces.flat(7, "from_pettingzoo")
