"""Evaluating a frame's policy: episodic returns over fresh, seeded environments."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Dict, Optional

from entmachin.env import Environment, to_state
from entmachin.env.episodes import EvalResult, run_episodes
from entmachin.frame.collector import ActionFn, StateFn, default_actions
from entmachin.frame.entity_memory import entity_rows
from entmachin.frame.memory import memory_rows

__all__ = ["EvalResult", "evaluate"]


def evaluate(frame: Any, make_env: Callable[[], Environment], episodes: int, deterministic: bool = True,
             seed: Optional[int] = None, *, num_envs: int = 16, max_steps: int = 10_000,
             state_fn: Optional[StateFn] = None, action_fn: Optional[ActionFn] = None,
             check_finite: bool = True) -> EvalResult:
    """Runs ``episodes`` episodes with ``frame.act`` and returns their returns (``env.episodes.run_episodes``).

    The policy does not update its input statistics, and nothing is stored in the frame's buffer.

    Args:
        frame: an ``A2C`` / ``PPO`` / ``DQN`` frame.
        make_env: builds one environment (as ``EnvList`` takes).
        episodes: episodes to run, >= 1.
        deterministic: take each actor's most likely action (the actor must accept a ``deterministic``
            keyword); False samples.
        seed: seeds the environments (None: unseeded).
        num_envs: most environments stepped together.
        max_steps: vectorised steps after which unfinished episodes are counted with the return they have so
            far (a warning is logged).
        check_finite: stop with an error naming the feature when an observation or reward is NaN or infinite
            (as for ``EnvList``).
        state_fn: ``VecObs`` -> state dict, as for ``RolloutCollector`` (default: the canonical state, which
            suits RogueNet).
        action_fn: ``frame.act``'s result -> (stored action dict, ``VecEnv.act`` actions), as for
            ``RolloutCollector`` (default: RogueNet's actions).

    Raises:
        ValueError: ``episodes``, ``num_envs`` or ``max_steps`` is not a positive int.
    """
    action_fn = action_fn or default_actions
    carry: Dict[str, Any] = {}  # a network with memory: the rows' state ("rows") and the last result

    def act(obs: Any, space: Any) -> Any:
        state = state_fn(obs) if state_fn is not None else to_state(obs, space)
        if "rows" not in carry:
            carry["rows"], carry["entities"] = memory_rows(frame, len(obs)), entity_rows(frame, len(obs))
        rows, entities = carry["rows"], carry["entities"]
        if rows is None:
            return action_fn(frame.act(state, deterministic, collect_stats=False))[1]
        if "last" in carry:  # a row whose episode ended begins the next one
            rows.advance(carry["last"], obs.done)
            if entities is not None:
                entities.advance(carry["last"], obs)
        state = rows.state(state)
        if entities is not None:
            state = {**state, **entities.entries(obs)}
        carry["last"] = frame.act(state, deterministic, collect_stats=False)
        return action_fn(carry["last"])[1]

    return run_episodes(act, make_env, episodes, seed, num_envs=num_envs, max_steps=max_steps,
                        check_finite=check_finite)
