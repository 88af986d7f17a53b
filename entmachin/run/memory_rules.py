"""The run config's rules for a network with memory (``model.memory``): what it trains with, and what
does not carry a recurrent state yet (refused by name rather than run without its memory)."""
from __future__ import annotations

from typing import Optional

from entmachin.run.sections import ConfigError, RunConfig

__all__ = ["check_memory"]


def check_memory(config: RunConfig) -> None:
    """Raises ``ConfigError`` naming the setting that does not go with ``model.memory`` (or
    ``frame.sequence_length`` without it)."""
    memory, frame = config.model.memory, config.frame
    length = getattr(frame.settings, "sequence_length", None)
    if memory is None:
        if length is not None:
            raise ConfigError(f"frame.sequence_length: {length}, but model.memory is null; sequences are for a "
                              "network with memory (set model.memory, or remove frame.sequence_length)")
        return
    if frame.name not in ("PPO", "A2C"):
        what = ("takes single transitions from its replay" if frame.name != "BC" else
                "fits recorded rows, not sequences, yet")
        raise ConfigError(f"model.memory: {frame.name} {what}; a network with memory trains with frame.name PPO or "
                          "A2C (or remove model.memory)")
    if config.model.kind != "rogue_net":
        raise ConfigError("model.memory: a setting of kind: rogue_net")
    if config.model.critic != "shared":
        raise ConfigError("model.critic: separate, but a network with memory values its rows with the states it "
                          "acted with: set model.critic: shared")
    if length is not None and config.rollout.n_steps % length:
        raise ConfigError(f"frame.sequence_length: {length} does not divide rollout.n_steps ({config.rollout.n_steps})"
                          "; a rollout is cut into whole sequences")
    unsupported = _unsupported(config)
    if unsupported is not None:
        raise ConfigError(f"{unsupported}, which does not carry a recurrent state yet; remove it or model.memory")


def _unsupported(config: RunConfig) -> Optional[str]:
    if config.selfplay.enabled:
        return f"selfplay.seats: {config.selfplay.seats} plays snapshots of the policy"
    if config.rollout.symmetries:
        return "rollout.symmetries stores images of the rows"
    if config.log.eval_opponents:
        return f"log.eval_opponents: {list(config.log.eval_opponents)} plays matches"
    return None
