"""guides/training-loop.md: the hand-written loop trained, the collector cut episodes at the time limit,
the buffers sampled ragged rows, safe_call counted coins, and A2C, save and load wrote their files."""
import numpy as np
import torch

from test.docs._pages import episodes_ended_under_validation

PAGE = "guides/training-loop.md"


def test_the_environment_ends_episodes_under_validation(page):
    assert episodes_ended_under_validation(page(PAGE)["Collect"]) > 0


def test_the_training_loop_stored_episodes_and_updated(page):
    ns = page(PAGE)
    ppo = ns["ppo"]
    assert ppo.n_updates == 4  # three by hand, one on the collector's rollout
    assert ppo.replay_buffer.size() == 0  # every stored row was trained on
    assert all(np.isfinite([ns["objective"], ns["value_loss"]]))


def test_the_collector_under_a_time_limit_reports_its_episodes(page):
    stats = page(PAGE)["limited_stats"]
    assert stats.n_env_steps == 256 and stats.episode_lengths and max(stats.episode_lengths) <= 20
    assert stats.longest_running < 20 and np.isfinite(stats.mean_return)


def test_the_buffer_examples_sampled_ragged_rows(page):
    ns = page(PAGE)
    assert ns["buffer"].size() == 80  # 10 appends of 8 environments' rows
    assert len(ns["coins"]) == 4 and ns["policy"] == ["random"] * 4
    assert ns["index"].shape == (4,) and ns["is_weight"].max() == 1.0


def test_safe_call_counted_the_sampled_coins(page):
    ns = page(PAGE)
    assert torch.equal(ns["counts"][:, 0], ns["state"].entities["Coin"].lengths.float())


def test_checkpoints_and_tensorboard_files_were_written(page):
    ns = page(PAGE)
    directory = ns["__directory__"]
    assert list(directory.glob("checkpoints/collect/checkpoint_*.json"))
    assert list(directory.glob("runs/collect-a2c/events.out.tfevents.*"))
    assert ns["a2c"].n_updates == 3


def test_a_misspelt_keyword_is_refused_as_the_page_shows(page):
    import pytest

    from entmachin.frame import PPO

    net = page(PAGE)["net"]
    with pytest.raises(TypeError, match="did you mean 'batch_size'"):
        PPO(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(), bach_size=128)
