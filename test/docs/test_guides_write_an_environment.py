"""docs/guides/write-an-environment.md: what its story says it did."""
import pytest

from entmachin.env import EnvList
from entmachin.env.symmetry import check_symmetries
from entmachin.ragged import ragged_equal
from test.docs._pages import DOCS, blocks, episodes_ended_under_validation

PAGE = "guides/write-an-environment.md"


def test_the_example_environment_ends_episodes_under_validation(page):
    assert episodes_ended_under_validation(page(PAGE)["Collect"]) > 0


def test_the_page_shows_the_message_validating_env_raised(page):
    shown = blocks(DOCS / PAGE, "text")[0].strip()
    assert page(PAGE)["message"] == shown


def test_the_mirror_symmetry_fits_the_game_and_is_connect_fours_own(page):
    ns = page(PAGE)
    game = ns["Mirrored"]()
    check_symmetries(game.symmetries(), game.obs_space(), game.action_space(), "Mirrored")
    assert game.symmetries() == ns["ConnectFour"]().symmetries()


def test_gymnasium_vec_env_returns_what_env_list_over_from_gymnasium_returns(page):
    gymnasium = pytest.importorskip("gymnasium")
    ns = page(PAGE)
    fast = ns["GymnasiumVecEnv"](lambda: gymnasium.make("CartPole-v1"), 8, seed=0).reset()
    slow = EnvList(lambda: ns["from_gymnasium"](gymnasium.make("CartPole-v1")), 8, seed=0).reset()
    assert fast.features.keys() == slow.features.keys()
    assert all(ragged_equal(fast.features[k], slow.features[k]) for k in fast.features)
    assert ns["cartpole_obs"].reward.shape == (8,)
