"""The concept pages' stories did what their text and diagrams say (docs/concepts/*.md)."""
import numpy as np
import torch

from entmachin.env import CategoricalAction, SelectEntityAction


def test_entities_the_diagram_shows_the_rows_the_example_makes(page):
    ns = page("concepts/entities.md")
    mines = ns["mines"]
    assert mines.size1().tolist() == [4, 2, 1] and mines.offsets.tolist() == [0, 4, 6, 7]
    assert ns["obs"].features["Robot"].size1().tolist() == [2, 1, 2]   # the diagram's rows
    assert ns["obs"].action_masks["Move"].actors.size1().tolist() == [2, 1, 2]
    assert ns["tensor"].batch_index.tolist() == [0, 0, 0, 0, 1, 1, 2]
    assert set(ns["state"]["action_masks"]["Fire Orbital Cannon"]) == {"actors", "actees", "actee_mask"}


def test_actions_the_environment_receives_entity_ids(page):
    ns = page("concepts/actions.md")
    received = ns["envs"].envs[0].received
    assert isinstance(received["Move"], CategoricalAction)
    assert received["Move"].actors == [("Robot", 0), ("Robot", 1)]
    assert isinstance(received["Fire Orbital Cannon"], SelectEntityAction)
    assert ns["out"].log_prob["Move"].data.shape == (4, 1) and ns["out"].log_prob_sum.shape == (2, 1)


def test_transitions_the_buffer_counts_rows(page):
    ns = page("concepts/transitions.md")
    assert ns["buffer"].size() == 20 and ns["replay"].size() == 20
    assert ns["mines"].lengths.shape == (3,) and ns["policy"] == ["random"] * 3
    assert ns["n"] == 4 and ns["reward"].shape == (4, 1) and len(ns["index"]) == 4   # the prioritized sample


def test_frames_an_update_trains_on_the_rollout_and_lets_it_go(page):
    ns = page("concepts/frames.md")
    ppo = ns["ppo"]
    assert ns["stats"].n_env_steps == 128
    assert ppo.last_update.minibatches == 4 and ppo.replay_buffer.size() == 0
    assert ns["counts"].shape == (8, 1)


def test_roguenet_has_the_workloads_parameter_count(page):
    ns = page("concepts/roguenet.md")
    assert sum(p.numel() for p in ns["net"].parameters()) == 27_110
    assert ns["value"].shape == (3, 1) and torch.count_nonzero(ns["value"]) == 0


def test_selfplay_rows_and_the_match(page):
    ns = page("concepts/selfplay.md")
    assert ns["rows"].env.tolist() == [0, 0, 1, 1, 2, 2]
    ended = np.flatnonzero(ns["obs"].done)
    assert sorted(ns["obs"].result[ended].tolist()) == [0.0, 1.0]
    match = ns["match"]
    assert (match.wins, match.draws, match.losses) == (19, 0, 1)
