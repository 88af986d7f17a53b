"""docs/guides/many-environments.md: what its story says it did, and its worker-process scripts run."""
import numpy as np
import pytest

from entmachin.env import EnvList, ParallelEnvList, random_actions
from entmachin.env.examples import FloorIsLava
from entmachin.ragged import ragged_equal
from test.docs._pages import DOCS, blocks

PAGE = "guides/many-environments.md"


def test_the_page_creates_parallel_env_lists_under_the_main_guard():
    shown = [b for b in blocks(DOCS / PAGE) if "ParallelEnvList(" in b]
    assert shown, "the page shows no ParallelEnvList"
    for block in shown:
        assert 'if __name__ == "__main__":' in block, block


def _same(a, b):
    return a.features.keys() == b.features.keys() and all(
        ragged_equal(a.features[k], b.features[k]) for k in a.features)


def test_the_guarded_collect_steps_the_rows_env_list_steps(page):
    ns = page(PAGE)
    rng = ns["rng"]
    try:
        ns["rng"] = np.random.default_rng(0)
        parallel = ns["collect"]()
    finally:
        ns["rng"] = rng
    envs, mine = EnvList(FloorIsLava, num_envs=64, seed=0), np.random.default_rng(0)
    obs = envs.reset()
    for _ in range(100):
        obs = envs.act(random_actions(obs, envs.action_space(), mine))
    assert _same(parallel, obs) and np.array_equal(parallel.reward, obs.reward)


def test_parts_are_whole_workers_and_calls_on_every_row_wait_for_them(page):
    ns = page(PAGE)
    halves = ns["step_in_halves"](steps=2)
    assert [len(h) for h in halves] == [32, 32]
    with ParallelEnvList(FloorIsLava, num_envs=64, num_processes=2, seed=0) as envs:
        assert envs.parts(2) == [(0, 32), (32, 64)]
        obs = envs.reset()
        everything = random_actions(obs, envs.action_space(), np.random.default_rng(0))
        envs.act_async({name: a[0:32] for name, a in everything.items()}, (0, 32))
        with pytest.raises(RuntimeError, match="receive"):
            envs.act(everything)
        assert len(envs.receive((0, 32))) == 32


def test_the_ragged_array_is_what_the_diagram_and_the_text_show(page):
    ns = page(PAGE)
    lava = ns["lava"]
    assert list(ns["counts"]) == [7, 5, 4, 0] and ns["n_features"] == 2  # the diagram's figures
    assert len(ns["chosen"]) == lava.size1(3) + lava.size1(0)
    assert not lava.as_array().flags.writeable and not lava.size1().flags.writeable
    assert all(n > 2 for n in ns["many"].size1())
    with pytest.raises(IndexError) as error:
        lava[64]
    assert f"{type(error.value).__name__}: {error.value}" == blocks(DOCS / PAGE, "text")[1].strip()
