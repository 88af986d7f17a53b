"""RockPaperScissorsDuel: two seats throw rock, paper or scissors at the same time.

Game: one step long. Seats ``"0"`` and ``"1"`` each throw once, simultaneously, and the game
ends (``truncated=False``). Rock beats scissors, paper beats rock, scissors beat paper.

Observed: each seat sees one featureless ``Player`` entity (id ``PLAYER_ID``), itself.

Actions (categorical, taken by the ``Player``): ``throw`` with choices ``rock``, ``paper``,
``scissors``. Once the game is over no one acts.

Reward: +1 for a win, -1 for a loss, 0 for a draw, stated as each seat's ``result``. The only
equilibrium is throwing uniformly at random, which ``scripted_opponent`` does.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Observation, ObsSpace
from entmachin.env.examples._checks import check_choice, expect_action_type, expect_one_choice, seat_action
from entmachin.env.examples.rock_paper_scissors import BEATS, THROWS
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, SeatActions, check_by_seat

SEATS = ["0", "1"]
THROW = "throw"
PLAYER_ID = 0


class RockPaperScissorsDuel(MultiAgentEnvironment):
    """One simultaneous throw of rock-paper-scissors between two seats.

    Shape:
        ``Player`` ``[1, 0]``; ``throw`` mask: one actor (none once the game is over).
    """

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.reset()

    def seats(self) -> List[Seat]:
        return list(SEATS)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity([])})

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {THROW: CategoricalActionSpace(list(THROWS))}

    def reset(self) -> Dict[Seat, Observation]:
        self.over = False
        return {seat: self._observe(0.0, None) for seat in SEATS}

    def act(self, actions: Mapping[Seat, SeatActions]) -> Dict[Seat, Observation]:
        if self.over:
            raise ValueError("RockPaperScissorsDuel.act: the game is over; call reset()")
        check_by_seat("RockPaperScissorsDuel.act", actions, SEATS, "actions")
        throws = []
        for seat in SEATS:
            key = seat_action(seat, THROW)
            throw = expect_action_type("RockPaperScissorsDuel", key, actions[seat].get(THROW), CategoricalAction)
            expect_one_choice("RockPaperScissorsDuel", key, throw, PLAYER_ID)
            throws.append(check_choice("RockPaperScissorsDuel", key, throw.indices[0], len(THROWS)))
        self.over = True
        a, b = throws
        if a == b:
            return {seat: self._observe(0.0, "draw") for seat in SEATS}
        first = BEATS[a] == b
        return {SEATS[0]: self._observe(1.0 if first else -1.0, "win" if first else "loss"),
                SEATS[1]: self._observe(-1.0 if first else 1.0, "loss" if first else "win")}

    def _observe(self, reward: float, result: Optional[str]) -> Observation:
        return Observation(
            features={"Player": np.zeros((1, 0), dtype=np.float32)},  # [1, 0]
            ids={"Player": [PLAYER_ID]},
            actions={THROW: CategoricalActionMask(actor_ids=[] if self.over else [PLAYER_ID])},
            reward=reward,
            done=self.over,
            result=result,
        )


def uniform_throw(
    observation: Observation, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, Action]:
    """Throw rock, paper or scissors uniformly at random (``{}`` once the game is over).

    Args:
        observation: the seat's observation; its ``throw`` mask names the actor (none once the game is over).
        action_space: the game's action space, whose labels the action carries.
        rng: draws the throw.
    """
    actors = list(observation.actions[THROW].actor_ids)
    if not actors:
        return {}
    return {THROW: CategoricalAction(actors, rng.integers(len(THROWS), size=1), list(action_space[THROW].index_to_label))}


RockPaperScissorsDuel.scripted_opponent = staticmethod(uniform_throw)
