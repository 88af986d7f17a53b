"""Symmetric images of a rollout's rows (``entmachin.frame.augment``) and the collector that stores them.

The differential test plays ConnectFour twice, the second game the mirror image of the first (every
drop into column ``6 - c`` where the first dropped into ``c``): the image of each of the first game's
states must be the second game's state (up to the order of entities), and the image of each action
the second game's action.
"""
import numpy as np
import pytest
import torch

from entmachin.env import EnvList, batch_obs, to_state
from entmachin.env.examples.connect_four import COLS, ConnectFour, drop_action
from entmachin.frame.augment import augment
from entmachin.frame.collector import RolloutCollector
from entmachin.ragged.tensor import RaggedTensor, tree_to_torch
from test.frame._frames import entity_frame


def state_of(env, obs):
    return tree_to_torch(to_state(batch_obs([obs], env.obs_space(), env.action_space()), env.action_space()))


def rows(rt, i):
    """Row ``i``'s entities, sorted, as a list of tuples (entities compared as a multiset)."""
    return sorted(map(tuple, rt[i].tolist()))


def stored_action(env, obs, column):
    """The canonical stored action of dropping into ``column``: ``{"action": {"drop": [[index]]}}``."""
    action = drop_action(env.action_space(), column)["drop"]
    index = column if env.choose == "drop" else obs.id_to_index(env.obs_space())[action.actees[0]] - \
        obs.num_entities("Mine") - obs.num_entities("Theirs")  # the Column entity's place among the Columns
    return {"action": {"drop": RaggedTensor.from_lengths(torch.tensor([[index]]), [1])}}


@pytest.mark.parametrize("choose", ["drop", "column"])
def test_the_image_of_a_game_is_its_mirror_game(choose):
    game, mirror = ConnectFour(choose=choose), ConnectFour(choose=choose)
    sym = [game.symmetries()["mirror"]]
    rng = np.random.default_rng(0)
    obs, mobs = game.reset(), mirror.reset()
    moves = 0
    while not obs["0"].done:
        seat = "0" if obs["0"].actions["drop"].actor_ids else "1"
        legal = [c for c in range(COLS) if game.heights[c] < 6]
        column = int(rng.choice(legal))
        state, mstate = state_of(game, obs[seat]), state_of(mirror, mobs[seat])
        step = {"state": state, "next_state": state, "action": stored_action(game, obs[seat], column),
                "reward": np.zeros(1, np.float32), "terminal": np.zeros(1, bool), "stored": np.ones(1, bool)}
        image = augment([step], sym, game.obs_space())[0]
        for entity in ("Mine", "Theirs", "Column", "Mover"):
            assert rows(image["state"]["entities"][entity], 0) == rows(state["entities"][entity], 0)
            assert rows(image["state"]["entities"][entity], 1) == rows(mstate["entities"][entity], 0), entity
        chosen = image["action"]["action"]["drop"].data[:, 0].tolist()
        mirrored = stored_action(mirror, mobs[seat], COLS - 1 - column)["action"]["drop"].data[0, 0].item()
        if choose == "drop":
            assert chosen == [column, COLS - 1 - column] and mirrored == COLS - 1 - column
            masks = image["state"]["action_masks"]["drop"]["mask"]
            assert masks[1].tolist() == mstate["action_masks"]["drop"]["mask"][0].tolist()
        else:  # the same Column entity is selected; its features are those of the mirror game's choice
            assert chosen == [chosen[0]] * 2
            columns = image["state"]["entities"]["Column"]
            assert columns[1][chosen[1]].tolist() == mstate["entities"]["Column"][0][mirrored].tolist()
        assert image["stored"].tolist() == [True, True] and image["reward"].shape == (2,)
        obs = game.act({seat: drop_action(game.action_space(), column), **{s: {} for s in obs if s != seat}})
        mobs = mirror.act({seat: drop_action(mirror.action_space(), COLS - 1 - column),
                           **{s: {} for s in mobs if s != seat}})
        moves += 1
    assert moves >= 7 and mobs["0"].result == obs["0"].result  # the mirror game ended alike


def test_no_symmetry_leaves_the_steps_as_they_were_but_in_torch():
    envs = EnvList(lambda: ConnectFour(), 2, seed=0)
    state = tree_to_torch(to_state(envs.reset(), envs.action_space()))
    step = {"state": state, "next_state": state, "action": {"action": {}}, "reward": np.zeros(4, np.float32),
            "terminal": np.zeros(4, bool)}
    out = augment([step], [], envs.obs_space())[0]
    assert out["state"]["entities"]["Column"].data.equal(state["entities"]["Column"].data)
    assert out["reward"].shape == (4,) and "truncated" not in out


def test_the_collector_stores_each_row_and_its_image():
    envs = EnvList(lambda: ConnectFour(choose="column"), 3, seed=0)  # 3 games, 6 rows
    frame = entity_frame(envs, replay_size=4 * 6 * 2)
    seen = []
    store = frame.store_rollout
    frame.store_rollout = lambda steps: (seen.append(steps), store(steps))[1]
    collector = RolloutCollector(frame, envs, 4, symmetries=[ConnectFour().symmetries()["mirror"]])
    stats = collector.collect()
    assert stats.n_env_steps == 12  # environment steps are counted once
    assert len(seen[0]) == 4 and all(len(s["reward"]) == 12 for s in seen[0])
    assert frame.replay_buffer.size() == 48
    assert all(seen[0][t]["next_state"] is seen[0][t + 1]["state"] for t in range(3))  # shared, as the collector's
    first = seen[0][0]["state"]["entities"]["Column"]
    assert torch.equal(first[6].data[:, 1], 6 - first[0].data[:, 1])  # row 6 is row 0's mirror image
    frame.update()  # trains on every row and image
