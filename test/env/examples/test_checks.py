import numpy as np
import pytest

from entmachin.env import CategoricalAction, GlobalCategoricalAction, SelectEntityAction
from entmachin.env.examples import ENV_REGISTRY, SINGLE_AGENT
from entmachin.env.examples._checks import (
    check_bool,
    check_choice,
    check_int,
    check_label,
    expect_action_type,
    expect_actions,
    expect_choice_per_actor,
    expect_one_choice,
    resolve_id,
)

LABELS = ["a", "b"]


def _categorical(actors, indices):
    return CategoricalAction(actors, np.array(indices, dtype=np.int64), LABELS)


def test_expect_actions():
    expect_actions("Env", {"b": 0, "a": 1}, ["a", "b"])
    with pytest.raises(ValueError, match=r"Env\.act: expected exactly the action 'a', got \['a', 'c'\]"):
        expect_actions("Env", {"a": 0, "c": 1}, ["a"])
    with pytest.raises(ValueError, match=r"Env\.act: expected exactly the actions 'a', 'b', got \['a'\]"):
        expect_actions("Env", {"a": 0}, ["a", "b"])


def test_expect_action_type():
    action = GlobalCategoricalAction(0, "a")
    assert expect_action_type("Env", "x", action, GlobalCategoricalAction) is action
    with pytest.raises(TypeError, match=r"Env\.act: actions\['x'\] must be a CategoricalAction, got GlobalCat"):
        expect_action_type("Env", "x", action, CategoricalAction)
    with pytest.raises(TypeError, match=r"actions\['x'\] must be a SelectEntityAction, got NoneType"):
        expect_action_type("Env", "x", None, SelectEntityAction)


@pytest.mark.parametrize(
    "action, match",
    [
        (_categorical([1], [0]), r"Env\.act: actions\['x'\] expects one choice by actor 0, got actors \[1\] and 1 "),
        (_categorical([0, 0], [0, 1]), r"got actors \[0, 0\] and 2 choices"),
        (SelectEntityAction([0], []), r"got actors \[0\] and 0 choices"),
    ],
)
def test_expect_one_choice(action, match):
    with pytest.raises(ValueError, match=match):
        expect_one_choice("Env", "x", action, 0)


def test_one_choice_by_the_actor_passes():
    expect_one_choice("Env", "x", _categorical([0], [1]), 0)
    expect_one_choice("Env", "x", SelectEntityAction([0], [("Ball", 3)]), 0)


def test_expect_choice_per_actor():
    expect_choice_per_actor("Env", "x", _categorical([0, 1], [1, 0]))
    expect_choice_per_actor("Env", "x", SelectEntityAction([], []))
    with pytest.raises(ValueError, match=r"Env\.act: actions\['x'\] has 2 actors but 1 choices"):
        expect_choice_per_actor("Env", "x", _categorical([0, 1], [1]))
    with pytest.raises(ValueError, match=r"Env\.act: actions\['x'\] has 1 actors but 2 actees"):
        expect_choice_per_actor("Env", "x", SelectEntityAction([0], [1, 2]))


def test_check_choice():
    choice = check_choice("Env", "x", np.int64(2), 3)
    assert choice == 2 and type(choice) is int
    for bad in (3, -1):
        with pytest.raises(ValueError, match=rf"Env\.act: actions\['x'\] choice {bad} is outside \[0, 3\)"):
            check_choice("Env", "x", bad, 3)


def test_check_label():
    assert check_label("Env", "x", "b", LABELS) == "b"
    with pytest.raises(ValueError, match=r"Env\.act: actions\['x'\] chose 'c'; expected one of \['a', 'b'\]"):
        check_label("Env", "x", "c", LABELS)


@pytest.mark.parametrize("eid", [("Mine", 2), ("Robot", 1), ("Cherry", 0), ("Mine", -1), ("Mine", "0"), "Mine", 0])
def test_resolve_id_rejects_what_is_not_a_current_id(eid):
    match = r"Env\.act: actions\['x'\] refers to entity .*, which is not a current Mine or Robot id of the last"
    with pytest.raises(ValueError, match=match):
        resolve_id("Env", "x", eid, {"Mine": 2, "Robot": 0})


def test_resolve_id():
    assert resolve_id("Env", "x", ("Mine", np.int64(1)), {"Mine": 2}) == ("Mine", 1)


def test_check_int():
    value = check_int("Env", "n", np.int64(3), 1)
    assert value == 3 and type(value) is int
    assert check_int("Env", "n", 10, 1, 10) == 10
    for bad in (True, 2.0, "2"):
        with pytest.raises(TypeError, match=rf"Env: `n` must be an int, got {type(bad).__name__}"):
            check_int("Env", "n", bad, 1)
    with pytest.raises(ValueError, match="Env: `n` must be >= 1, got 0"):
        check_int("Env", "n", 0, 1)
    with pytest.raises(ValueError, match="Env: `n` must be between 1 and 10, got 11"):
        check_int("Env", "n", 11, 1, 10)


def test_check_bool():
    assert check_bool("Env", "flag", np.bool_(True)) is True
    with pytest.raises(TypeError, match="Env: `flag` must be a bool, got int"):
        check_bool("Env", "flag", 1)


# By the class of an action space: the action class it takes, and an action of another class.
WRONG_CLASS = {
    "CategoricalActionSpace": ("CategoricalAction", GlobalCategoricalAction(0, "a")),
    "GlobalCategoricalActionSpace": ("GlobalCategoricalAction", _categorical([0], [0])),
    "SelectEntityActionSpace": ("SelectEntityAction", _categorical([0], [0])),
    "ContinuousActionSpace": ("ContinuousAction", _categorical([0], [0])),
}
# (example, action) pairs in which the example reads the action (NotHotdog's "unused_action" is never read).
READ_ACTIONS = [
    (name, action)
    for name in SINGLE_AGENT  # games of several players: their own tests
    for action in ENV_REGISTRY[name]().action_space()
    if (name, action) != ("NotHotdog", "unused_action")
]


@pytest.mark.parametrize("name, action", READ_ACTIONS)
def test_every_example_rejects_an_action_of_the_wrong_class(name, action):
    env = ENV_REGISTRY[name]()
    env.reset()
    expected, wrong = WRONG_CLASS[type(env.action_space()[action]).__name__]
    match = rf"{name}\.act: actions\['{action}'\] must be a {expected}, got {type(wrong).__name__}"
    with pytest.raises(TypeError, match=match):
        env.act({action: wrong})
