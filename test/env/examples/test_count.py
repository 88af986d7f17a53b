import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.env import CategoricalAction
from entmachin.env.examples.count import COUNT, PLAYER_ID, Count

LABELS = [str(i) for i in range(10)]


def _answer(n):
    return {COUNT: CategoricalAction([PLAYER_ID], np.array([n], dtype=np.int64), LABELS)}


def _seeded(masked_choices=10, seed=0):
    env = Count(masked_choices)
    env.seed(seed)
    return env, env.reset()


def test_spaces():
    env = Count()
    assert list(env.obs_space().entities) == ["Player", "Bean"]
    assert all(e.features == [] for e in env.obs_space().entities.values())
    assert env.action_space()[COUNT].index_to_label == LABELS


def test_beans_are_the_count():
    env, obs = _seeded(seed=3)
    assert obs.features["Bean"].shape == (env.count, 0)
    assert obs.features["Player"].shape == (1, 0)
    assert obs.ids["Bean"] == [f"Bean{i}" for i in range(1, env.count + 1)]
    assert list(obs.actions[COUNT].actor_ids) == [PLAYER_ID]
    assert obs.actions[COUNT].mask.shape == (1, 10)


def test_right_answer_wins_and_ends_the_game():
    env, obs = _seeded(seed=4)
    obs = env.act(_answer(obs.features["Bean"].shape[0]))
    assert obs.reward == 1.0 and obs.done and not obs.truncated


def test_wrong_answer_earns_nothing():
    env, obs = _seeded(seed=4)
    obs = env.act(_answer((obs.features["Bean"].shape[0] + 1) % 10))
    assert obs.reward == 0.0 and obs.done and not obs.truncated


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), masked_choices=st.integers(1, 10))
def test_mask_always_allows_the_answer_and_nothing_beyond_masked_choices(seed, masked_choices):
    env, obs = _seeded(masked_choices, seed)
    count = obs.features["Bean"].shape[0]
    mask = obs.actions[COUNT].mask[0]
    assert 0 <= count < masked_choices
    assert mask[count]
    assert not mask[masked_choices:].any()


def test_mask_sometimes_allows_wrong_answers():
    env = Count()
    env.seed(0)
    allowed = [env.reset().actions[COUNT].mask.sum() for _ in range(200)]
    assert min(allowed) == 1 and max(allowed) == 10


def test_one_masked_choice_means_no_beans_and_one_allowed_answer():
    _, obs = _seeded(masked_choices=1)
    assert obs.features["Bean"].shape == (0, 0)
    assert obs.actions[COUNT].mask.tolist() == [[True] + [False] * 9]


def test_bad_actions_raise():
    env, _ = _seeded()
    with pytest.raises(ValueError, match=r"expects one choice by actor 'Player', got actors \[\] and 0 choices"):
        env.act({COUNT: CategoricalAction([], np.zeros(0, dtype=np.int64), LABELS)})
    with pytest.raises(ValueError, match="expected exactly the action 'count', got \\['guess'\\]"):
        env.act({"guess": _answer(0)[COUNT]})


@pytest.mark.parametrize(
    "value, error, match",
    [
        (0, ValueError, "`masked_choices` must be between 1 and 10, got 0"),
        (11, ValueError, "`masked_choices` must be between 1 and 10, got 11"),
        ("3", TypeError, "`masked_choices` must be an int, got str"),
    ],
)
def test_constructor_validation(value, error, match):
    with pytest.raises(error, match=match):
        Count(value)
