"""The run config's rules for a network with memory (``model.memory``): what it trains with, and what
does not carry a recurrent state yet (refused by name rather than run without its memory). Behaviour
cloning's sequences are cut from recorded episodes, not rollouts: its data's rules are checked where
``bc.data`` is read (``run/cloning.py``)."""
from __future__ import annotations

from typing import Optional

from entmachin.run.sections import ConfigError, RunConfig

__all__ = ["check_memory"]


def check_memory(config: RunConfig) -> None:
    """Raises ``ConfigError`` naming the setting that does not go with ``model.memory`` (or
    ``frame.sequence_length`` without it)."""
    memory, frame = config.model.memory, config.frame
    length = getattr(frame.settings, "sequence_length", None)
    burn_in = getattr(frame.settings, "burn_in", 0)
    if memory is None:
        for name, value in (("sequence_length", length), ("burn_in", burn_in or None)):
            if value is not None:
                raise ConfigError(f"frame.{name}: {value}, but model.memory is null; it is for a network with memory "
                                  f"(set model.memory, or remove frame.{name})")
        return
    if frame.name not in ("PPO", "A2C", "BC"):
        raise ConfigError(f"model.memory: {frame.name} takes single transitions from its replay; a network with memory "
                          "trains with frame.name PPO, A2C or BC (or remove model.memory)")
    if config.model.kind != "rogue_net":
        raise ConfigError("model.memory: a setting of kind: rogue_net")
    if config.model.critic != "shared":
        raise ConfigError("model.critic: separate, but a network with memory values its rows with the states it "
                          "acted with: set model.critic: shared")
    if frame.name == "BC":  # sequences of recorded episodes: bc.data's episodes (and ids) are checked when read
        return
    if length is not None and config.rollout.n_steps % length:
        raise ConfigError(f"frame.sequence_length: {length} does not divide rollout.n_steps ({config.rollout.n_steps})"
                          "; a rollout is cut into whole sequences")
    if burn_in and (length is None or burn_in > config.rollout.n_steps - length):
        raise ConfigError(f"frame.burn_in: {burn_in} steps before a sequence, but " + (
            "frame.sequence_length is null: each rollout is one sequence, with no steps before it" if length is None
            else f"a rollout of {config.rollout.n_steps} steps in sequences of {length} has at most "
                 f"{config.rollout.n_steps - length} before its last sequence"))
    unsupported = _unsupported(config)
    if unsupported is not None:
        raise ConfigError(f"{unsupported}, which does not carry a recurrent state yet; remove it or model.memory")
    if memory.per_entity:
        _check_per_entity(config)


def _check_per_entity(config: RunConfig) -> None:
    """What per-entity memory does not go with yet: the entities' ids cross no worker processes."""
    rollout = config.rollout
    if rollout.workers is not None or (rollout.processes != "auto" and rollout.processes > 0):
        what = f"rollout.workers: {rollout.workers}" if rollout.workers is not None else \
            f"rollout.processes: {rollout.processes}"
        raise ConfigError(f"{what}, but model.memory.per_entity keeps its states by the entities' ids, which only "
                          "environments stepped in this process pass yet: set rollout.processes: 0 (or auto)")


def _unsupported(config: RunConfig) -> Optional[str]:
    if config.rollout.symmetries:
        return "rollout.symmetries stores images of the rows"
    return None
