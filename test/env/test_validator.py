import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.env.action import (
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.multi_agent import MultiAgentEnvironment
from entmachin.env.validator import ValidatingEnv, ValidatingMultiAgentEnv, checked_choices, validate_observation

OBS_SPACE = ObsSpace(
    global_features=["g"],
    entities={"Robot": Entity(["x", "y"]), "Mine": Entity(["x"]), "Wall": Entity([])},
)
ACTION_SPACE = {
    "move": CategoricalActionSpace(["up", "down", "stay"]),
    "fire": SelectEntityActionSpace(),
    "mode": GlobalCategoricalActionSpace(["a", "b"]),
}


def make_obs(**overrides):
    """A valid observation of OBS_SPACE / ACTION_SPACE with some arguments replaced."""
    kwargs = dict(
        features={"Robot": np.zeros((2, 2), np.float32), "Mine": np.ones((3, 1), np.float32)},
        ids={"Robot": [1, 2], "Mine": [10, 11, 12]},
        global_features=[0.5],
        actions={
            "move": CategoricalActionMask(actor_ids=[1, 2], mask=np.ones((2, 3), np.bool_)),
            "fire": SelectEntityActionMask(actor_types=["Robot"], actee_types=["Mine"], mask=np.ones((2, 3), np.bool_)),
            "mode": GlobalCategoricalActionMask(mask=np.array([True, False])),
        },
        done=False,
        reward=0.0,
        visible={"Mine": np.array([True, False, True])},
        metrics={"m": 1.0},
    )
    kwargs.update(overrides)
    return Observation(**kwargs)


def with_action(name, mask, **overrides):
    actions = dict(make_obs().actions)
    actions[name] = mask
    return make_obs(actions=actions, **overrides)


def check(obs):
    validate_observation(obs, OBS_SPACE, ACTION_SPACE)


# ------------------------------------------------------------------ accepted observations


@pytest.mark.parametrize(
    "obs",
    [
        make_obs(),
        make_obs(features={"Robot": [[1.0, 2.0], [3, 4]], "Mine": [[1.0], [2.0], [3.0]], "Wall": [[], []]}),
        make_obs(features={"Robot": np.zeros((2, 2), np.float32), "Mine": []}, ids={"Robot": [1, 2]}, visible={},
                 actions={"move": CategoricalActionMask(actor_types=["Robot"]),
                          "fire": SelectEntityActionMask(actor_ids=[], actee_types=["Mine"])}),
        make_obs(done=np.bool_(True), truncated=True, reward=np.float32(1.5), metrics={"n": 3}),
        make_obs(visible={"Mine": np.array([[True], [False], [True]])}),
        make_obs(visible={"Mine": [True, False, True]}),
        with_action("mode", GlobalCategoricalActionMask(mask=np.array([[False, True]]))),
        with_action("mode", GlobalCategoricalActionMask()),
        with_action("move", CategoricalActionMask(actor_ids=[], mask=np.zeros((0, 3), np.bool_))),
        with_action("move", CategoricalActionMask(actor_ids=[], mask=[])),
        with_action("move", CategoricalActionMask(actor_ids=[2], mask=[[False, False, True]])),
        Observation(done=False, reward=0, global_features=np.array([1.0], np.float32)),
        make_obs(features={"Robot": np.zeros((2, 2), np.float32), "Mine": np.ones((3, 1), np.float32), "Wall": None}),
    ],
)
def test_valid_observations_pass(obs):
    check(obs)


# ------------------------------------------------------------------ rejected observations

TYPE_CASES = [
    ("not an Observation", {"type": "dict"}, "expected an entmachin.env.Observation, got dict"),
    ("features dtype", dict(features={"Robot": np.zeros((2, 2))}), "features['Robot'] has dtype float64; expected float32"),
    ("features not rows", dict(features={"Robot": 3}), "features['Robot'] must be a float32 array (n_entities, 2) or a list of rows, got int"),
    ("features not numbers", dict(features={"Mine": [["a"], ["b"], ["c"]]}), "features['Mine'] could not be read as float32 numbers"),
    ("features nested too deep", dict(features={"Robot": [[[1, 2], [3, 4]], [[1, 2], [3, 4]]]}), "features['Robot'] could not be read as float32 numbers"),
    ("reward type", dict(reward="1"), "reward must be a real number (e.g. a float), got str"),
    ("reward array", dict(reward=np.array([1.0])), "reward must be a real number (e.g. a float), got ndarray"),
    ("metric type", dict(metrics={"m": [1.0]}), "metrics['m'] must be a real number (e.g. a float), got list"),
    ("unhashable ids", dict(ids={"Robot": [[1], [2]], "Mine": [10, 11, 12]}), "entity ids must be hashable"),
    ("global features not numbers", dict(global_features=["x"]), "global_features could not be read as float32 numbers"),
    ("visible dtype", dict(visible={"Mine": np.array([1, 0, 1])}), "visible['Mine'] has dtype int64; expected bool"),
    ("done type", dict(done=1), "done must be a bool, got int 1"),
    ("truncated type", dict(done=True, truncated="yes"), "truncated must be a bool, got str 'yes'"),
]


@pytest.mark.parametrize("label, overrides, message", TYPE_CASES, ids=[c[0] for c in TYPE_CASES])
def test_type_errors(label, overrides, message):
    obs = {"features": {}} if overrides.get("type") == "dict" else make_obs(**overrides)
    with pytest.raises(TypeError, match=re.escape(message)):
        check(obs)


VALUE_CASES = [
    ("unknown entity type", dict(features={"Tank": np.zeros((1, 2), np.float32)}),
     "features has entity type 'Tank'; ObsSpace.entities has ['Robot', 'Mine', 'Wall']"),
    ("features 1-D", dict(features={"Robot": np.zeros(4, np.float32)}),
     "features['Robot'] has shape (4,); expected (n_entities, 2): ObsSpace.entities['Robot'] declares 2 features"),
    ("features width", dict(features={"Robot": np.zeros((2, 3), np.float32)}),
     "features['Robot'] has shape (2, 3); expected (n_entities, 2)"),
    ("list row length", dict(features={"Robot": [[1.0, 2.0], [1.0]]}),
     "features['Robot'] row 1 has 1 features; ObsSpace.entities['Robot'] declares 2 features"),
    ("list rows all too long", dict(features={"Robot": [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]}),
     "features['Robot'] row 0 has 3 features"),
    ("list row scalar", dict(features={"Mine": [1.0, 2.0, 3.0]}), "features['Mine'] row 0 has a float"),
    ("nan feature", dict(features={"Robot": np.zeros((2, 2), np.float32), "Mine": np.array([[1], [np.nan], [2]], np.float32)}),
     "features['Mine'] row 1 is not finite: [nan]"),
    ("inf feature in a list", dict(features={"Robot": [[0, 0], [0, np.inf]], "Mine": np.ones((3, 1), np.float32)}),
     "features['Robot'] row 1 is not finite: [0.0, inf]"),
    ("nan reward", dict(reward=float("nan")), "reward must be finite, got nan"),
    ("inf reward", dict(reward=-np.inf), "reward must be finite, got -inf"),
    ("inf metric", dict(metrics={"m": float("inf")}), "metrics['m'] must be finite, got inf"),
    ("ids unknown type", dict(ids={"Tank": [1]}), "ids has entity type 'Tank'; ObsSpace.entities has ['Robot', 'Mine', 'Wall']"),
    ("ids length", dict(ids={"Robot": [1, 2, 3], "Mine": [10, 11, 12]}),
     "ids['Robot'] has 3 ids but features['Robot'] has 2 entities; give one id per entity"),
    ("ids for absent type", dict(ids={"Robot": [1, 2], "Mine": [10, 11, 12], "Wall": [7]}),
     "ids['Wall'] has 1 ids but features['Wall'] has 0 entities"),
    ("duplicate ids", dict(ids={"Robot": [1, 2], "Mine": [10, 2, 12]}),
     "entity id 2 occurs more than once (in ids of ['Robot', 'Mine']); ids must be unique across all entity types"),
    ("global feature count", dict(global_features=[1.0, 2.0]),
     "global_features has shape (2,); ObsSpace.global_features declares 1 features ['g'], expected shape (1,)"),
    ("global features missing", dict(global_features=None), "global_features has shape (0,)"),
    ("nan global feature", dict(global_features=np.array([np.nan], np.float32)), "global_features must be finite, got [nan]"),
    ("visible unknown type", dict(visible={"Tank": [True]}), "visible has entity type 'Tank'; ObsSpace.entities has"),
    ("visible ragged", dict(visible={"Mine": [[True], [False, True], [True]]}), "visible['Mine'] could not be read as a bool array"),
    ("visible shape", dict(visible={"Mine": np.array([True, False])}), "visible['Mine'] has shape (2,); expected (3,), one flag per entity"),
    ("visible 2 columns", dict(visible={"Mine": np.ones((3, 2), np.bool_)}), "visible['Mine'] has shape (3, 2); expected (3,)"),
    ("visible of absent type", dict(visible={"Wall": [True]}), "visible['Wall'] has shape (1,); expected (0,)"),
    ("truncated without done", dict(truncated=True), "truncated=True with done=False; a truncated episode has ended, set done=True too"),
    ("unknown action", dict(actions={"jump": CategoricalActionMask()}),
     "actions has unknown action 'jump'; the action space has ['move', 'fire', 'mode']"),
]


@pytest.mark.parametrize("label, overrides, message", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_value_errors(label, overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check(make_obs(**overrides))


@pytest.mark.parametrize(
    "name, mask, got, want",
    [
        ("move", SelectEntityActionMask(actor_ids=[1]), "SelectEntityActionMask", "CategoricalActionSpace needs a CategoricalActionMask"),
        ("fire", CategoricalActionMask(actor_ids=[1]), "CategoricalActionMask", "SelectEntityActionSpace needs a SelectEntityActionMask"),
        ("mode", CategoricalActionMask(), "CategoricalActionMask", "GlobalCategoricalActionSpace needs a GlobalCategoricalActionMask"),
    ],
)
def test_mask_of_the_wrong_class(name, mask, got, want):
    with pytest.raises(TypeError, match=re.escape(f"actions['{name}'] is a {got}; its {want}")):
        check(with_action(name, mask))


MASK_VALUE_CASES = [
    # categorical masks
    ("categorical shape", "move", CategoricalActionMask(actor_ids=[1, 2], mask=np.ones((2, 2), np.bool_)),
     "actions['move'].mask has shape (2, 2); expected (n_actors, n_choices) = (2, 3)"),
    ("categorical empty with actors", "move", CategoricalActionMask(actor_ids=[1], mask=np.zeros((0, 3), np.bool_)),
     "actions['move'].mask has shape (0, 3); expected (n_actors, n_choices) = (1, 3)"),
    ("categorical ragged", "move", CategoricalActionMask(actor_ids=[1, 2], mask=[[True, False, True], [True]]),
     "actions['move'].mask could not be read as a bool array"),
    ("categorical without actors", "move", CategoricalActionMask(actor_ids=[], mask=np.ones((1, 3), np.bool_)),
     "actions['move'].mask has shape (1, 3); expected (n_actors, n_choices) = (0, 3)"),
    ("categorical 1-D", "move", CategoricalActionMask(actor_ids=[1], mask=[True, True, False]),
     "actions['move'].mask has shape (3,); expected (n_actors, n_choices) = (1, 3)"),
    ("categorical nothing allowed", "move", CategoricalActionMask(actor_ids=[1, 2], mask=[[True, False, False], [False] * 3]),
     "actions['move'].mask row 1 allows no choices for actor 2 (entity type 'Robot')"),
    ("unknown actor id", "move", CategoricalActionMask(actor_ids=[1, 99]),
     "actions['move'].actor_ids has unknown ids [99]; the observation's ids are"),
    ("actor type not in space", "move", CategoricalActionMask(actor_types=["Tank"]),
     "actions['move'].actor_types has 'Tank', which is not an entity type of ObsSpace.entities ['Robot', 'Mine', 'Wall']"),
    ("actor type absent", "move", CategoricalActionMask(actor_types=["Wall"]),
     "actions['move'].actor_types has 'Wall' but the observation has no features['Wall']; give an empty (0, n_features) array"),
    # select-entity masks
    ("unknown actee id", "fire", SelectEntityActionMask(actor_ids=[1], actee_ids=[10, 77]),
     "actions['fire'].actee_ids has unknown ids [77]"),
    ("unknown actee type", "fire", SelectEntityActionMask(actor_ids=[1], actee_types=["Tank"]),
     "actions['fire'].actee_types has 'Tank', which is not an entity type"),
    ("nothing to select", "fire", SelectEntityActionMask(actor_ids=[1], actee_ids=[]),
     "actions['fire'] has 1 actors but no actees, so there is nothing to select"),
    ("select shape", "fire", SelectEntityActionMask(actor_ids=[1], actee_types=["Mine"], mask=np.ones((1, 2), np.bool_)),
     "actions['fire'].mask has shape (1, 2); expected (n_actors, n_actees) = (1, 3)"),
    ("select nothing allowed", "fire",
     SelectEntityActionMask(actor_ids=[2, 1], actee_ids=[10, 11], mask=np.array([[True, False], [False, False]])),
     "actions['fire'].mask row 1 allows no actees for actor 1 (entity type 'Robot')"),
    # global masks
    ("global 2-D", "mode", GlobalCategoricalActionMask(mask=np.ones((2, 1), np.bool_)),
     "actions['mode'].mask has shape (2, 1); expected (n_choices,) = (2,)"),
    ("global too long", "mode", GlobalCategoricalActionMask(mask=[True, True, True]),
     "actions['mode'].mask has shape (3,); expected (n_choices,) = (2,)"),
    ("global nothing allowed", "mode", GlobalCategoricalActionMask(mask=[False, False]),
     "actions['mode'].mask allows no choice; a global action needs at least one allowed choice"),
]


@pytest.mark.parametrize("label, name, mask, message", MASK_VALUE_CASES, ids=[c[0] for c in MASK_VALUE_CASES])
def test_mask_value_errors(label, name, mask, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check(with_action(name, mask))


@pytest.mark.parametrize(
    "name, mask",
    [
        ("move", CategoricalActionMask(actor_ids=[1, 2], mask=np.ones((2, 3), np.int64))),
        ("fire", SelectEntityActionMask(actor_ids=[1], actee_ids=[10], mask=[[1]])),
        ("mode", GlobalCategoricalActionMask(mask=[1, 0])),
    ],
)
def test_mask_of_non_bool_dtype(name, mask):
    with pytest.raises(TypeError, match=re.escape(f"actions['{name}'].mask has dtype int64; expected bool")):
        check(with_action(name, mask))


def test_nothing_allowed_names_the_entity_index_when_the_type_has_no_ids():
    obs = with_action("move", CategoricalActionMask(actor_types=["Mine"], mask=[[True] * 3, [False] * 3, [True] * 3]),
                      ids={"Robot": [1, 2]})
    with pytest.raises(ValueError, match=re.escape("row 1 allows no choices for the actor at entity index 3 (entity type 'Mine', no ids)")):
        check(obs)


def test_actor_ids_without_any_ids():
    obs = make_obs(ids={}, actions={"move": CategoricalActionMask(actor_ids=[1])})
    with pytest.raises(ValueError, match=re.escape(
        "actions['move'].actor_ids names entities by id but the observation has no ids; give Observation(ids=...) "
        "for ['Robot', 'Mine'] or use actor_types"
    )):
        check(obs)


def test_unknown_actor_id_mentions_types_without_ids():
    obs = make_obs(ids={"Robot": [1, 2]}, actions={"move": CategoricalActionMask(actor_ids=[10])})
    with pytest.raises(ValueError, match=re.escape("has unknown ids [10]; the observation's ids are {'Robot': [1, 2]}; entity types ['Mine'] have no ids")):
        check(obs)


def test_unhashable_actor_ids():
    obs = make_obs(actions={"move": CategoricalActionMask(actor_ids=[[1]])})
    with pytest.raises(TypeError, match=re.escape("actions['move'].actor_ids must hold hashable entity ids")):
        check(obs)


def test_where_prefixes_messages():
    with pytest.raises(ValueError, match=r"^Robots\.act\(\): reward must be finite"):
        validate_observation(make_obs(reward=np.nan), OBS_SPACE, ACTION_SPACE, where="Robots.act()")


def test_first_bad_row_is_named_on_a_large_observation():
    feats = np.zeros((1000, 2), np.float32)  # [n_entities, 2]
    feats[[417, 900], 1] = np.nan
    obs = make_obs(features={"Robot": feats}, ids={}, visible={}, actions={})
    with pytest.raises(ValueError, match=re.escape("features['Robot'] row 417 is not finite")):
        check(obs)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 30), st.sets(st.integers(0, 59), max_size=4), st.sampled_from([np.nan, np.inf, -np.inf]))
def test_bad_values_are_found_at_their_first_row(n_robots, bad, value):
    """Property: the first row holding a non-finite value is the one named, and clean data passes."""
    feats = np.arange(n_robots * 2, dtype=np.float32).reshape(n_robots, 2)  # [n_robots, 2]
    bad = sorted(k for k in bad if k < feats.size)
    feats.reshape(-1)[bad] = value
    obs = make_obs(features={"Robot": feats}, ids={}, visible={}, actions={})
    if not bad:
        check(obs)
        return
    with pytest.raises(ValueError, match=re.escape(f"features['Robot'] row {bad[0] // 2} is not finite")):
        check(obs)


# ------------------------------------------------------------------ ValidatingEnv


class Scripted(Environment):
    """Returns the observations it is given, in order, and records what it receives."""

    def __init__(self, observations):
        self.observations = list(observations)
        self.received = []
        self.closed = False
        self.seeded = None

    def obs_space(self):
        return OBS_SPACE

    def action_space(self):
        return ACTION_SPACE

    def reset(self):
        return self.observations.pop(0)

    def act(self, actions):
        self.received.append(actions)
        return self.observations.pop(0)

    def seed(self, seed):
        self.seeded = seed

    def render(self, **kwargs):
        return np.zeros((2, 2, 3), np.uint8) + kwargs.get("level", 0)

    def close(self):
        self.closed = True


MOVE = {"move": CategoricalAction(actors=[1, 2], indices=np.array([0, 2]), index_to_label=["up", "down", "stay"])}


def test_validating_env_forwards():
    inner = Scripted([make_obs(), make_obs(reward=2.0)])
    env = ValidatingEnv(inner)
    assert env.obs_space() is OBS_SPACE and env.action_space() is ACTION_SPACE
    assert env.reset().reward == 0.0
    assert env.act(MOVE).reward == 2.0
    assert inner.received == [MOVE]
    env.seed(7)
    assert inner.seeded == 7
    assert env.render(level=3)[0, 0, 0] == 3
    env.close()
    assert inner.closed


def test_validating_env_filters_the_validated_observation():
    env = ValidatingEnv(Scripted([make_obs()]))
    wanted = ObsSpace(global_features=["g"], entities={"Mine": Entity(["x"])})
    obs = env.reset_filter(wanted)
    assert list(obs.features) == ["Mine"] and list(obs.ids) == ["Mine"]
    broken = ValidatingEnv(Scripted([make_obs(), make_obs(reward=np.inf)]))
    broken.reset()
    with pytest.raises(ValueError, match=re.escape("Scripted.act(): reward must be finite, got inf")):
        broken.act_filter(MOVE, wanted)


def test_validating_env_rejects_a_bad_reset():
    env = ValidatingEnv(Scripted([None]))
    with pytest.raises(TypeError, match=re.escape("Scripted.reset(): expected an entmachin.env.Observation, got NoneType")):
        env.reset()


@pytest.mark.parametrize(
    "actions, error, message",
    [
        ([MOVE], TypeError, "actions must be a mapping from action name to action, got list"),
        ({"jump": MOVE["move"]}, ValueError, "actions has unknown action 'jump'; the action space has ['move', 'fire', 'mode']"),
        ({"fire": MOVE["move"]}, TypeError, "actions['fire'] is a CategoricalAction; expected a SelectEntityAction"),
        ({"move": CategoricalAction([1, 2], np.array([0, 3]), ["up", "down", "stay"])}, ValueError,
         "actions['move'] chose 3; expected a choice in [0, 3)"),
        ({"mode": GlobalCategoricalAction(index=-1, label="b")}, ValueError, "actions['mode'] chose -1; expected a choice in [0, 2)"),
    ],
)
def test_validating_env_checks_actions(actions, error, message):
    env = ValidatingEnv(Scripted([make_obs(), make_obs()]))
    env.reset()
    with pytest.raises(error, match=re.escape(f"Scripted.act(): {message}")):
        env.act(actions)


def test_validating_env_passes_select_entity_actions():
    inner = Scripted([make_obs(), make_obs()])
    env = ValidatingEnv(inner)
    env.reset()
    env.act({"fire": SelectEntityAction(actors=[1], actees=[11]), "mode": GlobalCategoricalAction(1, "b")})
    assert len(inner.received) == 1


# ------------------------------------------------------------------ continuous actions

CONT_SPACE = {
    "drive": ContinuousActionSpace(low=[-1, 0], high=[1, 2], names=["steer", "gas"]),
    "boost": GlobalContinuousActionSpace(low=0, high=1),
}


def cont_obs(drive=None, boost=None, ids=(1, 2)):
    """A valid observation of OBS_SPACE / CONT_SPACE: robots ``ids`` drive, one mine (id 10)."""
    ids = list(ids)
    return Observation(
        features={"Robot": np.zeros((len(ids), 2), np.float32), "Mine": np.ones((1, 1), np.float32)},
        ids={"Robot": ids, "Mine": [10]},
        global_features=[0.5],
        actions={"drive": drive if drive is not None else ContinuousActionMask(actor_ids=ids),
                 "boost": boost if boost is not None else GlobalContinuousActionMask()},
        done=False,
        reward=0.0,
    )


def check_cont(obs):
    validate_observation(obs, OBS_SPACE, CONT_SPACE)


@pytest.mark.parametrize(
    "obs",
    [
        cont_obs(),
        cont_obs(ContinuousActionMask(actor_ids=[1, 2], low=np.array([[-0.5, 0.0], [0.0, 1.0]]))),
        cont_obs(ContinuousActionMask(actor_ids=[2, 1], high=np.array([[0.5, 2.0], [1.0, 0.0]], np.float32))),
        cont_obs(ContinuousActionMask(actor_types=["Robot"], low=[[0, 1], [1, 2]], high=[[0, 1], [1, 2]])),  # fixed
        cont_obs(ContinuousActionMask(actor_ids=[1, 2], low=[[-1, 0], [-1, 0]], high=[[1, 2], [1, 2]])),  # the space's
        cont_obs(ContinuousActionMask(actor_ids=[1, 2], high=[[0.1, 0.1], [0.1, 0.1]])),  # rounds up in float32
        cont_obs(ContinuousActionMask(actor_ids=[], low=[], high=np.zeros((0, 2)))),
        cont_obs(ContinuousActionMask(actor_types=["Robot"], low=[]), ids=()),
        cont_obs(boost=GlobalContinuousActionMask(low=[0.25])),
        cont_obs(boost=GlobalContinuousActionMask(low=np.array([[0.25]]), high=np.array([0.5], np.float32))),
        cont_obs(boost=GlobalContinuousActionMask(low=[1], high=[1])),
    ],
)
def test_valid_continuous_masks_pass(obs):
    check_cont(obs)


@pytest.mark.parametrize(
    "name, mask, space",
    [
        ("drive", CategoricalActionMask(actor_ids=[1]), "ContinuousActionSpace needs a ContinuousActionMask"),
        ("drive", GlobalContinuousActionMask(), "ContinuousActionSpace needs a ContinuousActionMask"),
        ("boost", ContinuousActionMask(actor_ids=[1]), "GlobalContinuousActionSpace needs a GlobalContinuousActionMask"),
        ("boost", GlobalCategoricalActionMask(), "GlobalContinuousActionSpace needs a GlobalContinuousActionMask"),
    ],
)
def test_continuous_mask_of_the_wrong_class(name, mask, space):
    obs = cont_obs()
    obs.actions[name] = mask
    with pytest.raises(TypeError, match=re.escape(f"actions['{name}'] is a {type(mask).__name__}; its {space}")):
        check_cont(obs)


def test_categorical_space_refuses_a_continuous_mask():
    with pytest.raises(TypeError, match=re.escape("actions['move'] is a ContinuousActionMask; its CategoricalActionSpace "
                                                  "needs a CategoricalActionMask")):
        check(with_action("move", ContinuousActionMask(actor_ids=[1])))


ROBOT_1, ROBOT_2 = "actor 0 (id 1, entity type 'Robot')", "actor 1 (id 2, entity type 'Robot')"
CONT_MASK_CASES = [
    ("low rows", ContinuousActionMask(actor_ids=[1, 2], low=np.zeros((1, 2))),
     "actions['drive'].low has shape (1, 2); expected (n_actors, n_values) = (2, 2)"),
    ("high width", ContinuousActionMask(actor_ids=[1, 2], high=np.ones((2, 3))),
     "actions['drive'].high has shape (2, 3); expected (n_actors, n_values) = (2, 2)"),
    ("1-d for one actor", ContinuousActionMask(actor_ids=[1], low=[0.0, 0.0]),
     "actions['drive'].low has shape (2,); expected (n_actors, n_values) = (1, 2)"),
    ("bounds without actors", ContinuousActionMask(actor_ids=[], low=[[0.0, 0.0]]),
     "actions['drive'].low has shape (1, 2); expected (n_actors, n_values) = (0, 2)"),
    ("ragged", ContinuousActionMask(actor_ids=[1, 2], low=[[0.0, 0.0], [0.0]]),
     "actions['drive'].low could not be read as a float array"),
    ("nan", ContinuousActionMask(actor_ids=[1, 2], low=[[0, 0], [0, np.nan]]),
     f"actions['drive'].low[1, 1] ({ROBOT_2}, value 'gas' (dimension 1)) is nan; bounds must be finite"),
    ("inf", ContinuousActionMask(actor_ids=[1, 2], high=[[np.inf, 1], [1, 1]]),
     f"actions['drive'].high[0, 0] ({ROBOT_1}, value 'steer' (dimension 0)) is inf; bounds must be finite"),
    ("widens low", ContinuousActionMask(actor_ids=[1, 2], low=[[-1.5, 0], [0, 0]]),
     f"actions['drive'].low[0, 0] ({ROBOT_1}, value 'steer' (dimension 0)) is -1.5, below the space's low -1.0; "
     "a mask narrows the space's bounds, never widens them"),
    ("widens high", ContinuousActionMask(actor_ids=[1, 2], high=[[1, 2], [1, 2.5]]),
     f"actions['drive'].high[1, 1] ({ROBOT_2}, value 'gas' (dimension 1)) is 2.5, above the space's high 2.0"),
    ("beyond float32", ContinuousActionMask(actor_ids=[1, 2], high=[[1, 1e39], [1, 1]]),
     f"actions['drive'].high[0, 1] ({ROBOT_1}, value 'gas' (dimension 1)) is 1e+39, above the space's high 2.0"),
    ("crossed", ContinuousActionMask(actor_ids=[1, 2], low=[[0, 0], [0.5, 0]], high=[[1, 1], [0.25, 1]]),
     f"actions['drive']: {ROBOT_2}, value 'steer' (dimension 0) has low 0.5 > high 0.25; expected low <= high"),
    ("low above the space's high", ContinuousActionMask(actor_ids=[1, 2], low=[[0, 3], [0, 0]]),
     f"actions['drive']: {ROBOT_1}, value 'gas' (dimension 1) has low 3.0 > high 2.0; expected low <= high "
     "(a bound not given is the space's)"),
    ("unknown actor", ContinuousActionMask(actor_ids=[1, 99]), "actions['drive'].actor_ids has unknown ids [99]"),
    ("unknown actor type", ContinuousActionMask(actor_types=["Tank"]),
     "actions['drive'].actor_types has 'Tank', which is not an entity type of ObsSpace.entities"),
]


@pytest.mark.parametrize("label, mask, message", CONT_MASK_CASES, ids=[c[0] for c in CONT_MASK_CASES])
def test_continuous_mask_value_errors(label, mask, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_cont(cont_obs(mask))


GLOBAL_CONT_MASK_CASES = [
    ("too long", GlobalContinuousActionMask(low=[0.0, 0.0]),
     "actions['boost'].low has shape (2,); expected (n_values,) = (1,) or (1, 1)"),
    ("column", GlobalContinuousActionMask(high=np.ones((2, 1))),
     "actions['boost'].high has shape (2, 1); expected (n_values,) = (1,) or (1, 1)"),
    ("nan", GlobalContinuousActionMask(high=[np.nan]),
     "actions['boost'].high[0] (the global actor, value '0' (dimension 0)) is nan; bounds must be finite"),
    ("widens", GlobalContinuousActionMask(low=[[-0.25]]),
     "actions['boost'].low[0] (the global actor, value '0' (dimension 0)) is -0.25, below the space's low 0.0"),
    ("crossed", GlobalContinuousActionMask(low=[0.75], high=[0.5]),
     "actions['boost']: the global actor, value '0' (dimension 0) has low 0.75 > high 0.5; expected low <= high"),
]


@pytest.mark.parametrize("label, mask, message", GLOBAL_CONT_MASK_CASES, ids=[c[0] for c in GLOBAL_CONT_MASK_CASES])
def test_global_continuous_mask_value_errors(label, mask, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_cont(cont_obs(boost=mask))


@pytest.mark.parametrize(
    "mask, dtype",
    [
        (ContinuousActionMask(actor_ids=[1, 2], low=np.zeros((2, 2), np.bool_)), "bool"),
        (ContinuousActionMask(actor_ids=[1, 2], high=[["a", "b"], ["c", "d"]]), "<U1"),
    ],
)
def test_continuous_mask_of_non_float_dtype(mask, dtype):
    side = "low" if mask.low is not None else "high"
    with pytest.raises(TypeError, match=re.escape(f"actions['drive'].{side} has dtype {dtype}; expected float bounds")):
        check_cont(cont_obs(mask))


def test_continuous_mask_errors_name_the_entity_index_without_ids():
    obs = cont_obs(ContinuousActionMask(actor_types=["Mine"], low=[[-2.0, 0.0]]))
    obs.ids.pop("Mine")
    with pytest.raises(ValueError, match=re.escape("actions['drive'].low[0, 0] (actor 0 (entity index 2, entity type "
                                                   "'Mine', no id), value 'steer' (dimension 0)) is -2.0")):
        check_cont(obs)


class ContScripted(Scripted):
    """``Scripted`` with the continuous spaces (``mutate`` changes them after they are built)."""

    def __init__(self, observations, mutate=None):
        super().__init__(observations)
        self.spaces = {"drive": ContinuousActionSpace(low=[-1, 0], high=[1, 2], names=["steer", "gas"]),
                       "boost": GlobalContinuousActionSpace(low=0, high=1)}
        if mutate is not None:
            mutate(self.spaces)

    def action_space(self):
        return self.spaces


def _set(name, attr, value):
    def mutate(spaces):
        setattr(spaces[name], attr, value)
    return mutate


def _set_item(name, attr, index, value):
    def mutate(spaces):
        getattr(spaces[name], attr)[index] = value
    return mutate


@pytest.mark.parametrize(
    "mutate, error, message",
    [
        (_set_item("drive", "low", 0, np.nan), ValueError,
         "['drive']: ContinuousActionSpace: value 'steer' (dimension 0) has bounds [nan, 1.0]; both must be finite"),
        (_set("boost", "high", np.array([np.inf])), ValueError,
         "['boost']: GlobalContinuousActionSpace: value '0' (dimension 0) has bounds [0.0, inf]; both must be finite"),
        (_set("boost", "high", [1e39]), ValueError,
         "['boost']: GlobalContinuousActionSpace: value '0' (dimension 0) has bounds [0.0, 1e+39]; both must be "
         "finite (and within float32's range"),
        (_set_item("drive", "low", 1, 5.0), ValueError,
         "['drive']: ContinuousActionSpace: value 'gas' (dimension 1) has low 5.0 > high 2.0 (were the bounds changed "
         "after the space was built?)"),
        (_set("drive", "high", np.zeros(3, np.float32)), ValueError,
         "['drive']: ContinuousActionSpace: low has 2 values and high 3; expected one per value (2, the names)"),
        (_set("drive", "low", ["a", "b"]), ValueError,
         "['drive']: ContinuousActionSpace: low and high must be numbers"),
    ],
    ids=["nan", "inf", "beyond float32", "crossed", "count", "not numbers"],
)
def test_validating_env_refuses_continuous_spaces_changed_after_construction(mutate, error, message):
    with pytest.raises(error, match=re.escape(f"ContScripted.action_space(){message}")):
        ValidatingEnv(ContScripted([], mutate))


NARROW = ContinuousActionMask(actor_ids=[1, 2], low=[[-0.5, 0.0], [0.5, 0.0]], high=[[0.5, 2.0], [1.0, 2.0]])


def drive(values, actors=(1, 2), names=("steer", "gas")):
    return ContinuousAction(actors=list(actors), values=values, names=list(names))


def boost(value, dtype=np.float32):
    return GlobalContinuousAction(values=np.array([value], dtype), names=["0"])


def test_validating_env_passes_continuous_actions_within_bounds():
    inner = ContScripted([cont_obs(NARROW), cont_obs(ids=()), cont_obs()])
    env = ValidatingEnv(inner)
    env.reset()
    permuted = drive(np.array([[0.75, 2.0], [-0.5, 0.0]], np.float32), actors=[2, 1])  # each in its own bounds
    env.act({"drive": permuted, "boost": boost(1.0)})
    env.act({"drive": drive(np.zeros((0, 2), np.float32), actors=[])})  # an empty action for no actors is fine
    assert inner.received[0]["drive"] is permuted and len(inner.received) == 2
    with pytest.raises(ValueError, match=re.escape("actions['drive'] is taken by actors []; the observation's actors "
                                                   "are [1, 2]")):
        env.act({"drive": drive(np.zeros((0, 2), np.float32), actors=[])})  # but not for actors 1 and 2


CONT_ACTION_CASES = [
    ("float64", {"drive": drive(np.zeros((2, 2)))}, TypeError,
     "actions['drive'].values has dtype float64; expected float32 (use .astype(np.float32))"),
    ("int", {"drive": drive(np.zeros((2, 2), np.int64))}, TypeError, "actions['drive'].values has dtype int64"),
    ("list", {"drive": drive([[0.0, 0.0], [0.0, 0.0]])}, TypeError,
     "actions['drive'].values is a list; expected a float32 numpy array (n_actors, n_values) = (2, 2)"),
    ("global float64", {"boost": boost(0.5, np.float64)}, TypeError, "actions['boost'].values has dtype float64"),
    ("wrong class", {"drive": CategoricalAction([1, 2], np.array([0, 1]), ["a", "b"])}, TypeError,
     "actions['drive'] is a CategoricalAction; expected a ContinuousAction"),
    ("global wrong class", {"boost": drive(np.zeros((1, 1), np.float32), actors=[1], names=["0"])}, TypeError,
     "actions['boost'] is a ContinuousAction; expected a GlobalContinuousAction"),
    ("width", {"drive": drive(np.zeros((2, 3), np.float32))}, ValueError,
     "actions['drive'].values has shape (2, 3); expected (n_actors, n_values) = (2, 2): a row per actor, a column "
     "per value ['steer', 'gas']"),
    ("rows", {"drive": drive(np.zeros((1, 2), np.float32))}, ValueError,
     "actions['drive'].values has shape (1, 2); expected (n_actors, n_values) = (2, 2)"),
    ("global 2-d", {"boost": GlobalContinuousAction(np.zeros((1, 1), np.float32), ["0"])}, ValueError,
     "actions['boost'].values has shape (1, 1); expected (n_values,) = (1,): one per value ['0']"),
    ("names", {"drive": drive(np.zeros((2, 2), np.float32), names=["gas", "steer"])}, ValueError,
     "actions['drive'].names is ['gas', 'steer']; expected the space's value names ['steer', 'gas']"),
    ("nan", {"drive": drive(np.array([[0, 0], [0, np.nan]], np.float32))}, ValueError,
     "actions['drive']: actor 1 (id 2), value 'gas' (dimension 1) is nan; expected a finite value in [0.0, 2.0]"),
    ("outside the space", {"drive": drive(np.array([[0, 0], [0, 2.5]], np.float32))}, ValueError,
     "actions['drive']: actor 1 (id 2), value 'gas' (dimension 1) is 2.5, outside its bounds [0.0, 2.0] "
     "(the action space's)"),
    ("outside the mask", {"drive": drive(np.array([[0.75, 0], [0.75, 0]], np.float32))}, ValueError,
     "actions['drive']: actor 0 (id 1, entity type 'Robot'), value 'steer' (dimension 0) is 0.75, outside its bounds "
     "[-0.5, 0.5] (the observation's mask)"),
    ("outside the mask, permuted", {"drive": drive(np.array([[0.0, 0], [0.0, 0]], np.float32), actors=[2, 1])},
     ValueError, "actions['drive']: actor 0 (id 2, entity type 'Robot'), value 'steer' (dimension 0) is 0.0, "
     "outside its bounds [0.5, 1.0] (the observation's mask)"),
    ("other actors", {"drive": drive(np.zeros((2, 2), np.float32), actors=[1, 10])}, ValueError,
     "actions['drive'] is taken by actors [1, 10]; the observation's actors are [1, 2]"),
    ("global outside the mask", {"boost": boost(0.75)}, ValueError,
     "actions['boost']: the global actor, value '0' (dimension 0) is 0.75, outside its bounds [0.25, 0.5] "
     "(the observation's mask)"),
    ("global outside the space", {"boost": boost(-0.5)}, ValueError,
     "actions['boost']: the global actor, value '0' (dimension 0) is -0.5, outside its bounds [0.0, 1.0] "
     "(the action space's)"),
]


@pytest.mark.parametrize("label, actions, error, message", CONT_ACTION_CASES, ids=[c[0] for c in CONT_ACTION_CASES])
def test_validating_env_checks_continuous_actions(label, actions, error, message):
    obs = cont_obs(NARROW, boost=GlobalContinuousActionMask(low=[0.25], high=[0.5]))
    inner = ContScripted([obs, cont_obs()])
    env = ValidatingEnv(inner)
    env.reset()
    with pytest.raises(error, match=re.escape(f"ContScripted.act(): {message}")):
        env.act(actions)
    assert inner.received == []


def test_validating_env_refuses_continuous_actions_for_no_actors():
    env = ValidatingEnv(ContScripted([cont_obs(ContinuousActionMask(actor_ids=[])), cont_obs()]))
    env.reset()
    with pytest.raises(ValueError, match=re.escape("ContScripted.act(): actions['drive'] acts, but the observation "
                                                   "has no actors for 'drive'")):
        env.act({"drive": drive(np.zeros((1, 2), np.float32), actors=[1])})


def test_checked_choices_of_continuous_actions_are_float32_in_the_mask_order():
    obs = cont_obs(NARROW)
    values = np.array([[0.75, 2.0], [-0.5, 0.0]], np.float32)  # actors 2, 1
    choices = checked_choices(obs, OBS_SPACE, CONT_SPACE, {"drive": drive(values, actors=[2, 1]), "boost": boost(0.5)})
    assert choices["drive"].dtype == np.float32 and choices["boost"].dtype == np.float32
    np.testing.assert_array_equal(choices["drive"], values[[1, 0]])  # [n_actors, n_values], actors 1, 2
    np.testing.assert_array_equal(choices["boost"], [[0.5]])  # [1, n_values]
    none = checked_choices(cont_obs(ContinuousActionMask(actor_ids=[]), boost=None), OBS_SPACE,
                           {"drive": CONT_SPACE["drive"]}, {})
    assert none["drive"].shape == (0, 2) and none["drive"].dtype == np.float32
    with pytest.raises(ValueError, match=re.escape("seat 'b': actions['drive'] is missing; the observation has 2 actor(s)")):
        checked_choices(obs, OBS_SPACE, CONT_SPACE, {"boost": boost(0.5)}, "seat 'b'")


class Duel(MultiAgentEnvironment):
    """Two seats, each steering its robots with ``CONT_SPACE``; ``mutate`` changes the spaces."""

    def __init__(self, mutate=None):
        self.spaces = ContScripted([], mutate).spaces
        self.received = []

    def seats(self):
        return ["a", "b"]

    def obs_space(self):
        return OBS_SPACE

    def action_space(self):
        return self.spaces

    def reset(self):
        return {"a": cont_obs(NARROW), "b": cont_obs(ids=[3])}

    def act(self, actions):
        self.received.append(actions)
        return self.reset()


def test_validating_game_checks_each_seats_continuous_actions():
    env = ValidatingEnv(Duel())
    assert isinstance(env, ValidatingMultiAgentEnv)
    env.reset()
    good = {"a": {"drive": drive(np.array([[0.0, 1.0], [0.75, 1.0]], np.float32)), "boost": boost(0.5)},
            "b": {"drive": drive(np.array([[1.0, 2.0]], np.float32), actors=[3]), "boost": boost(0.0)}}
    env.act(good)
    bad = {"a": good["a"], "b": {"drive": drive(np.array([[1.0, 2.5]], np.float32), actors=[3]), "boost": boost(0.0)}}
    with pytest.raises(ValueError, match=re.escape("Duel.act(): seat 'b': actions['drive']: actor 0 (id 3), value 'gas' "
                                                   "(dimension 1) is 2.5, outside its bounds [0.0, 2.0]")):
        env.act(bad)
    assert len(env.env.received) == 1
    with pytest.raises(ValueError, match=re.escape("Duel.action_space()['drive']: ContinuousActionSpace: value 'gas' "
                                                   "(dimension 1) has low 5.0 > high 2.0")):
        ValidatingEnv(Duel(_set_item("drive", "low", 1, 5.0)))
