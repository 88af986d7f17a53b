"""``Checkpoints``: the run checkpointed every ``log.checkpoint_interval`` steps and at the end.

A checkpoint is one atomically published version of ``checkpoints/``: the frame (networks, optimisers,
statistics), the runner's counters, the environments' state (signed) and the self-play pool; under
``torchrun`` every rank's environments and generators, in rank 0's checkpoint. Only the latest
``log.keep_checkpoints`` are kept. Every callback hears of each (``on_checkpoint``).
"""
from __future__ import annotations

from typing import Any, Dict

from entmachin.frame.checkpoint import save_frame
from entmachin.frame.checkpoint_files import manifest_versions, remove_version
from entmachin.run import env_state, logs
from entmachin.run.callbacks.base import Callback
from entmachin.run.distributed import rank_state, ranks_to_bytes

__all__ = ["Checkpoints"]


class Checkpoints(Callback):
    """Checkpoints when ``run.state.next_checkpoint`` is due (the run's last step excepted: :meth:`save` ends
    the run after its final evaluation)."""

    def __init__(self) -> None:
        self.published = False  # a checkpoint of this run exists: a failure from here on keeps the directory

    def after_update(self, run: Any, stats: Any) -> None:
        state = run.state
        if state.env_steps >= state.next_checkpoint:
            if state.env_steps < run.config.train.total_steps:  # the last is taken after the final evaluation
                self.save(run)
            state.next_checkpoint = logs.next_due(state.next_checkpoint, state.env_steps,
                                                  run.config.log.checkpoint_interval)

    def save(self, run: Any) -> None:
        extras: Dict[str, bytes] = {"runner": run.state.to_bytes()}
        envs = env_state.write(run.envs, run.collector)  # signed: resume unpickles only the user's own
        if run.dist is not None:  # every rank's environments and generators, in rank 0's checkpoint
            extras["ranks"] = ranks_to_bytes(run.dist.gather_bytes(rank_state(run.frame, envs)))
        if envs is not None:
            extras["envs"] = envs
        if run.selfplay is not None:
            extras["selfplay"] = run.selfplay.to_bytes()
        if run.lead:
            save_frame(run.frame, run.checkpoint_dir, None, run.state.env_steps, extras=extras)
            self.published = True
            keep = run.config.log.keep_checkpoints
            for version in manifest_versions(run.checkpoint_dir)[:-keep] if keep is not None else ():
                remove_version(run.checkpoint_dir, version)
        run.callbacks.emit("on_checkpoint", run, run.state.env_steps)
