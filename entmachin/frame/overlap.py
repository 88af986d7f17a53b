"""Overlapped sampling: a ``RolloutCollector``'s steps taken in two halves of whole worker processes, the
policy's forward on one half while the workers step the other (``RolloutCollector``'s docstring says what
stays the same and what differs from the sequential loop)."""
from __future__ import annotations

import logging
from typing import Any, List, Tuple

import numpy as np

from entmachin.ragged import trees
from entmachin.ragged.tensor import tree_to_torch

__all__ = ["overlapped_steps"]

logger = logging.getLogger("entmachin.frame.collector")  # the collector's warnings, under its name


def overlapped_steps(collector: Any, seen: List[Tuple[Any, ...]]) -> None:
    """``n_steps`` steps of a ``RolloutCollector``'s halves A and B, double-buffered; appends each
    whole step to ``seen`` as the sequential loop does."""
    halves, n_steps = collector._halves, collector.n_steps
    state = collector._state  # the state of every row at this step
    states = [trees.row_range(state, start, stop) for start, stop in halves]  # each half's, views
    actions: List[Any] = [None, None]  # each half's stored action of this step
    in_flight: List[Tuple[int, int]] = []
    sent: List[bool] = []

    def act_and_send(h: int) -> None:
        actions[h], env_actions = collector.action_fn(collector.frame.act(states[h]))
        collector.envs.act_async(env_actions, halves[h])
        in_flight.append(halves[h])
        sent.append(True)

    completed = False
    try:
        act_and_send(0)
        act_and_send(1)  # the policy on B while the workers step A
        for t in range(n_steps):
            got = []  # per half: (stored action, observation, next state, state after the step)
            for h, rows in enumerate(halves):
                obs = collector.envs.receive(rows)
                in_flight.remove(rows)
                after = tree_to_torch(collector.state_fn(obs))
                got.append((actions[h], obs, collector._next_state(obs, after), after))
                states[h] = after
                if t + 1 < n_steps:
                    act_and_send(h)  # the policy on this half while the workers step the other
            # Both halves in flight again (but at the last step): join this step's rows meanwhile.
            (action_a, obs_a, next_a, after_a), (action_b, obs_b, next_b, after_b) = got
            after = trees.stack([after_a, after_b], lambda i: f"half {i}'s state")
            next_state = after if next_a is after_a and next_b is after_b else \
                trees.stack([next_a, next_b], lambda i: f"half {i}'s next state")
            seen.append((state, trees.stack([action_a, action_b], lambda i: f"half {i}'s action"), next_state,
                         np.concatenate([obs_a.reward, obs_b.reward]), np.concatenate([obs_a.done, obs_b.done]),
                         np.concatenate([np.asarray(obs_a.truncated), np.asarray(obs_b.truncated)])))
            state = after
        collector._state = state
        completed = True
    finally:
        if not completed and sent:  # the environments moved past collector._state, the halves maybe a step apart
            collector._restart = True
            logger.warning("RolloutCollector: an overlapped step failed (rows %s in flight); the next collect() "
                           "resets the environments", in_flight or "none")
            for rows in list(in_flight):  # received, so that no reply is left unread
                try:
                    collector.envs.receive(rows)
                except Exception:  # the list closed itself; its next call says why
                    break
