"""MineSweeper: robots on a grid defuse mines, helped by an optional orbital cannon.

Game: ``nmines`` mines and ``nrobots`` robots start on distinct cells of a ``width x height``
grid. On every step each robot either moves one cell (up, down, left, right) or stays put and
defuses every mine at Manhattan distance at most 1. A robot that ends the step on a mine is
destroyed. With ``orbital_cannon=True`` an orbital cannon can, whenever its cooldown has run
down to zero, destroy one mine or one robot of its choice; firing restarts the cooldown.

Observed: ``Mine`` (x, y), ``Robot`` (x, y) and ``Orbital Cannon`` (cooldown, the number of
steps until it can fire; the type has no entities when the cannon is disabled).

Actions:
    ``Move``: categorical, taken by every robot, choices ``Up`` (y + 1), ``Down`` (y - 1),
    ``Left`` (x - 1), ``Right`` (x + 1), ``Defuse Mines``; moves off the grid are masked.
    ``Fire Orbital Cannon``: select-entity, taken by the cannon when it is ready; it selects
    any mine or robot.

Reward: 1.0 on the step on which the last mine disappears, 0.0 otherwise. The game ends when
no mines or no robots remain; there is no step limit.

Unlike entity-gym 0.1.10's MineSweeper, the move mask follows the labels above (entity-gym's
allows Up/Down/Left/Right by the edge tests of Right/Left/Up/Down) and the cooldown counts down
by one per step (entity-gym's never decreases, so with ``cooldown_period > 0`` its cannon never
fires).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName, EntityID
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import (
    check_bool,
    check_choice,
    check_int,
    expect_action_type,
    expect_choice_per_actor,
    resolve_id,
)

MOVE = "Move"
FIRE = "Fire Orbital Cannon"
MOVE_LABELS = ["Up", "Down", "Left", "Right", "Defuse Mines"]
_STEPS = [(0, 1), (0, -1), (-1, 0), (1, 0)]  # (dx, dy) of the four moving choices
_DEFUSE = 4
CANNON_ID: EntityID = ("Orbital Cannon", 0)

Cell = Tuple[int, int]


class MineSweeper(Environment):
    """Robots defuse mines on a grid; an optional orbital cannon destroys one entity a shot.

    Args:
        width: number of grid columns (x in ``[0, width)``).
        height: number of grid rows (y in ``[0, height)``).
        nmines: number of mines at the start of an episode.
        nrobots: number of robots at the start of an episode.
        orbital_cannon: whether the orbital cannon takes part.
        cooldown_period: steps the cannon waits before its first shot and after every shot.

    Raises:
        TypeError: a size is not an int, or ``orbital_cannon`` is not a bool.
        ValueError: a size is out of range, or the mines and robots don't fit on the grid.

    Shape:
        features: ``Mine`` ``[n_mines, 2]``, ``Robot`` ``[n_robots, 2]``, ``Orbital Cannon``
        ``[1, 1]`` (``[0, 1]`` when disabled); ``Move`` mask ``[n_robots, 5]``. Ids are
        ``("Mine", i)``, ``("Robot", i)`` (positions in this step's lists) and ``CANNON_ID``.
    """

    def __init__(
        self,
        width: int = 6,
        height: int = 6,
        nmines: int = 5,
        nrobots: int = 2,
        orbital_cannon: bool = False,
        cooldown_period: int = 5,
    ) -> None:
        self.width = check_int("MineSweeper", "width", width, 1)
        self.height = check_int("MineSweeper", "height", height, 1)
        self.nmines = check_int("MineSweeper", "nmines", nmines, 1)
        self.nrobots = check_int("MineSweeper", "nrobots", nrobots, 1)
        self.cooldown_period = check_int("MineSweeper", "cooldown_period", cooldown_period, 0)
        self.orbital_cannon = check_bool("MineSweeper", "orbital_cannon", orbital_cannon)
        if nmines + nrobots > width * height:
            raise ValueError(
                f"MineSweeper: `nmines` + `nrobots` = {nmines + nrobots} entities don't fit on a "
                f"{width}x{height} grid of {width * height} cells"
            )
        self.rng = np.random.default_rng()
        self.mines: List[Cell] = []
        self.robots: List[Cell] = []
        self.cooldown = self.cooldown_period

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Mine": Entity(["x", "y"]),
                "Robot": Entity(["x", "y"]),
                "Orbital Cannon": Entity(["cooldown"]),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {
            MOVE: CategoricalActionSpace(list(MOVE_LABELS)),
            FIRE: SelectEntityActionSpace(),
        }

    def reset(self) -> Observation:
        cells = self.rng.choice(self.width * self.height, size=self.nmines + self.nrobots, replace=False)
        positions = [(int(c % self.width), int(c // self.width)) for c in cells]
        self.mines = positions[: self.nmines]
        self.robots = positions[self.nmines :]
        self.cooldown = self.cooldown_period
        return self._observe(reward=0.0)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        # Both actions are checked before either changes the state.
        target = self._parse_fire(actions.get(FIRE))
        moves = self._parse_move(actions.get(MOVE))
        had_mines = bool(self.mines)
        doomed_robot = None
        if target is not None:
            kind, index = target
            if kind == "Mine":
                self.mines.pop(index)
            else:
                # The robot leaves after the moves so that "Move"'s robot ids stay valid.
                doomed_robot = index
        for i, choice in moves:
            x, y = self.robots[i]
            if choice == _DEFUSE:
                self.mines = [(mx, my) for mx, my in self.mines if abs(mx - x) + abs(my - y) > 1]
                continue
            dx, dy = _STEPS[choice]
            # Moves off the grid are masked; a caller that ignores the mask stays put.
            if 0 <= x + dx < self.width and 0 <= y + dy < self.height:
                self.robots[i] = (x + dx, y + dy)
        self.robots = [
            r for i, r in enumerate(self.robots) if i != doomed_robot and r not in self.mines
        ]
        self.cooldown = self.cooldown_period if target is not None else max(self.cooldown - 1, 0)
        won = had_mines and not self.mines
        return self._observe(reward=1.0 if won else 0.0)

    def _parse_fire(self, fire: Optional[Action]) -> Optional[Tuple[str, int]]:
        """The (type, index) of the cannon's target, or ``None`` if it holds fire."""
        if fire is None:
            return None
        fire = expect_action_type("MineSweeper", FIRE, fire, SelectEntityAction)
        expect_choice_per_actor("MineSweeper", FIRE, fire)
        if len(fire.actors) == 0:
            return None
        if list(fire.actors) != [CANNON_ID] or not self._cannon_ready():
            raise ValueError(
                f"MineSweeper.act: actions['{FIRE}'] has actors {list(fire.actors)}; only {CANNON_ID} "
                f"may fire, and only when its cooldown is 0 (it is {self.cooldown}, enabled="
                f"{self.orbital_cannon})"
            )
        sizes = {"Mine": len(self.mines), "Robot": len(self.robots)}
        return resolve_id("MineSweeper", FIRE, fire.actees[0], sizes)

    def _parse_move(self, move: Optional[Action]) -> List[Tuple[int, int]]:
        """(robot index, choice) for every actor of ``Move``."""
        if move is None:
            return []
        move = expect_action_type("MineSweeper", MOVE, move, CategoricalAction)
        expect_choice_per_actor("MineSweeper", MOVE, move)
        moves = []
        for actor, index in zip(move.actors, move.indices):
            choice = check_choice("MineSweeper", MOVE, index, len(MOVE_LABELS))
            _, robot = resolve_id("MineSweeper", MOVE, actor, {"Robot": len(self.robots)})
            moves.append((robot, choice))
        return moves

    def _cannon_ready(self) -> bool:
        return self.orbital_cannon and self.cooldown == 0

    def _valid_moves(self, x: int, y: int) -> List[bool]:
        """Mask row of one robot, in the order of ``MOVE_LABELS``."""
        return [y < self.height - 1, y > 0, x > 0, x < self.width - 1, True]

    def _observe(self, reward: float) -> Observation:
        n_cannons = 1 if self.orbital_cannon else 0
        mine_ids = [("Mine", i) for i in range(len(self.mines))]
        robot_ids = [("Robot", i) for i in range(len(self.robots))]
        return Observation(
            features={
                "Mine": np.array(self.mines, dtype=np.float32).reshape(len(self.mines), 2),  # [n_mines, 2]
                "Robot": np.array(self.robots, dtype=np.float32).reshape(len(self.robots), 2),  # [n_robots, 2]
                "Orbital Cannon": np.full((n_cannons, 1), self.cooldown, dtype=np.float32),  # [0 or 1, 1]
            },
            ids={"Mine": mine_ids, "Robot": robot_ids, "Orbital Cannon": [CANNON_ID] * n_cannons},
            actions={
                MOVE: CategoricalActionMask(
                    actor_ids=robot_ids,
                    mask=np.array(
                        [self._valid_moves(x, y) for x, y in self.robots], dtype=np.bool_
                    ).reshape(len(self.robots), len(MOVE_LABELS)),  # [n_robots, 5]
                ),
                FIRE: SelectEntityActionMask(
                    actor_ids=[CANNON_ID] if self._cannon_ready() else [],
                    actee_ids=mine_ids + robot_ids,
                ),
            },
            reward=reward,
            done=not self.mines or not self.robots,
        )
