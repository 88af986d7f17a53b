import numpy as np
import pytest

from entmachin.env import EnvList, random_actions, to_state, to_vec_actions
from entmachin.ragged.arrays import ragged_from_arrays, ragged_to_arrays
from entmachin.ragged.tensor import RaggedTensor
from test.env.toy import Toy


@pytest.fixture
def batch():
    envs = EnvList(Toy, 5, seed=4)
    return envs, envs.reset()


def test_state_has_the_canonical_layout(batch):
    envs, obs = batch
    state = to_state(obs)
    assert set(state) == {"entities", "action_masks"}  # Toy reports no visibility
    assert list(state["entities"]) == ["A", "B", "__global__"]
    assert state["entities"]["A"] is obs.features["A"]  # shared, not copied
    assert set(state["action_masks"]["move"]) == {"actors", "mask"}
    assert set(state["action_masks"]["pick"]) == {"actors", "actees"}
    assert set(state["action_masks"]["mode"]) == {"actors", "mask"}


def test_action_space_makes_every_mask_present(batch):
    envs, obs = batch
    state = to_state(obs, envs.action_space())
    pick = state["action_masks"]["pick"]
    assert set(pick) == {"actors", "actees", "actee_mask"}
    flat, lengths = ragged_to_arrays(pick["actee_mask"])
    assert flat.all()
    np.testing.assert_array_equal(lengths, pick["actors"].size1() * pick["actees"].size1())


def test_visible_appears_when_reported(batch):
    envs, obs = batch
    obs.visible["B"] = ragged_from_arrays(np.ones((obs.features["B"].items(), 1), bool), obs.features["B"].size1())
    assert "visible" in to_state(obs)


def test_model_actions_round_trip_in_every_form(batch):
    envs, obs = batch
    acts = random_actions(obs, envs.action_space(), np.random.default_rng(0))
    as_tensor = {k: RaggedTensor.from_ragged_array(v) for k, v in acts.items()}
    as_pairs = {k: ragged_to_arrays(v) for k, v in acts.items()}
    for form in (acts, {"action": acts}, as_tensor, {"action": as_tensor}, as_pairs):
        out = to_vec_actions(form)
        for name in acts:
            for x, y in zip(ragged_to_arrays(out[name]), ragged_to_arrays(acts[name])):
                np.testing.assert_array_equal(x, y)
    envs.act(to_vec_actions({"action": as_tensor}))


def test_bad_model_actions_raise():
    with pytest.raises(TypeError, match=r"action\['move'\]: expected a RaggedArrayI64 \(or, continuous, a RaggedArrayF32\), a RaggedTensor or \(flat, lengths\), got list"):
        to_vec_actions({"move": [1, 2]})
    two = ragged_from_arrays(np.zeros((2, 2), np.int64), [2])
    with pytest.raises(ValueError, match=r"action\['move'\] has 2 values per actor; expected 1"):
        to_vec_actions({"move": two})


def test_random_actions_respect_every_mask(batch):
    envs, obs = batch
    rng = np.random.default_rng(1)
    for _ in range(20):
        acts = random_actions(obs, envs.action_space(), rng)
        move, _ = ragged_to_arrays(acts["move"])
        mask, _ = ragged_to_arrays(obs.action_masks["move"].mask)
        assert mask[np.arange(len(move)), move.reshape(-1)].all()
        mode, _ = ragged_to_arrays(acts["mode"])
        assert set(mode.reshape(-1).tolist()) <= {0, 2}
        obs = envs.act(acts)


def test_random_select_entity_choices_respect_the_actee_mask(batch):
    envs, obs = batch
    pick = obs.action_masks["pick"]
    n_actors, n_actees = pick.actors.size1(), pick.actees.size1()
    assert n_actors.sum() > 0
    rng = np.random.default_rng(2)
    parts = []
    for a, e in zip(n_actors, n_actees):
        m = np.zeros((a, e), bool)
        if a:
            m[np.arange(a), rng.integers(0, e, a)] = True  # exactly one allowed actee per actor
        parts.append(m.reshape(-1, 1))
    flat = np.concatenate(parts)
    pick.mask = ragged_from_arrays(flat, n_actors * n_actees)
    chosen, _ = ragged_to_arrays(random_actions(obs, envs.action_space(), rng)["pick"])
    starts = np.concatenate([[0], np.cumsum(np.repeat(n_actees, n_actors))[:-1]])
    assert flat.reshape(-1)[starts + chosen.reshape(-1)].all()
