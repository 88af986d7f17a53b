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
    burn_in = getattr(frame.settings, "burn_in", 0)
    if memory is None:
        for name, value in (("sequence_length", length), ("burn_in", burn_in or None)):
            if value is not None:
                raise ConfigError(f"frame.{name}: {value}, but model.memory is null; it is for a network with memory "
                                  f"(set model.memory, or remove frame.{name})")
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
    if burn_in and (length is None or burn_in > config.rollout.n_steps - length):
        raise ConfigError(f"frame.burn_in: {burn_in} steps before a sequence, but " + (
            "frame.sequence_length is null: each rollout is one sequence, with no steps before it" if length is None
            else f"a rollout of {config.rollout.n_steps} steps in sequences of {length} has at most "
                 f"{config.rollout.n_steps - length} before its last sequence"))
    unsupported = _unsupported(config)
    if unsupported is not None:
        raise ConfigError(f"{unsupported}, which does not carry a recurrent state yet; remove it or model.memory")


def _unsupported(config: RunConfig) -> Optional[str]:
    if config.rollout.symmetries:
        return "rollout.symmetries stores images of the rows"
    return None
