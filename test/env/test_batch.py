import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    batch_obs,
)
from entmachin.env.batch import empty_vec_obs
from entmachin.ragged.arrays import ragged_to_arrays

SPACE = ObsSpace(global_features=["g"], entities={"A": Entity(["x", "y"]), "B": Entity(["z"])})
ACTIONS = {
    "move": CategoricalActionSpace(["l", "r", "s"]),
    "pick": SelectEntityActionSpace(),
    "mode": GlobalCategoricalActionSpace(["p", "q"]),
}


def make_obs(n_a, n_b, with_mask, with_vis, rng):
    actions = {
        "move": CategoricalActionMask(actor_types=["A"], mask=np.ones((n_a, 3), bool) if with_mask else None),
        "pick": SelectEntityActionMask(
            actor_types=["A"], actee_types=["B"],
            mask=(rng.random((n_a, n_b)) < 0.7) if with_mask and n_a and n_b else None,
        ),
        "mode": GlobalCategoricalActionMask(mask=np.array([True, with_mask])),
    }
    return Observation(
        entities={
            "A": (rng.random((n_a, 2)).astype(np.float32), list(range(n_a))),
            "B": (rng.random((n_b, 1)).astype(np.float32), list(range(100, 100 + n_b))),
        },
        visible={"B": rng.random(n_b) < 0.5} if with_vis else None,
        global_features=[rng.random()],
        actions=actions,
        done=bool(rng.random() < 0.5),
        reward=float(rng.random()),
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.booleans(), st.booleans()), max_size=6), st.integers(0, 2**16))
def test_batch_matches_per_observation_reference(rows, seed):
    rng = np.random.default_rng(seed)
    obs = [make_obs(*r, rng) for r in rows]
    vec = batch_obs(obs, SPACE, ACTIONS)
    assert len(vec) == len(obs)
    for etype in ("A", "B"):
        flat, lengths = ragged_to_arrays(vec.features[etype])
        ref = [np.asarray(o.features[etype]) for o in obs]
        assert lengths.tolist() == [len(r) for r in ref]
        if ref:
            np.testing.assert_array_equal(flat, np.concatenate(ref))
    _, glob_len = ragged_to_arrays(vec.features["__global__"])
    assert glob_len.tolist() == [1] * len(obs)
    if any(r[3] for r in rows):
        flat, lengths = ragged_to_arrays(vec.visible["B"])
        ref = [np.asarray(o.visible["B"]) if "B" in o.visible else np.ones(o.num_entities("B"), bool) for o in obs]
        np.testing.assert_array_equal(flat.reshape(-1), np.concatenate(ref) if ref else np.zeros(0, bool))
    else:
        assert vec.visible == {}
    actors, lengths = ragged_to_arrays(vec.action_masks["move"].actors)
    assert lengths.tolist() == [r[0] for r in rows]
    glob = vec.action_masks["mode"]
    actor_idx, _ = ragged_to_arrays(glob.actors)
    assert actor_idx.reshape(-1).tolist() == [r[0] + r[1] for r in rows]  # __global__ comes last
    sel = vec.action_masks["pick"]
    _, actee_len = ragged_to_arrays(sel.actees)
    assert actee_len.tolist() == [r[1] if r[0] else 0 for r in rows]
    if sel.mask is not None:
        flat, lengths = ragged_to_arrays(sel.mask)
        assert lengths.tolist() == [r[0] * r[1] if r[0] else 0 for r in rows]
        ref = [np.asarray(o.actions["pick"].mask).reshape(-1) if o.actions["pick"].mask is not None
               else np.ones(o.num_entities("A") * o.num_entities("B"), bool) for o in obs]
        np.testing.assert_array_equal(flat.reshape(-1), np.concatenate(ref))
    np.testing.assert_array_equal(vec.reward, np.array([o.reward for o in obs], np.float32))


def test_missing_entity_types_and_actions_become_empty_rows():
    o = Observation(entities={"A": np.zeros((1, 2), np.float32)}, global_features=[0.0], done=False, reward=0.0)
    vec = batch_obs([o, o], SPACE, ACTIONS)
    assert vec.features["B"].size1().tolist() == [0, 0]
    for name in ACTIONS:
        assert vec.action_masks[name].actors.size1().tolist() == [0, 0]


def test_the_entities_ids_are_kept_per_row_and_joined_by_extend():
    """Per-entity memory keeps states by the ids: every batch of observations carries them, as given."""
    a = Observation(entities={"A": (np.zeros((2, 2), np.float32), [7, "x"])}, global_features=[0.0], done=False,
                    reward=0.0)
    b = Observation(entities={"A": np.zeros((0, 2), np.float32)}, global_features=[0.0], done=False, reward=0.0)
    vec = batch_obs([a, b], SPACE, ACTIONS)
    assert vec.ids == [{"A": [7, "x"]}, {}]
    vec.extend(batch_obs([a], SPACE, ACTIONS))
    assert vec.ids == [{"A": [7, "x"]}, {}, {"A": [7, "x"]}]


def test_global_mask_accepts_documented_1d_and_2d_shapes():
    for mask in ([True, False], np.array([[True, False]])):
        o = Observation(global_features=[0.0], actions={"mode": GlobalCategoricalActionMask(mask=mask)}, done=False, reward=0.0)
        vec = batch_obs([o], SPACE, ACTIONS)
        assert ragged_to_arrays(vec.action_masks["mode"].mask)[0].tolist() == [[True, False]]


def test_nested_list_features_are_converted():
    o = Observation(entities={"A": [[1, 2], [3, 4]]}, global_features=[0.0], done=False, reward=0.0)
    vec = batch_obs([o], SPACE, ACTIONS)
    assert ragged_to_arrays(vec.features["A"])[0].tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(entities={"A": np.zeros((2, 3), np.float32)}), r"row 0: features\['A'\] has shape \(2, 3\); expected \(n, 2\)"),
        (dict(entities={"A": np.zeros((1, 2), np.float32)}, actions={"move": CategoricalActionMask(mask=np.ones((2, 3), bool))}),
         r"row 0: actions\['move'\].mask has shape \(2, 3\); expected \(n_actors, n_choices\) = \(1, 3\)"),
        (dict(entities={"A": np.zeros((1, 2), np.float32), "B": np.zeros((2, 1), np.float32)},
              actions={"pick": SelectEntityActionMask(actor_types=["A"], actee_types=["B"], mask=np.ones((2, 2), bool))}),
         r"row 0: actions\['pick'\].mask has shape \(2, 2\); expected \(n_actors, n_actees\) = \(1, 2\)"),
        (dict(global_features=[1.0, 2.0]), r"row 0: global_features has 2 values; ObsSpace.global_features declares 1"),
    ],
)
def test_shape_errors_name_the_row_and_field(kw, match):
    kw.setdefault("global_features", [0.0])
    with pytest.raises(ValueError, match=match):
        batch_obs([Observation(done=False, reward=0.0, **kw)], SPACE, ACTIONS)


def test_extend_matches_batching_everything_at_once():
    rng = np.random.default_rng(0)
    obs = [make_obs(int(rng.integers(0, 4)), int(rng.integers(0, 3)), i % 2 == 0, i % 3 == 0, rng) for i in range(7)]
    whole = batch_obs(obs, SPACE, ACTIONS)
    parts = empty_vec_obs(SPACE, ACTIONS)
    for chunk in (obs[:2], obs[2:3], obs[3:]):
        parts.extend(batch_obs(chunk, SPACE, ACTIONS))
    for etype in whole.features:
        np.testing.assert_array_equal(*(ragged_to_arrays(v.features[etype])[0] for v in (whole, parts)))
    for etype in whole.visible:
        for i in range(2):
            np.testing.assert_array_equal(*(ragged_to_arrays(v.visible[etype])[i] for v in (whole, parts)))
    for name in ACTIONS:
        for field in ("actors", "mask"):
            a, b = (getattr(v.action_masks[name], field) for v in (whole, parts))
            assert (a is None) == (b is None)
            if a is not None:
                for i in range(2):
                    np.testing.assert_array_equal(ragged_to_arrays(a)[i], ragged_to_arrays(b)[i])
    np.testing.assert_array_equal(whole.reward, parts.reward)
