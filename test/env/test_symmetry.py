"""Symmetries declared by environments: checked against the spaces, forwarded by wrappers."""
import pytest

from entmachin.env import TimeLimit
from entmachin.env.examples.connect_four import ConnectFour
from entmachin.env.examples.count import Count
from entmachin.env.symmetry import Symmetry, check_symmetries


def spaces(env):
    return env.obs_space(), env.action_space()


@pytest.mark.parametrize("choose", ["drop", "column"])
def test_connect_four_offers_its_mirror_and_it_checks(choose):
    env = ConnectFour(choose=choose)
    offered = env.symmetries()
    assert list(offered) == ["mirror"]
    check_symmetries(offered, *spaces(env), "ConnectFour")
    mirror = offered["mirror"]
    assert mirror.features["Column"] == {"col": (-1.0, 6.0)}
    assert mirror.choices == ({} if choose == "column" else {"drop": [6, 5, 4, 3, 2, 1, 0]})


def test_no_symmetries_by_default_and_wrappers_forward_them():
    assert Count().symmetries() == {}
    assert list(TimeLimit(ConnectFour(), 50).symmetries()) == ["mirror"]


@pytest.mark.parametrize("sym, message", [
    (Symmetry({"Piece": {"col": (-1, 6)}}), r"'mirror' maps entity type 'Piece', which the environment does not have"),
    (Symmetry({"Mine": {"x": (-1, 6)}}), r"maps Mine.x, which is not a feature of Mine \(\['row', 'col'\]\)"),
    (Symmetry({"Mine": {"col": (-1,)}}), r"maps Mine.col by \(-1,\); expected \(scale, offset\)"),
    (Symmetry({"Mine": {"col": (float("nan"), 0)}}), r"two finite numbers"),
    (Symmetry({}, {"drop": [0, 1, 2, 3, 4, 5, 5]}), r"choices for 'drop' are \[0, 1, 2, 3, 4, 5, 5\]; expected a "
                                                    r"permutation of 0..6"),
    (Symmetry({}, {"jump": [0]}), r"permutes the choices of 'jump', which is not a categorical action"),
])
def test_bad_symmetries_are_named(sym, message):
    with pytest.raises(ValueError, match=message):
        check_symmetries({"mirror": sym}, *spaces(ConnectFour()), "ConnectFour")


def test_select_entity_actions_have_no_choices_to_permute():
    with pytest.raises(ValueError, match="'drop', which is not a categorical action"):
        check_symmetries({"m": Symmetry({}, {"drop": list(range(7))})}, *spaces(ConnectFour(choose="column")), "C")


def test_a_symmetry_must_be_a_symmetry():
    with pytest.raises(TypeError, match="symmetry 'm' is a dict; expected a Symmetry"):
        check_symmetries({"m": {}}, *spaces(ConnectFour()), "C")
