"""Every input error RogueNet raises names where, what was expected and what arrived."""
import numpy as np
import pytest
import torch

from entmachin.env import CategoricalActionSpace, Entity, ObsSpace
from entmachin.model import RelposEncodingConfig, RogueNet, RogueNetConfig, TranslationConfig
from entmachin.ragged import ragged_from_arrays
from entmachin.ragged.tensor import RaggedTensor
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(d_model=8, n_layer=1))


@pytest.fixture
def state():
    return zoo_state(zoo_observations(0, 4, max_units=3, max_trees=3))


def _i64(lists):
    return ragged_from_arrays(np.array([v for l in lists for v in l], dtype=np.int64).reshape(-1, 1),
                              [len(l) for l in lists])


def _bools(lists, width=1):
    flat = np.array([v for l in lists for v in l], dtype=bool).reshape(-1, width)
    return ragged_from_arrays(flat, [len(l) // width for l in lists])


def _run(net, state, action=None):
    return net(state["entities"], state["action_masks"], state.get("visible"), action)


def _set(tree, path, value):
    node = tree
    for key in path[:-1]:
        node[key] = dict(node[key])
        node = node[key]
    node[path[-1]] = value


@pytest.mark.parametrize(
    "path, value, error, match",
    [
        (("entities", "Unit"), torch.zeros(3, 3), TypeError,
         r"entities\['Unit'\]: expected a ragged array or RaggedTensor with one sequence per row, got Tensor"),
        (("entities", "Rock"), ragged_from_arrays(np.zeros((0, 1), np.float32), [0, 0, 0, 0]), ValueError,
         r"entities\['Rock'\] is not an entity type of the observation space; expected some of \['Unit', 'Tree', 'Flag', '__global__'\]"),
        (("entities", "Unit"), ragged_from_arrays(np.zeros((2, 2), np.float32), [1, 1, 0, 0]), ValueError,
         r"entities\['Unit'\] has items of shape \(2,\); ObsSpace.entities\['Unit'\] \(\['x', 'y', 'hp'\]\) declares 3"),
        (("entities", "Unit"), ragged_from_arrays(np.zeros((2, 3), np.float32), [1, 1, 0]), ValueError,
         r"entities\['Unit'\] has 3 rows, but entities\['Tree'\] has 4|entities\['Tree'\] has 4 rows, but entities\['Unit'\] has 3"),
        (("entities", "Unit"), ragged_from_arrays(np.zeros((2, 3), np.int64), [1, 1, 0, 0]), TypeError,
         r"entities\['Unit'\] holds torch.int64; expected floating-point features"),
        (("entities", "__global__"), ragged_from_arrays(np.zeros((5, 1), np.float32), [2, 1, 1, 1]), ValueError,
         r"entities\['__global__'\] must hold exactly one item per row, got row lengths \[2, 1, 1, 1\]"),
        (("visible", "Ghost"), _bools([[], [], [], []]), ValueError,
         r"visible\['Ghost'\] names no entity type; expected some of \['Unit', 'Tree', 'Flag'\]"),
        (("visible", "Unit"), _bools([[True] * 9, [], [], []]), ValueError,
         r"visible\['Unit'\] has row lengths \[9, 0, 0, 0\], but entities\['Unit'\] has"),
        (("action_masks", "jump"), {"actors": _i64([[], [], [], []])}, ValueError,
         r"action_masks\['jump'\]: unknown action; the action space has \['move', 'attack', 'mode'\]"),
        (("action_masks", "move"), {"mask": None}, ValueError,
         r"action_masks\['move'\]: expected a mapping with an 'actors' entry"),
        (("action_masks", "move", "actees"), _i64([[], [], [], []]), ValueError,
         r"action_masks\['move'\]: unknown key 'actees' for a CategoricalActionSpace; allowed: \['actors', 'mask'\]"),
        (("action_masks", "move", "actors"), ragged_from_arrays(np.zeros((0, 1), np.float32), [0, 0, 0, 0]), TypeError,
         r"action_masks\['move'\]\['actors'\] holds torch.float32; expected int64 entity indices"),
        (("action_masks", "move", "mask"), _bools([[True] * 3], 3), ValueError,
         r"action_masks\['move'\]\['mask'\] has items of shape \(3,\); the action space \(4 choices\) declares 4"),
        (("action_masks", "move", "mask"), _bools([[True] * 4, [], [], []], 4), ValueError,
         r"action_masks\['move'\]\['mask'\] has row lengths \[1, 0, 0, 0\], but \['actors'\] has"),
        (("action_masks", "attack"), {"actors": _i64([[], [], [], []])}, ValueError,
         r"action_masks\['attack'\]: a SelectEntityActionSpace needs an 'actees' entry"),
        (("action_masks", "attack", "actee_mask"), _bools([[True], [], [], []]), ValueError,
         r"action_masks\['attack'\]\['actee_mask'\] has row lengths \[1, 0, 0, 0\]; expected n_actors \* n_actees"),
        (("action_masks", "mode", "actors"), _i64([[0], [0], [0], [0]]), ValueError,
         r"action_masks\['mode'\]\['actors'\] row 0 names entity 0; a global action's actor is the __global__ entity"),
        (("action_masks", "move"), {"actors": _i64([[0], [], [], [99]])}, ValueError,
         r"action_masks\['move'\]\['actors'\] row 3 item 0 is 99; expected an entity index in \[0, \d+\)"),
        (("action_masks", "move"), {"actors": _i64([[0], [], [], []]), "mask": _bools([[False] * 4, [], [], []], 4)},
         ValueError, r"action_masks\['move'\]\['mask'\] row 0 forbids every choice of actor 0"),
        (("action_masks", "move"), {"actors": _i64([[], [], []])}, ValueError,
         r"action_masks\['move'\]\['actors'\] has 3 rows, but the entities have 4"),
        (("action_masks", "attack"), {"actors": _i64([[0], [], [], []]), "actees": _i64([[-1], [], [], []])},
         ValueError, r"action_masks\['attack'\]\['actees'\] row 0 item 0 is -1; expected an entity index"),
        (("action_masks", "attack"), {"actors": _i64([[0], [], [], []]), "actees": _i64([[1], [], [], []]),
                                      "actee_mask": _bools([[False], [], [], []])},
         ValueError, r"action_masks\['attack'\]: actor 0 of row 0 has no allowed actee"),
        (("action_masks", "attack"), {"actors": _i64([[0], [], [], []]), "actees": _i64([[], [], [], []])},
         ValueError, r"action_masks\['attack'\]: actor 0 of row 0 has no allowed actee"),
    ],
)
def test_state_errors(net, state, path, value, error, match):
    state["visible"] = dict(state.get("visible", {}))
    _set(state, path, value)
    with pytest.raises(error, match=match):
        _run(net, state)


def test_container_type_errors(net, state):
    with pytest.raises(TypeError, match=r"entities must map entity type -> ragged features, got list"):
        net([], state["action_masks"])
    with pytest.raises(TypeError, match=r"action_masks must map action name -> masks, got list"):
        net(state["entities"], [])
    with pytest.raises(TypeError, match=r"visible must map entity type -> ragged bool, got list"):
        net(state["entities"], state["action_masks"], [1])
    with pytest.raises(TypeError, match=r"action must map action name -> ragged int64, got list"):
        net(state["entities"], state["action_masks"], None, [1])


def test_missing_rows_and_global_features(net, state):
    with pytest.raises(ValueError, match=r"cannot tell the number of rows: entities is empty and there are no action masks"):
        net.value({})
    entities = {k: v for k, v in state["entities"].items() if k != "__global__"}
    with pytest.raises(ValueError, match=r"ObsSpace.global_features is \['t'\], but entities has no '__global__' entry"):
        net.value(entities)


def _actions(net, state):
    out = net(state["entities"], state["action_masks"], state.get("visible"), deterministic=True)
    return {k: v.to_ragged_array() for k, v in out.action.items()}


def test_given_action_errors(net):
    state = zoo_state(zoo_observations(5, 4, max_units=3, max_trees=3))
    lengths = state["action_masks"]["move"]["actors"].size1()
    row = int(np.flatnonzero(lengths)[0])
    actions = _actions(net, state)
    with pytest.raises(ValueError, match=r"action has entries \['attack', 'move'\], but action_masks has \['attack', 'mode', 'move'\]"):
        _run(net, state, {k: v for k, v in actions.items() if k != "mode"})
    bad = dict(actions, move=_i64([[0]] * 4))
    with pytest.raises(ValueError, match=r"action\['move'\] has row lengths \[1, 1, 1, 1\], but the actors have"):
        _run(net, state, bad)

    def with_value(name, value):
        flat = actions[name].as_array().copy()
        flat[int(lengths[:row].sum())] = value
        return dict(actions, **{name: ragged_from_arrays(flat, actions[name].size1())})

    with pytest.raises(ValueError, match=rf"action\['move'\] row {row} item 0 is 7; expected a choice in \[0, 4\)"):
        _run(net, state, with_value("move", 7))
    with pytest.raises(ValueError, match=rf"action\['attack'\] row {row} item 0 is 50; expected an actee position"):
        _run(net, state, with_value("attack", 50))
    move_mask = state["action_masks"]["move"]["mask"].as_array()
    forbidden = np.flatnonzero(~move_mask[int(lengths[:row].sum())])
    if len(forbidden):
        with pytest.raises(ValueError, match=rf"action\['move'\] row {row} actor 0 chose {forbidden[0]}, which its mask forbids"):
            _run(net, state, with_value("move", int(forbidden[0])))
    pairs = state["action_masks"]["attack"]["actee_mask"]
    flat_pairs = RaggedTensor.from_ragged_array(pairs)[row][:, 0]
    n_actees = int(state["action_masks"]["attack"]["actees"].size1()[row])
    denied = np.flatnonzero(~flat_pairs[:n_actees].numpy())
    if len(denied):
        with pytest.raises(ValueError, match=rf"action\['attack'\] row {row} actor 0 chose {denied[0]}, which its mask forbids"):
            _run(net, state, with_value("attack", int(denied[0])))


def test_constructor_errors():
    with pytest.raises(TypeError, match=r"RogueNet: obs_space must be an ObsSpace, got dict"):
        RogueNet({}, ACTION_SPACE)
    with pytest.raises(TypeError, match=r"RogueNet: action_space must map action name -> ActionSpace, got list"):
        RogueNet(OBS_SPACE, [])
    with pytest.raises(TypeError, match=r"RogueNet: config must be a RogueNetConfig, got dict"):
        RogueNet(OBS_SPACE, ACTION_SPACE, {})
    with pytest.raises(TypeError, match=r"RogueNet: action_space\['x'\] is a str; expected one of"):
        RogueNet(OBS_SPACE, {"x": "up"})
    with pytest.raises(ValueError, match=r"the observation space has no entity types and there is no global action"):
        RogueNet(ObsSpace(global_features=["a"]), {"x": CategoricalActionSpace(["a"])})
    with pytest.raises(ValueError, match=r"TranslationConfig.reference_entity: 'Hero' is not an entity type; expected one of"):
        RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(translation=TranslationConfig(reference_entity="Hero", position_features=["x"])))
    with pytest.raises(ValueError, match=r"TranslationConfig.position_features of 'Unit': feature 'z' is not one of \['x', 'y', 'hp'\]"):
        RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(translation=TranslationConfig(reference_entity="Unit", position_features=["z"])))
    with pytest.raises(ValueError, match=r"RelposEncodingConfig.position_features: no entity type has all of \['q'\]"):
        RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(relpos_encoding=RelposEncodingConfig(extent=[2], position_features=["q"])))
    space = ObsSpace(entities={"A.b": Entity(["x"])})
    RogueNet(space, {"a.move": CategoricalActionSpace(["l", "r"])})  # dotted names are fine


def test_deferred_checks_report_the_first_failure_in_order_with_range_checks_decided_together():
    from entmachin.model.inputs import DeferredChecks

    def checks(first_range_bad: bool, plain_bad: bool, second_range_bad: bool) -> DeferredChecks:
        c = DeferredChecks()
        c.add_range(torch.tensor([0, 3 if first_range_bad else 1]), torch.tensor([2, 2]), lambda: "first range")
        c.add(torch.tensor(plain_bad), lambda: "plain")
        c.add_range(torch.tensor([-1 if second_range_bad else 0]), torch.tensor([1]), lambda: "second range")
        return c

    checks(False, False, False).raise_first()
    for flags, match in (((True, True, True), "first range"), ((False, True, True), "plain"),
                         ((False, False, True), "second range")):
        with pytest.raises(ValueError, match=match):
            checks(*flags).raise_first()
