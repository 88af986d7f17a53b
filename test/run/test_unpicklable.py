"""Environments that cannot be pickled: checkpoints go on without them and a resumed run restarts their episodes."""
import logging

from entmachin.env.examples import Count
from entmachin.run.config import config_from_dict
from entmachin.run.runner import Runner


class TickingCount(Count):
    """Count holding a generator, which not even dill can pickle."""

    def __init__(self):
        super().__init__()
        self.ticks = (i for i in range(10))


def config(total_steps):
    return config_from_dict({
        "env": {"name": "test.run.test_unpicklable:TickingCount"},
        "rollout": {"num_envs": 4, "n_steps": 4}, "frame": {"batch_size": 16},
        "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": total_steps},
        "log": {"checkpoint_interval": 16, "eval_interval": 1000, "eval_episodes": 2},
    })


def test_unpicklable_environments_restart_their_episodes_on_resume(tmp_path, caplog):
    run_dir = str(tmp_path / "run")
    with caplog.at_level(logging.WARNING):
        Runner(config(32), run_dir, progress=False).train()
    assert "checkpoint: the environments cannot be pickled" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        result = Runner(config(48), run_dir, resume=True, progress=False).train()
    assert "the checkpoint holds no environment state" in caplog.text and "restart their episodes" in caplog.text
    assert result.env_steps == 48
