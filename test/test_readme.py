"""The README's Python examples run as written (in order, sharing one namespace)."""
import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python examples"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    from entmachin.env import EnvList, ValidatingEnv, random_actions

    envs = EnvList(lambda: ValidatingEnv(namespace["Collect"]()), 4, seed=0)
    obs, rng, ended = envs.reset(), np.random.default_rng(0), 0
    for _ in range(120):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        ended += int(obs.done.sum())
    assert ended > 0


def test_readme_creates_parallel_env_lists_under_the_main_guard():
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S) if "ParallelEnvList(" in b]
    assert blocks, "README shows no ParallelEnvList"
    for block in blocks:
        assert 'if __name__ == "__main__":' in block, block
