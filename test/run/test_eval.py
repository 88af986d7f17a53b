"""``entmachin eval`` says how it evaluated, an exported run evaluates the same way by default, and
most likely and sampled actions are both reported when they differ widely."""
import os

import numpy as np
import pytest

from entmachin.env import CategoricalActionMask, CategoricalActionSpace, Entity, Environment, Observation, ObsSpace
from entmachin.env.episodes import EvalResult
from entmachin.run.cli import main
from entmachin.run.evaluation import differ_widely, evaluate_checkpoint

pytest.importorskip("onnxruntime")

from entmachin.deploy import OnnxPolicy  # noqa: E402

TINY = ["--set", "rollout.num_envs=4", "--set", "rollout.n_steps=4", "--set", "model.d_model=8", "--set",
        "model.d_qk=8", "--set", "train.total_steps=16", "--set", "log.eval_episodes=2", "--set",
        "log.checkpoint_interval=16", "--no-progress"]


class Alternate(Environment):
    """A robot paid for changing its move: the same observation every step, so always taking the
    most likely move earns nothing, while sampling from a near-uniform policy earns about half
    the steps. 10 steps, unless ``endless``."""

    def __init__(self, endless=False):
        self.endless, self.t, self.last = endless, 0, None

    def obs_space(self):
        return ObsSpace(entities={"Robot": Entity(["x"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        self.t, self.last = 0, None
        return self._obs(0.0)

    def act(self, actions):
        self.t += 1
        move = int(actions["move"].indices[0])
        reward = float(self.last is not None and move != self.last)
        self.last = move
        return self._obs(reward)

    def _obs(self, reward):
        return Observation(entities={"Robot": (np.zeros((1, 1), np.float32), [("Robot", 0)])},
                           actions={"move": CategoricalActionMask(actor_types=["Robot"])}, reward=reward,
                           done=not self.endless and self.t >= 10)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An untrained (16 steps) policy on Alternate, and one on an endless Alternate cut at 6 steps; both exported."""
    root = tmp_path_factory.mktemp("eval")
    alternate, endless = str(root / "alternate"), str(root / "endless")
    assert main(["train", "test.run.test_eval:Alternate", "--run-dir", alternate, *TINY]) == 0
    assert main(["train", "test.run.test_eval:Alternate", "--run-dir", endless, "--set", "env.kwargs={endless: true}",
                 "--set", "env.max_episode_steps=6", *TINY]) == 0
    for run in (alternate, endless):
        assert main(["export", run]) == 0
    return alternate, endless


def test_eval_says_what_it_used_and_an_export_evaluates_the_same_way_by_default(runs, capsys):
    alternate, endless = runs
    capsys.readouterr()
    assert main(["eval", endless, "--episodes", "5", "--deterministic"]) == 0
    out = capsys.readouterr().out
    assert "seed 1000003" in out and "train.seed + 1,000,003" in out and "5 environments" in out
    assert "step limit 6 (env.max_episode_steps)" in out
    # Given only the environment (whose episodes never end): the run's seed, environments and step limit.
    result = OnnxPolicy(os.path.join(endless, "policy.onnx")).evaluate(lambda: Alternate(endless=True), 5)
    assert result.lengths == (6,) * 5
    sampled = OnnxPolicy(os.path.join(alternate, "policy.onnx")).evaluate(Alternate, 8, deterministic=False)
    assert len(sampled.returns) == 8
    deployed = OnnxPolicy(os.path.join(alternate, "policy.onnx")).evaluate(Alternate, 8)
    assert deployed.returns == evaluate_checkpoint(alternate, 8, True, None).returns


def test_eval_reports_most_likely_and_sampled_actions_when_they_differ_widely(runs, capsys):
    alternate, _ = runs
    capsys.readouterr()
    assert main(["eval", alternate, "--episodes", "8"]) == 0
    out = capsys.readouterr().out
    assert "most likely actions (--deterministic): return mean 0.000" in out and "differ widely" in out
    assert main(["eval", alternate, "--episodes", "8", "--deterministic"]) == 0
    out = capsys.readouterr().out
    assert "sampled actions: return mean" in out and "differ widely" in out


def test_eval_at_the_runs_seed_samples_what_the_runs_last_evaluation_sampled(runs, capsys):
    import json

    alternate, _ = runs
    final = json.load(open(os.path.join(alternate, "eval.json")))[-1]
    capsys.readouterr()
    assert main(["eval", alternate, "--episodes", str(final["episodes"])]) == 0  # sampled, at the run's seed
    printed = capsys.readouterr().out
    assert f"return mean {final['mean']:.3f}  min {final['min']:.3f}  max {final['max']:.3f}" in printed, printed
    assert main(["eval", alternate, "--episodes", str(final["episodes"])]) == 0
    assert capsys.readouterr().out == printed


def test_evaluations_differ_widely_only_beyond_noise_and_a_tenth():
    def result(returns):
        return EvalResult(float(np.mean(returns)), min(returns), max(returns), tuple(returns))

    assert differ_widely(result([0.0] * 89 + [1.0] * 11), result([1.0] * 99 + [0.0]))  # 0.11 against 0.99
    assert not differ_widely(result([-207.0, -190.0, -220.0]), result([-200.0, -210.0, -195.0]))
    assert not differ_widely(result([1.0] * 99 + [0.0]), result([1.0] * 100))  # 0.99 against 1.00
