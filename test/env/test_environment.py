import numpy as np
import pytest

from entmachin.env import (
    CategoricalActionMask,
    Entity,
    GlobalCategoricalActionMask,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
)
from entmachin.env.environment import compile_feature_filter
from test.env.toy import Toy

SPACE = ObsSpace(global_features=["g0", "g1"], entities={"A": Entity(["x", "y"]), "B": Entity(["z"]), "C": Entity([])})


def obs(**kw):
    base = dict(
        entities={"A": (np.zeros((2, 2), np.float32), ["a0", "a1"]), "B": (np.zeros((3, 1), np.float32), ["b0", "b1", "b2"])},
        done=False,
        reward=0.0,
    )
    base.update(kw)
    return Observation(**base)


def test_entities_and_features_forms_agree():
    a = obs()
    b = Observation(features={"A": np.zeros((2, 2), np.float32), "B": np.zeros((3, 1), np.float32)},
                    ids={"A": ["a0", "a1"], "B": ["b0", "b1", "b2"]}, done=False, reward=0.0)
    assert a.ids == b.ids and a.num_entities("B") == b.num_entities("B") == 3
    assert a.truncated is False and a.num_entities("C") == 0


def test_features_and_entities_are_exclusive():
    with pytest.raises(ValueError, match="give `features` .* or `entities`, not both"):
        Observation(features={}, entities={}, done=False, reward=0.0)


def test_masks_reject_both_ids_and_types():
    with pytest.raises(ValueError, match="at most one of `actor_ids` and `actor_types`"):
        CategoricalActionMask(actor_ids=[1], actor_types=["A"])
    with pytest.raises(ValueError, match="at most one of `actee_ids` and `actee_types`"):
        SelectEntityActionMask(actee_ids=[1], actee_types=["A"])


def test_actor_and_actee_indices_follow_obs_space_order():
    o = obs(actions={
        "by_type": CategoricalActionMask(actor_types=["B"]),
        "by_id": CategoricalActionMask(actor_ids=["b2", "a0"]),
        "all": CategoricalActionMask(),
        "none": CategoricalActionMask(actor_types=[]),
        "global": GlobalCategoricalActionMask(),
        "sel": SelectEntityActionMask(actor_types=["A"], actee_ids=["b1"]),
    })
    assert o._actor_indices("by_type", SPACE).tolist() == [2, 3, 4]
    assert o._actor_indices("by_id", SPACE).tolist() == [4, 0]
    assert o._actor_indices("all", SPACE).tolist() == [0, 1, 2, 3, 4]
    assert o._actor_indices("none", SPACE).tolist() == []
    assert o._actor_indices("global", SPACE).tolist() == [5]  # after every real entity
    assert o._actee_indices("sel", SPACE).tolist() == [3]
    assert o.index_to_id(SPACE) == ["a0", "a1", "b0", "b1", "b2"]


def test_actor_types_work_without_ids():
    o = Observation(features={"A": np.zeros((2, 2), np.float32), "B": np.zeros((1, 1), np.float32)},
                    actions={"m": CategoricalActionMask(actor_types=["B"])}, done=False, reward=0.0)
    assert o._actor_indices("m", SPACE).tolist() == [2]
    assert o.index_to_id(SPACE) == [None, None, None]


def test_actee_indices_need_a_select_entity_mask():
    o = obs(actions={"m": CategoricalActionMask()})
    with pytest.raises(TypeError, match="actees need a SelectEntityActionMask"):
        o._actee_indices("m", SPACE)


def test_filter_drops_and_reorders_features():
    env = Toy()
    env.seed(0)
    full = env.reset()
    env.seed(0)
    filt = ObsSpace(global_features=[], entities={"A": Entity(["y", "x"])})
    o = env.reset_filter(filt)
    np.testing.assert_array_equal(o.features["A"], np.asarray(full.features["A"])[:, ::-1])
    assert "B" not in o.features and "B" not in o.ids
    assert np.asarray(o.global_features).shape == (0,)
    assert o.done == full.done and o.truncated == full.truncated


def test_filter_accepts_list_features_including_empty_ones():
    class Lists(Toy):
        def reset(self):
            return Observation(features={"A": [], "B": [[1.0], [2.0]]}, ids={"B": ["b0", "b1"]},
                               global_features=[3.0], actions={}, done=False, reward=0.0)

    o = Lists().reset_filter(ObsSpace(global_features=[], entities={"A": Entity(["y"]), "B": Entity(["z"])}))
    assert o.features["A"].shape == (0, 1) and o.features["A"].dtype == np.float32
    np.testing.assert_array_equal(o.features["B"], [[1.0], [2.0]])


def test_filter_equal_to_space_is_a_no_op():
    env = Toy()
    assert compile_feature_filter(env.obs_space(), env.obs_space()) is None
    o = env.reset()
    assert env._filter_obs(o, env.obs_space()) is o


def test_filter_naming_unknown_things_raises():
    env = Toy()
    with pytest.raises(ValueError, match="filter names entity type 'Z'; the environment has \\['A', 'B'\\]"):
        env.reset_filter(ObsSpace(entities={"Z": Entity(["x"])}))
    with pytest.raises(ValueError, match=r"entities\['A'\] asks for features \['w'\]"):
        env.reset_filter(ObsSpace(entities={"A": Entity(["w"])}))
    with pytest.raises(ValueError, match=r"global_features asks for features \['nope'\]"):
        env.reset_filter(ObsSpace(global_features=["nope"], entities={}))


def test_seed_gives_reproducible_streams():
    a, b = Toy(), Toy()
    a.seed(7)
    b.seed(7)
    oa, ob = a.reset(), b.reset()
    np.testing.assert_array_equal(oa.features["A"], ob.features["A"])
