"""Conveyor: each item shows its kind on arrival only, and items are sorted later in a random order; at a
sorting step nothing tells the items apart but their ids (the feed-forward bound)."""
import numpy as np
import pytest

from entmachin.env import CategoricalAction
from entmachin.env.examples.conveyor import Conveyor


def _sort(item, choice):
    return {"sort": CategoricalAction([item], np.array([choice], dtype=np.int64), ["keep", "discard"])}


def _episode(env, policy):
    """One episode; ``policy(seen, item)`` chooses for the sorted item. The observations."""
    seen = [env.reset()]
    while not seen[-1].done:
        actors = list(seen[-1].actions["sort"].actor_ids)
        seen.append(env.act(_sort(actors[0], policy(seen, actors[0])) if actors else {}))
    return seen


def _remembered(seen, item):
    """The kind the item showed on its arrival (what a state per entity id keeps)."""
    for obs in seen:
        k = list(obs.ids["Item"]).index(item) if item in obs.ids["Item"] else None
        if k is not None and obs.features["Item"][k, 2] == 1.0:
            return int(np.argmax(obs.features["Item"][k, :2]))
    raise AssertionError(f"item {item} never arrived")


def test_items_arrive_show_their_kind_once_and_leave_when_sorted():
    env = Conveyor(n_items=3)
    env.seed(0)
    seen = _episode(env, _remembered)
    assert len(seen) == 7 and seen[-1].done and sum(o.reward for o in seen) == pytest.approx(1.0)

    assert [len(o.ids["Item"]) for o in seen] == [1, 2, 3, 3, 2, 1, 0]
    assert [o.features["Item"][:, 2].sum() for o in seen] == [1, 1, 1, 0, 0, 0, 0]  # one new item a step, then none
    assert [len(o.actions["sort"].actor_ids) for o in seen] == [0, 0, 0, 1, 1, 1, 0]
    for obs in seen[3:]:
        assert not obs.features["Item"].any()  # nothing shows a kind while sorting


def test_a_sorting_step_looks_the_same_whatever_the_kinds_so_a_feed_forward_policy_scores_one_half():
    """Every item at a sorting step has the features [0, 0, 0]; a policy of the observation alone (here: always
    keep) scores 0.5 in expectation, one that remembers each item's kind by its id scores 1."""
    env = Conveyor()
    env.seed(1)
    constant, remembering = [], []
    for _ in range(300):
        seen = _episode(env, lambda seen, item: 0)
        assert all(not o.features["Item"].any() for o in seen[4:])
        constant.append(sum(o.reward for o in seen))
        remembering.append(sum(o.reward for o in _episode(env, _remembered)))
    assert abs(np.mean(constant) - 0.5) < 0.05
    assert np.mean(remembering) == pytest.approx(1.0)


def test_bad_actions_and_arguments_are_named():
    with pytest.raises(ValueError, match="`n_items` must be >= 1"):
        Conveyor(n_items=0)
    env = Conveyor(n_items=1)
    env.reset()
    with pytest.raises(ValueError, match="no item is sorted at step 0"):
        env.act(_sort(1, 0))
    env.act({})
    with pytest.raises(ValueError, match="outside"):
        env.act(_sort(1, 5))
