"""The environment's seed decides its episodes (same-seed replay is in test_all_examples)."""
import pytest

from entmachin.env.examples import ENV_REGISTRY, SINGLE_AGENT

from ._rollouts import random_rollout, trace

# Nothing in these environments is random: only the actions make episodes differ.
DETERMINISTIC = {"MultiArmedBandit"}


@pytest.mark.parametrize("name", sorted(set(SINGLE_AGENT) - DETERMINISTIC))  # games: test_all_examples
def test_different_seeds_give_different_episodes(name):
    cls = ENV_REGISTRY[name]
    assert trace(random_rollout(cls, 30, seed=1)) != trace(random_rollout(cls, 30, seed=2))


@pytest.mark.parametrize("name", sorted(DETERMINISTIC))
def test_deterministic_environments_ignore_the_seed(name):
    cls = ENV_REGISTRY[name]
    assert trace(random_rollout(cls, 70, seed=1)) == trace(random_rollout(cls, 70, seed=2))
