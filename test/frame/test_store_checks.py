"""store_episode / store_rollout refuse what update() could not train on, and a refused call
changes nothing: not the buffer, not the frame's counters, not the critic's input statistics."""
import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import to_vec_actions
from entmachin.frame.ppo import PPO
from entmachin.model import MLPActor, MLPCritic, RogueNet, RogueNetConfig
from entmachin.ragged.arrays import ragged_from_arrays
from test.frame._frames import D_STATE, Sparse, dense_episode, dense_step, entity_frame, entity_states
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state


def _entity_rollout(n_steps=3, n_envs=3):
    """A Sparse frame and ``n_steps`` transitions of ``n_envs`` rows that it accepts."""
    envs, states = entity_states(Sparse, n_envs=n_envs, n_steps=n_steps, seed=4)
    frame = entity_frame(envs, batch_size=4, actor_update_times=1, critic_update_times=1)
    steps = []
    for t in range(n_steps):
        out = frame.act(states[t])
        steps.append({"state": states[t], "action": {"action": to_vec_actions(out.action)},
                      "next_state": states[t + 1], "reward": np.ones(n_envs, np.float32),
                      "terminal": np.zeros(n_envs, bool)})
    return frame, steps


def _norm_state(frame):
    norms = [m for m in frame.critic.modules() if type(m).__name__ == "InputNorm"]
    return [{k: v.clone() for k, v in m.state_dict().items()} for m in norms]


def _assert_unchanged(frame, rows, norms):
    assert frame.replay_buffer.size() == rows and frame.n_updates == 0
    after = _norm_state(frame)
    assert len(after) == len(norms)
    for a, b in zip(after, norms):
        for key in a:
            assert torch.equal(a[key], b[key]), key  # bit for bit


def test_the_reported_case_a_state_without_action_masks_is_refused_and_later_updates_work():
    frame, steps = _entity_rollout()
    for step in steps:
        step["state"] = {"entities": step["state"]["entities"]}
    with pytest.raises(ValueError, match=r"PPO.store_rollout\[0\]\['state'\] has keys \['entities'\] and "
                       r"PPO.store_rollout\[0\]\['action'\] has \['action'\], but the actor \(RogueNet.forward\) needs "
                       r"\['action_masks'\]; update\(\) could not call it: store the state the actor acted on"):
        frame.store_rollout(steps)
    assert frame.replay_buffer.size() == 0
    frame, steps = _entity_rollout()
    frame.store_rollout(steps)
    frame.update()


def _own(step):
    """A copy of ``step`` whose dicts (not its ragged values) can be changed."""
    def copy(tree):
        return {k: copy(v) if isinstance(v, dict) else v for k, v in tree.items()}

    return copy(step)


def _drop_type(state):
    state["entities"] = {k: v for k, v in state["entities"].items() if k != "B"}


def _row_choices(step, row, values):
    """Gives the actors of ``row`` the choices ``values`` (another count changes the row's length)."""
    actions = step["action"]["action"]["move"]
    lengths = actions.size1().copy()
    flat = actions.as_array()
    start = int(lengths[:row].sum())
    flat = np.concatenate([flat[:start], np.asarray(values, np.int64).reshape(-1, 1), flat[start + lengths[row]:]])
    lengths[row] = len(values)
    step["action"]["action"]["move"] = ragged_from_arrays(flat, lengths)


def _forbid(step, row):
    masks = step["state"]["action_masks"]["move"]
    actors = masks["actors"]
    masks["mask"] = ragged_from_arrays(np.ones((actors.items(), 2), bool), actors.size1())
    flat = np.array(masks["mask"].as_array())
    start = int(actors.size1()[:row].sum())
    flat[start + 1, 0] = False  # the row's second actor may not choose 0
    masks["mask"] = ragged_from_arrays(flat, actors.size1())
    _row_choices(step, row, [1, 0])


def _actor_index(step, row, index):
    """Points the first actor of ``row`` at entity ``index``."""
    masks = step["state"]["action_masks"]["move"]
    actors = masks["actors"]
    flat = actors.as_array().copy()
    flat[int(actors.size1()[:row].sum())] = index
    masks["actors"] = ragged_from_arrays(flat, actors.size1())


# (mutation, applied to every step or only to step 1, error, message)
CASES = [
    (lambda s: s["state"].__setitem__("action_masks", {}), "all", ValueError,
     r"store_rollout\[0\]\['state'\]\['action_masks'\] lacks 'move', an action of the actor \(\['move'\]\)"),
    (lambda s: _drop_type(s["state"]), "all", ValueError,
     r"store_rollout\[0\]\['state'\]\['entities'\] lacks 'B', an entity type of the actor's ObsSpace \(\['A', 'B'\]\)"),
    (lambda s: s["state"]["entities"].__setitem__("C", s["state"]["entities"]["B"]), "all", ValueError,
     r"\['entities'\]\['C'\] is not an entity type of the actor's ObsSpace; expected \['A', 'B'\]"),
    (lambda s: s["state"]["entities"].__setitem__(
        "B", ragged_from_arrays(np.zeros((3, 2), np.float32), [1, 1, 1])), "all", ValueError,
     r"\['entities'\]\['B'\] has 2 features per entity; the actor's ObsSpace declares 1 \(\['y'\]\)"),
    (lambda s: s["state"]["entities"].__setitem__("B", torch.zeros(3, 1)), "all", TypeError,
     r"\['entities'\]\['B'\] is a Tensor; expected a ragged value"),
    (lambda s: s["state"]["action_masks"]["move"].pop("actors"), "all", ValueError,
     r"\['action_masks'\]\['move'\] lacks 'actors'"),
    (lambda s: s["state"]["action_masks"].__setitem__("jump", s["state"]["action_masks"]["move"]), "all", ValueError,
     r"\['action_masks'\]\['jump'\] is not an action of the actor; its actions are \['move'\]"),
    (lambda s: s["action"].__setitem__("action", {"jump": s["action"]["action"]["move"]}), "all", ValueError,
     r"store_rollout\[0\]\['action'\]\['action'\] lacks 'move'; store one value per actor of every action"),
    (lambda s: s["action"]["action"].__setitem__("jump", s["action"]["action"]["move"]), "all", ValueError,
     r"store_rollout\[0\]\['action'\]\['action'\]\['jump'\] is not an action of the actor"),
    (lambda s: s["action"]["action"].__setitem__("move", torch.zeros(3, 1)), "all", TypeError,
     r"store_rollout\[0\]\['action'\]\['action'\]\['move'\] is a Tensor; expected a ragged value"),
    (lambda s: _row_choices(s, 1, []), "one", ValueError,
     r"store_rollout\[1\]\['action'\]\['action'\]\['move'\] row 1 has 0 values, but the state's action_masks has 2 "
     r"actors in that row; one value per actor"),
    (lambda s: _row_choices(s, 1, [0, 2]), "one", ValueError,
     r"store_rollout\[1\]\['action'\]\['action'\]\['move'\] row 1 holds 2; expected a value in \[0, 2\)"),
    (lambda s: _forbid(s, 1), "one", ValueError,
     r"store_rollout\[1\]\['action'\]\['action'\]\['move'\] row 1 holds 0, which the state's mask forbids"),
    (lambda s: _actor_index(s, 1, 99), "one", ValueError,
     r"store_rollout\[1\]\['state'\]\['action_masks'\]\['move'\]\['actors'\] row 1 holds 99; expected an entity "
     r"index in \[0, 3\)"),
    (lambda s: _row_choices(s, 1, [1, 1]), "one", None, None),  # allowed choices: the rollout is stored
]


@pytest.mark.parametrize("mutate, where, error, match", CASES)
def test_entity_transitions_update_could_not_train_on_are_refused(mutate, where, error, match):
    frame, steps = _entity_rollout()
    assert steps[1]["state"]["action_masks"]["move"]["actors"].size1().tolist() == [1, 2, 1]
    for t in (range(len(steps)) if where == "all" else [1]):
        steps[t] = _own(steps[t])
        mutate(steps[t])
    norms = _norm_state(frame)
    if error is None:
        frame.store_rollout(steps)
        assert frame.replay_buffer.size() == 9
        return
    with pytest.raises(error, match=match):
        frame.store_rollout(steps)
    _assert_unchanged(frame, 0, norms)


def test_select_entity_and_global_actions_are_checked_too():
    torch.manual_seed(0)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(d_model=8, n_layer=1, n_head=1, d_qk=8))
    frame = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), seed=0)
    state = zoo_state(zoo_observations(5, 6))
    action = {"action": to_vec_actions(frame.act(state).action)}

    def store(state, action):
        frame.store_rollout([{"state": state, "action": action, "next_state": state,
                              "reward": np.zeros(6, np.float32), "terminal": np.ones(6, bool)}])

    store(state, action)  # as the actor acted: accepted
    attack = state["action_masks"]["attack"]
    actors, actees = attack["actors"].size1(), attack["actees"].size1()  # [6] each
    row = int(np.flatnonzero(actors > 0)[0])
    chosen = int(action["action"]["attack"].as_array()[actors[:row].sum(), 0])
    pairs = attack["actee_mask"].as_array().copy()  # [n_pairs, 1]
    pairs[int((actors[:row] * actees[:row]).sum()) + chosen] = False  # the row's first actor's choice
    forbidden = {**state, "action_masks": {**state["action_masks"], "attack": {
        **attack, "actee_mask": ragged_from_arrays(pairs, actors * actees)}}}
    with pytest.raises(ValueError, match=rf"store_rollout\[0\]\['action'\]\['action'\]\['attack'\] row {row} holds "
                       rf"{chosen}, which the state's mask forbids"):
        store(forbidden, action)
    mode = state["action_masks"]["mode"]["actors"]
    shifted = {**state, "action_masks": {**state["action_masks"], "mode": {
        **state["action_masks"]["mode"], "actors": ragged_from_arrays(mode.as_array() - 1, mode.size1())}}}
    with pytest.raises(ValueError, match=r"\['action_masks'\]\['mode'\]\['actors'\] row 0 holds \d+; expected the "
                       r"__global__ entity, index \d+ \(after the row's entities\)"):
        store(shifted, action)
    no_global = {**state, "entities": {k: v for k, v in state["entities"].items() if k != "__global__"}}
    with pytest.raises(ValueError, match=r"\['entities'\] lacks '__global__', the global features"):
        store(no_global, action)
    assert frame.replay_buffer.size() == 6


def _critic_norm_frame():
    torch.manual_seed(0)
    frame = PPO(MLPActor(D_STATE, 2, d_hidden=(8,)), MLPCritic(D_STATE, d_hidden=(8,), normalize_inputs=True),
                torch.optim.Adam, nn.MSELoss(), seed=0)
    frame.store_episode(dense_episode(np.random.default_rng(0), 4))  # the critic-only statistics are non-trivial
    return frame


def _set_reward(episode, value):
    episode[2]["reward"] = value


def _set_state(episode, key, value):
    episode[3][key] = {"state": episode[3][key]["state"].clone()}
    episode[3][key]["state"][0, 2] = value


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda ep: _set_reward(ep, float("nan")), ValueError,
         r"PPO.store_episode\[2\]\['reward'\] is nan; rewards must be finite"),
        (lambda ep: _set_reward(ep, np.array([np.inf])), ValueError, r"store_episode\[2\]\['reward'\] is inf"),
        (lambda ep: _set_state(ep, "state", float("nan")), ValueError,
         r"store_episode\[3\]\['state'\]\['state'\] has nan at column 2; states must be finite"),
        (lambda ep: _set_state(ep, "next_state", -float("inf")), ValueError,
         r"store_episode\[3\]\['next_state'\]\['state'\] has -inf at column 2"),
        (lambda ep: [s.__setitem__("state", {"obs": s["state"]["state"]}) for s in ep], ValueError,
         r"store_episode\[0\]\['state'\] has keys \['obs'\] and .*\['action'\] has \['action'\], but the actor "
         r"\(MLPActor.forward\) needs \['state'\]; update\(\) could not call it: store those keys"),
        (lambda ep: [s.__setitem__("state", {"state": torch.zeros(1, 4)}) for s in ep], ValueError,
         r"store_episode\[0\]\['state'\]\['state'\] has shape \(4,\) per row; the actor \(MLPActor\) takes d_state=3 features"),
        (lambda ep: ep[1].__setitem__("action", {"action": torch.tensor([[2]])}), ValueError,
         r"store_episode\[1\]\['action'\]\['action'\] is \[2\]; MLPActor chooses among \[0, 2\)"),
    ],
)
def test_dense_refusals_leave_the_critic_statistics_bit_for_bit(mutate, error, match):
    frame = _critic_norm_frame()
    norms = _norm_state(frame)
    assert norms and int(norms[0]["count"]) == 4
    episode = dense_episode(np.random.default_rng(1), 4, terminal=False)
    mutate(episode)
    with pytest.raises(error, match=match):
        frame.store_episode(episode)
    _assert_unchanged(frame, 4, norms)


def test_rollout_rewards_name_the_row():
    frame = _critic_norm_frame()
    rng = np.random.default_rng(2)
    steps = [dense_step(rng, n_rows=3) for _ in range(2)]
    steps[1]["reward"][2] = np.inf
    with pytest.raises(ValueError, match=r"PPO.store_rollout\[1\]\['reward'\] row 2 is inf"):
        frame.store_rollout(steps)


def test_non_finite_critic_values_are_refused_after_the_critic_ran_and_its_statistics_restored():
    frame = _critic_norm_frame()
    norms = _norm_state(frame)
    with torch.no_grad():
        frame.critic.value.bias.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"PPO.store_episode: the critic returned nan for PPO.store_episode\[0\]\['state'\]; "
                       r"values must be finite .*nothing was stored"):
        frame.store_episode(dense_episode(np.random.default_rng(3), 3))
    _assert_unchanged(frame, 4, norms)


def test_entity_features_name_the_entity_type_row_and_feature():
    frame, steps = _entity_rollout()
    feats = steps[2]["state"]["entities"]["A"]
    flat = feats.as_array().copy()
    rows = feats.size1()
    assert rows.tolist()[1] >= 1
    flat[int(rows[0])] = np.nan  # the first A entity of row 1
    steps[2]["state"] = {**steps[2]["state"], "entities": {**steps[2]["state"]["entities"],
                                                           "A": ragged_from_arrays(flat, rows)}}
    with pytest.raises(ValueError, match=r"store_rollout\[2\]\['state'\]\['entities'\]\['A'\] row 1 item 0 has nan in "
                       r"feature 'x'; features must be finite"):
        frame.store_rollout(steps)
    assert frame.replay_buffer.size() == 0
