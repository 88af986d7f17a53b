"""``entmachin.run.train``: a run of ``entmachin train`` from Python, with the user's callbacks.

Example::

    from entmachin.run import Callback, train

    class LongestRunning(Callback):
        def after_update(self, run, stats):
            run.writer.add_scalar("custom/longest_running", stats.longest_running, run.state.env_steps)

    frame = train("MineSweeper", callbacks=[LongestRunning()], overrides=["train.total_steps=20000"])
    frame.actor  # the trained policy
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

from entmachin.run.commands import resolve_train_config, resumed_config
from entmachin.run.config import RunConfig, apply_overrides, config_from_dict, config_to_dict
from entmachin.run.logs import RunError
from entmachin.run.paths import default_run_dir

__all__ = ["train"]


def train(config: Union[RunConfig, Mapping[str, Any], str, None] = None, callbacks: Sequence[Any] = (), *,
          overrides: Sequence[str] = (), frame: str = "PPO", run_dir: Optional[str] = None,
          resume: Optional[str] = None, force: bool = False, progress: bool = True,
          trust_checkpoint: bool = False) -> Any:
    """Trains as ``entmachin train`` does and returns the trained frame (``frame.actor``, ``frame.act``).

    Args:
        config: a ``RunConfig``, plain config data (a mapping, as YAML loads), a YAML file, or an environment's
            name (its bundled config, else entmachin's defaults); None: MineSweeper's bundled config.
        callbacks: callback objects (:mod:`entmachin.run.callbacks`), called after ``train.callbacks``'.
        overrides: ``KEY=VALUE`` settings applied to the config (``--set``).
        frame: with an environment's name, the frame whose bundled config or defaults to use.
        run_dir: where the run lives (default: ``log.run_dir``, else ``runs/<env>-<time>``).
        resume: a run directory to continue from its latest checkpoint (give no ``config`` then).
        force: start anew in a directory that holds a run.
        progress: show the progress bar.
        trust_checkpoint: with ``resume``, unpickle environment state this user's key did not sign.

    The run ends at ``train.total_steps``, at a callback's ``run.stop(reason)`` (as a finished run:
    final evaluation and checkpoint) or at SIGINT / SIGTERM (with a checkpoint); either way the frame
    is returned, and the run directory holds what ``entmachin eval``, ``play`` and ``export`` read.

    Raises:
        ConfigError: the config or an override is wrong (named by its dotted path).
        RunError: the run cannot start as asked, or a callback failed (a ``CallbackError`` naming it).
    """
    from entmachin.run.runner import Runner

    if resume is not None:
        if config is not None:
            raise RunError("give a config or resume=RUN_DIR, not both (a resumed run keeps its config)")
        runner = Runner(resumed_config(resume, overrides), resume, resume=True, progress=progress,
                        trust_checkpoint=trust_checkpoint, callbacks=callbacks)
    else:
        if trust_checkpoint:
            raise RunError("trust_checkpoint goes with resume=RUN_DIR: it says whose environment state a resumed "
                           "run may unpickle")
        if isinstance(config, RunConfig):
            config = config_to_dict(config)
        if config is None or isinstance(config, str):
            run_config = resolve_train_config(config, overrides, frame)
        elif isinstance(config, Mapping):
            run_config = config_from_dict(apply_overrides(config, overrides))
        else:
            raise TypeError(f"config: expected a RunConfig, a mapping, a YAML file or an environment's name, got "
                            f"{type(config).__name__}")
        where = run_dir or run_config.log.run_dir or default_run_dir(run_config.env.name)
        runner = Runner(run_config, where, force=force, progress=progress, callbacks=callbacks)
    runner.train()
    return runner.frame
