"""``rollout.processes: auto``: worker processes only where the cores and the measured step costs say they pay."""
import dataclasses

import numpy as np
import pytest
import yaml

from entmachin.env import CategoricalActionMask, CategoricalActionSpace, Entity, Environment, Observation, ObsSpace
from entmachin.run import build
from entmachin.run.build import decide_overlap, decide_processes, measure_step_costs
from entmachin.run.config import ConfigError, config_from_dict
from entmachin.run.runner import Runner


def config(**rollout):
    return config_from_dict({"env": {"name": "Skirmish"}, "rollout": rollout})


@pytest.fixture
def no_probe(monkeypatch):
    """Fails a test that measures step costs where the decision needs none."""
    monkeypatch.setattr(build, "measure_step_costs", lambda *a, **k: pytest.fail("measured step costs"))


def test_auto_is_the_default_and_a_number_is_taken_as_it_is(no_probe):
    assert config().rollout.processes == "auto"
    assert decide_processes(config(processes=3), n_cores=2) == (3, "rollout.processes: 3 worker processes")
    assert decide_processes(config(processes=0), n_cores=64)[0] == 0


@pytest.mark.parametrize("cores, said", [(2, "2 cores leave"), (1, "1 core leaves")])
def test_on_one_or_two_cores_auto_steps_in_this_process_without_measuring(no_probe, cores, said):
    n, note = decide_processes(config(), n_cores=cores)
    assert n == 0 and "auto chose 0" in note and f"{said} worker processes no core of their own" in note


def test_behaviour_cloning_and_ray_workers_need_no_probe(no_probe):
    bc = config_from_dict({"env": {"name": "ConnectFour"}, "frame": {"name": "BC"}, "bc": {"data": "x"}})
    assert decide_processes(bc, n_cores=32) == (0, "rollout.processes: auto chose 0: behaviour cloning steps no "
                                                   "environments while it trains")
    n, note = decide_processes(config(workers="auto"), n_cores=8)
    assert n == 7 and "7 Ray workers, one per core of this machine beside the learner's (8 cores)" in note


@pytest.mark.parametrize("costs, cores, chosen", [
    ((50e-3, 2e-3), 16, 13),  # environments dominate: many workers
    ((50e-3, 2e-3), 4, 3),  # ... but one core stays the learner's
    ((8e-3, 1.7e-3), 16, 5),  # Skirmish-like: a few
    ((2e-3, 1.2e-3), 16, 0),  # MineSweeper-like: the round trips would eat the gain
])
def test_auto_chooses_the_workers_the_costs_predict_fastest(costs, cores, chosen):
    n, note = decide_processes(config(), n_cores=cores, costs=costs)
    assert n == chosen
    assert f"{cores} cores" in note and (f"auto chose {chosen} worker processes" if chosen else "auto chose 0") in note
    if chosen:  # the predicted step is the fastest over every count the cores allow, and pays enough
        step = lambda p: costs[1] * (1 + build.UPDATE_PER_ACT) + (costs[0] / p + build.WORKER_ROUND_TRIP_S * p if p
                                                                  else costs[0])  # noqa: E731
        assert all(step(n) <= step(p) for p in range(2, cores))
        assert step(0) / step(n) >= build.AUTO_PROCESSES_MIN_GAIN


def test_no_more_workers_than_environments():
    n, _ = decide_processes(config(num_envs=3), n_cores=64, costs=(1.0, 1e-3))
    assert n == 3


def test_the_probe_measures_the_runs_own_environments_and_network():
    env_s, act_s = measure_step_costs(config(num_envs=4), budget_s=0.01)
    assert 0 < env_s < 1 and 0 < act_s < 1


def test_overlap_true_with_auto_choosing_fewer_than_two_workers_is_refused(no_probe):
    data = config(overlap=True)  # accepted when loaded: auto might choose workers
    n, _ = decide_processes(data, n_cores=2)
    resolved = dataclasses.replace(data, rollout=dataclasses.replace(data.rollout, processes=n))  # as the runner does
    with pytest.raises(ConfigError, match=r"rollout\.overlap: true, but rollout\.processes is 0; halves need two or "
                                          r"more worker processes; set rollout\.processes to 2 or more"):
        decide_overlap(resolved)


@pytest.mark.parametrize("value, message", [("many", r"rollout\.processes: expected an int or one of 'auto'"),
                                            (-1, r"processes: expected an int >= 0, got -1")])
def test_bad_processes_are_named(value, message):
    with pytest.raises(ConfigError, match=message):
        config(processes=value)


def test_a_run_says_what_auto_chose_in_its_log_and_config(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(build, "available_cores", lambda: 2)
    run_dir = tmp_path / "run"
    data = {"env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4}, "frame": {"batch_size": 16},
            "train": {"total_steps": 32}, "log": {"eval_interval": 10_000, "checkpoint_interval": 10_000}}
    with caplog.at_level("INFO"):
        Runner(config_from_dict(data), str(run_dir), progress=False).train()
    text = (run_dir / "config.yaml").read_text()
    assert "# rollout.processes: auto chose 0 (the environments step in this process): 2 cores" in text
    assert yaml.safe_load(text)["rollout"]["processes"] == "auto"  # a rerun decides again, on its machine
    assert any("rollout.processes: auto chose 0" in r.getMessage() for r in caplog.records)


class Broken(Environment):
    """Raises at its first act: the probe meets the error in this process, as processes: 0 does."""

    def __init__(self):
        self.rng = np.random.default_rng()

    def obs_space(self):
        return ObsSpace(entities={"A": Entity(["x"])})

    def action_space(self):
        return {"go": CategoricalActionSpace(["a", "b"])}

    def reset(self):
        return Observation(features={"A": np.zeros((1, 1), np.float32)}, ids={"A": [0]},
                           actions={"go": CategoricalActionMask(actor_ids=[0])}, reward=0.0, done=False)

    def act(self, actions):
        raise ValueError("Broken.act: the step failed")


def test_an_environment_that_raises_stops_the_probe_with_its_own_error(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "available_cores", lambda: 8)
    data = {"env": {"name": f"{__name__}:Broken"}, "rollout": {"num_envs": 2, "n_steps": 4},
            "frame": {"batch_size": 8}, "train": {"total_steps": 64}}
    with pytest.raises(ValueError, match="Broken.act: the step failed"):
        Runner(config_from_dict(data), str(tmp_path / "run"), progress=False).train()
    assert not (tmp_path / "run").exists()
