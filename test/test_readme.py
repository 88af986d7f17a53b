"""The README's Python examples run as written.

Every ```python block runs, in order, in one namespace: the README builds one story (the
``Collect`` environment of "Writing an environment" is what the later sections run, train and
store), so no block can run without the ones before it. Blocks write their checkpoints and
tensorboard files under the current directory, which is a temporary one here.
"""
import pathlib
import re

import numpy as np
import pytest
import torch

from entmachin.env import EnvList, ValidatingEnv, random_actions

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list:
    text = README.read_text()
    languages = set(re.findall(r"^```(\w*)\n", text, flags=re.M))
    # A block marked otherwise (```py, ```python3) would silently escape this test.
    assert languages <= {"python", "bash", ""}, f"README has code blocks marked {sorted(languages)}"
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def namespace(tmp_path_factory):
    """The namespace after every block ran (torch's thread count restored afterwards)."""
    blocks = python_blocks()
    assert blocks, "README has no python examples"
    threads = torch.get_num_threads()
    monkeypatch = pytest.MonkeyPatch()
    directory = tmp_path_factory.mktemp("readme")
    monkeypatch.chdir(directory)
    namespace: dict = {}
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"{README}, python block {i + 1}", "exec"), namespace)
    finally:
        monkeypatch.undo()
        torch.set_num_threads(threads)
    namespace["__directory__"] = directory
    return namespace


def test_the_continuous_example_steps_within_its_narrowed_bounds(namespace):
    envs = EnvList(lambda: ValidatingEnv(namespace["Parking"]()), 4, seed=0)
    obs, rng = envs.reset(), np.random.default_rng(0)
    for _ in range(50):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        low, high = obs.action_masks["drive"].bounds(envs.action_space()["drive"])
        assert (low <= high).all() and obs.action_masks["drive"].low.size2() == 2


def test_the_example_environment_ends_episodes_under_validation(namespace):
    envs = EnvList(lambda: ValidatingEnv(namespace["Collect"]()), 4, seed=0)
    obs, rng, ended = envs.reset(), np.random.default_rng(0), 0
    for _ in range(120):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        ended += int(obs.done.sum())
    assert ended > 0


def test_the_training_loop_stored_episodes_and_updated(namespace):
    ppo = namespace["ppo"]
    assert ppo.n_updates == 4  # three by hand, one on the collector's rollout
    assert ppo.replay_buffer.size() == 0  # every stored row was trained on
    assert all(np.isfinite([namespace["objective"], namespace["value_loss"]]))


def test_the_collector_under_a_time_limit_reports_its_episodes(namespace):
    stats = namespace["limited_stats"]
    assert stats.n_env_steps == 256 and stats.episode_lengths and max(stats.episode_lengths) <= 20
    assert stats.longest_running < 20 and np.isfinite(stats.mean_return)


def test_the_buffer_examples_sampled_ragged_rows(namespace):
    assert namespace["buffer"].size() == 80  # 10 appends of 8 environments' rows
    assert len(namespace["coins"]) == 4 and namespace["policy"] == ["random"] * 4
    assert namespace["index"].shape == (4,) and namespace["is_weight"].max() == 1.0


def test_safe_call_counted_the_sampled_coins(namespace):
    assert torch.equal(namespace["counts"][:, 0], namespace["state"].entities["Coin"].lengths.float())


def test_checkpoints_and_tensorboard_files_were_written(namespace):
    directory = namespace["__directory__"]
    assert list(directory.glob("checkpoints/collect/checkpoint_*.json"))
    assert list(directory.glob("runs/collect-a2c/events.out.tfevents.*"))
    assert namespace["a2c"].n_updates == 3


def test_readme_creates_parallel_env_lists_under_the_main_guard():
    blocks = [b for b in python_blocks() if "ParallelEnvList(" in b]
    assert blocks, "README shows no ParallelEnvList"
    for block in blocks:
        assert 'if __name__ == "__main__":' in block, block


def test_the_minimal_run_config_loads():
    import yaml

    from entmachin.run.config import config_from_dict

    block = re.search(r"^A minimal config.*?^```\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    assert block, "README shows no minimal run config"
    config = config_from_dict(yaml.safe_load(block.group(1)))
    assert config.env.name == "MineSweeper" and config.train.total_steps == 30000


def test_the_opponent_function_played_its_matches(namespace):
    match = namespace["match"]
    assert match.games == 20 and match.wins + match.draws + match.losses == 20
    low, high = match.interval()
    assert low <= match.win_rate <= high
    assert re.fullmatch(r"win rate \d\.\d{3} \(95% CI \d\.\d{3}-\d\.\d{3}\)", match.line())


def test_the_exported_policy_played_collect(namespace):
    shipped = namespace["shipped"]
    assert len(shipped.returns) == 16 and np.isfinite(shipped.mean)
    assert set(namespace["sampled"]) == set(namespace["onnx_policy"].action_space)



def test_the_callback_example_wrote_its_figure(namespace):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    seen = namespace["longest"].seen
    assert seen and all(1 <= n <= 200 for n in seen)  # MineSweeper's bundled step limit
    events = EventAccumulator(str(namespace["__directory__"] / "runs" / "ms-custom"), size_guidance={"scalars": 0})
    events.Reload()
    assert [e.value for e in events.Scalars("custom/longest_episode")] == seen
