"""FlagRun: the game of two players that tutorial 7 writes, checks, trains and plays.

Game: two seats, ``"0"`` and ``"1"``, race for each other's flag on a ``size x size`` grid
(5 x 5 by default). Each seat has ``runners`` runners (2), starting on distinct cells of its home
row, and a flag in the middle of that row; seat ``"0"``'s home row is the bottom one, seat
``"1"``'s the top one, its runners on the mirror images of seat ``"0"``'s cells (a fair start).

The seats take turns, seat ``"0"`` first. On a seat's turn every one of its runners acts once:

* a runner with an enemy runner within reach (on its cell or one of the 4 beside it) **tags**
  one of them, which goes back to its starting cell;
* every other runner **moves** one cell or stays.

Tags are resolved before moves. A runner that ends its seat's turn on the enemy flag wins the
game; after ``time_limit`` turns (both seats' together) without a capture the game is drawn.
The seat not to move has no actors, and once the game is over no one acts.

Observed, from each seat's own side: the grid is turned half a turn for seat ``"1"``
(``x -> size - 1 - x``, ``y -> size - 1 - y``), so that every seat sees its own home row at the
bottom and the enemy flag at the top, and one policy can play either seat.

* ``Runner`` (the seat's own runners) and ``Enemy`` (the other seat's), features ``x``, ``y``;
  ids ``("Runner", k)`` / ``("Enemy", k)``, ``k`` the runner's number in its team.
* ``Flag``, features ``x``, ``y``, ``mine`` (1.0 for the seat's own flag, 0.0 for the target).
* global features ``to_move`` (1.0 on the seat's turn) and ``time_left`` (turns left /
  ``time_limit``).

Actions (both taken only by runners of the seat to move):
    ``move``: categorical, choices ``stay``, ``up`` (y + 1, towards the enemy flag), ``down``,
    ``left``, ``right`` in the seat's own view; moves off the grid are masked.
    ``tag``: select-entity, taken by the runners with an enemy within reach; the actees are the
    enemies, masked per tagger to those within its reach.

Reward: +1 for a win, -1 for a loss, 0 for a draw, on the last step, which states each seat's
``result``; 0 on every other step.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from entmachin.env import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    MultiAgentEnvironment,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    checked_choices,
)
from entmachin.env.multi_agent import check_by_seat

SEATS = ["0", "1"]
MOVE, TAG = "move", "tag"
MOVES = ["stay", "up", "down", "left", "right"]
DELTAS = np.array([(0, 0), (0, 1), (0, -1), (-1, 0), (1, 0)], dtype=np.int64)  # [5, 2]: (dx, dy) in a seat's view
REACH = 1  # Manhattan distance within which a runner tags


class FlagRun(MultiAgentEnvironment):
    """Two teams of runners race for each other's flag, taking turns; runners tag enemies nearby.

    Args:
        size: width and height of the grid (odd, >= 3: the flags stand in the middle column).
        runners: runners per seat (at most ``size - 1``: they start on distinct cells of the
            home row, beside the flag's column).
        time_limit: turns of both seats together after which the game is drawn.

    Raises:
        ValueError: an argument out of range (named).

    Shape:
        ``Runner`` ``[runners, 2]``, ``Enemy`` ``[runners, 2]``, ``Flag`` ``[2, 3]``, global
        ``[2]``; ``move`` mask ``[n_movers, 5]``, ``tag`` mask ``[n_taggers, runners]``.
    """

    max_episode_steps = None  # the game ends by itself (a draw after time_limit turns)

    def __init__(self, size: int = 5, runners: int = 2, time_limit: int = 24) -> None:
        if size < 3 or size % 2 == 0:
            raise ValueError(f"FlagRun: size must be odd and >= 3, got {size}")
        if not 1 <= runners <= size - 1:
            raise ValueError(f"FlagRun: runners must be in [1, {size - 1}] on a {size}x{size} grid, got {runners}")
        if time_limit < 1:
            raise ValueError(f"FlagRun: time_limit must be >= 1, got {time_limit}")
        self.size, self.n, self.time_limit = size, runners, time_limit
        self.flag = np.array([[size // 2, 0], [size // 2, size - 1]], dtype=np.int64)  # [2, 2]: each seat's flag, true cells
        self.rng = np.random.default_rng()
        self.reset()

    # ------------------------------------------------------------------ the MultiAgentEnvironment API

    def seats(self) -> List[str]:
        return list(SEATS)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            global_features=["to_move", "time_left"],
            entities={"Runner": Entity(["x", "y"]), "Enemy": Entity(["x", "y"]), "Flag": Entity(["x", "y", "mine"])},
        )

    def action_space(self) -> Dict[str, ActionSpace]:
        return {MOVE: CategoricalActionSpace(list(MOVES)), TAG: SelectEntityActionSpace()}

    def reset(self) -> Dict[str, Observation]:
        columns = [x for x in range(self.size) if x != self.size // 2]
        xs = self.rng.choice(columns, size=self.n, replace=False)
        start = np.stack([xs, np.zeros(self.n, dtype=np.int64)], axis=1)  # [n, 2]: seat 0's cells
        self.home = np.stack([start, self.size - 1 - start])  # [2, n, 2]: each runner's starting cell
        self.pos = self.home.copy()  # [2, n, 2]: true cells
        self.turn = 0
        self.result: Optional[List[str]] = None
        return self._observe()

    def act(self, actions: Mapping[str, Mapping[str, Action]]) -> Dict[str, Observation]:
        if self.result is not None:
            raise ValueError("FlagRun.act: the game is over; call reset()")
        check_by_seat("FlagRun.act", actions, SEATS, "actions")
        s = self.turn % 2  # the seat to move
        # checked_choices holds every seat to its last observation's masks (the waiting seat: no
        # actions at all) and returns the choices as positions: move choices, tag actee positions.
        chosen = {seat: checked_choices(self._last[seat], self.obs_space(), self.action_space(), actions[seat],
                                        f"FlagRun.act: seat '{seat}'") for seat in SEATS}[SEATS[s]]
        movers, taggers = self._actors[s]
        for runner, enemy in zip(taggers, chosen[TAG]):  # tags first ...
            self.pos[1 - s, self._enemies[s][enemy]] = self.home[1 - s, self._enemies[s][enemy]]
        sign = 1 - 2 * s  # seat 1's view is turned half a turn
        for runner, move in zip(movers, chosen[MOVE]):  # ... then moves
            self.pos[s, runner] += DELTAS[move] * sign
        self.turn += 1
        if (self.pos[s] == self.flag[1 - s]).all(axis=1).any():
            self.result = ["win", "loss"] if s == 0 else ["loss", "win"]
        elif self.turn >= self.time_limit:
            self.result = ["draw", "draw"]
        return self._observe()

    # ------------------------------------------------------------------ observations

    def _view(self, s: int, cells: np.ndarray) -> np.ndarray:
        """True cells ``[..., 2]`` as seat ``s`` sees them."""
        return cells if s == 0 else self.size - 1 - cells

    def _observe(self) -> Dict[str, Observation]:
        over = self.result is not None
        mover = self.turn % 2
        reward = {"win": 1.0, "draw": 0.0, "loss": -1.0}
        self._actors, self._enemies, self._last = [], [], {}
        for s, seat in enumerate(SEATS):
            mine, theirs = self._view(s, self.pos[s]), self._view(s, self.pos[1 - s])  # [n, 2] each
            reach = np.abs(mine[:, None] - theirs[None]).sum(axis=2) <= REACH  # [n, n]: runner -> enemy
            acting = not over and s == mover
            taggers = np.flatnonzero(reach.any(axis=1)) if acting else np.zeros(0, np.int64)
            movers = np.flatnonzero(~reach.any(axis=1)) if acting else np.zeros(0, np.int64)
            at = mine[movers]  # [n_movers, 2]
            move_mask = ((at[:, None] + DELTAS[None]) >= 0).all(axis=2) & \
                ((at[:, None] + DELTAS[None]) < self.size).all(axis=2)  # [n_movers, 5]
            enemy_ids = [("Enemy", k) for k in range(self.n)]
            self._actors.append((movers, taggers))
            self._enemies.append(list(range(self.n)))  # actee position -> enemy runner
            flags = np.array([[*self._view(s, self.flag[s]), 1.0], [*self._view(s, self.flag[1 - s]), 0.0]],
                             dtype=np.float32)  # [2, 3]
            self._last[seat] = Observation(
                features={"Runner": mine.astype(np.float32), "Enemy": theirs.astype(np.float32), "Flag": flags},
                ids={"Runner": [("Runner", k) for k in range(self.n)], "Enemy": enemy_ids},
                global_features=np.array([float(s == mover and not over),
                                          (self.time_limit - self.turn) / self.time_limit], dtype=np.float32),
                actions={
                    MOVE: CategoricalActionMask(actor_ids=[("Runner", int(k)) for k in movers], mask=move_mask),
                    TAG: SelectEntityActionMask(actor_ids=[("Runner", int(k)) for k in taggers],
                                                actee_ids=enemy_ids, mask=reach[taggers]),
                },
                reward=reward[self.result[s]] if over else 0.0,
                done=over,
                result=self.result[s] if over else None,
            )
        return dict(self._last)


def flag_rush(
    observation: Observation, action_space: Mapping[str, ActionSpace], rng: np.random.Generator
) -> Dict[str, Action]:
    """The scripted opponent: every runner heads straight for the enemy flag, and a runner that
    must tag tags the enemy nearest to its own flag. Reads only ``observation``; ties are broken
    at random."""
    flags = np.asarray(observation.features["Flag"])
    target, home = flags[flags[:, 2] == 0, :2][0], flags[flags[:, 2] == 1, :2][0]
    runners = dict(zip(observation.ids["Runner"], np.asarray(observation.features["Runner"])))
    enemies = dict(zip(observation.ids["Enemy"], np.asarray(observation.features["Enemy"])))
    move = observation.actions[MOVE]
    choices = []
    for actor, allowed in zip(move.actor_ids, np.asarray(move.mask, dtype=np.bool_).reshape(-1, len(MOVES))):
        left = np.abs(runners[actor] + DELTAS - target).sum(axis=1) + rng.random(len(MOVES)) * 0.5  # [5]
        left[~allowed] = np.inf
        choices.append(int(np.argmin(left)))
    tag = observation.actions[TAG]
    picks = []
    for row, actor in enumerate(tag.actor_ids):
        reachable = [eid for eid, ok in zip(tag.actee_ids, np.asarray(tag.mask)[row]) if ok]
        picks.append(min(reachable, key=lambda eid: np.abs(enemies[eid] - home).sum() + rng.random() * 0.5))
    return {
        MOVE: CategoricalAction(list(move.actor_ids), np.array(choices, dtype=np.int64), list(MOVES)),
        TAG: SelectEntityAction(list(tag.actor_ids), picks),
    }


FlagRun.scripted_opponent = staticmethod(flag_rush)
