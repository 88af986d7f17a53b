"""MultiSnake: turn-based snake with several snakes, each eating food of its own colour.

Game: ``num_snakes`` snakes (colours ``0 .. num_snakes - 1``) start as single segments on free
cells of a ``board_size`` x ``board_size`` board, with one food item of each colour. Each step
every snake moves one cell, in the order of the action's actors. A snake that moves onto food
of its colour grows by one segment (while shorter than ``max_snake_length``) and the food
reappears on a free cell after all snakes have moved. The game ends (``truncated=False``) when
a snake leaves the board, runs into any snake's segment (its own tail included), eats food of
another colour, or when all snakes of one player reach ``max_snake_length``; otherwise it is
cut off after ``max_steps`` steps (``truncated=True``). Snakes are split evenly between
``num_players`` players, which matters only for that length condition.

Observed: global feature ``step``; ``SnakeHead`` (ids ``0 .. num_snakes - 1``, the snake's
index), ``SnakeBody`` and ``Food`` entities, all with features ``x``, ``y``, ``color``.

Actions (categorical, taken by every ``SnakeHead``): ``move`` with choices ``up`` (y + 1),
``down`` (y - 1), ``left`` (x - 1), ``right`` (x + 1).

Reward: ``1 / (max_snake_length - 1) / num_snakes`` for each snake that grew this step, so
growing every snake to full length earns 1 in total.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, NamedTuple, Tuple

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.examples._checks import check_choice, expect_action_type

MOVES = ["up", "down", "left", "right"]
# Cell offset (dx, dy) of each move, in the order of MOVES.
MOVE_DELTAS = ((0, 1), (0, -1), (-1, 0), (1, 0))
MAX_SNAKES = 9

Cell = Tuple[int, int]


@dataclass
class _Snake:
    color: int
    segments: List[Cell] = field(default_factory=list)  # tail first, head last


class _Food(NamedTuple):
    color: int
    cell: Cell


class MultiSnake(Environment):
    """Several snakes on one board, each growing by eating food of its own colour.

    Args:
        board_size: width and height of the board in cells.
        num_snakes: number of snakes (1 to 9), a multiple of ``num_players``.
        num_players: number of players the snakes are split between.
        max_snake_length: length at which a snake stops growing.
        max_steps: steps after which an episode is cut off.

    Shape:
        ``SnakeHead`` ``[num_snakes, 3]``; ``SnakeBody`` ``[n_body_segments, 3]``; ``Food``
        ``[num_snakes, 3]``; global features ``[1]``.

    Raises:
        ValueError: a parameter is out of range, or the board cannot hold every snake at full
            length plus one food item per snake.
    """

    def __init__(
        self,
        board_size: int = 10,
        num_snakes: int = 2,
        num_players: int = 1,
        max_snake_length: int = 11,
        max_steps: int = 180,
    ) -> None:
        if not 1 <= num_snakes <= MAX_SNAKES:
            raise ValueError(f"MultiSnake: num_snakes must be in [1, {MAX_SNAKES}], got {num_snakes}")
        if num_players < 1 or num_snakes % num_players != 0:
            raise ValueError(
                f"MultiSnake: num_players must be at least 1 and divide num_snakes={num_snakes}, "
                f"got {num_players}"
            )
        if max_snake_length < 2:
            raise ValueError(f"MultiSnake: max_snake_length must be at least 2, got {max_snake_length}")
        if max_steps < 1:
            raise ValueError(f"MultiSnake: max_steps must be at least 1, got {max_steps}")
        cells_needed = num_snakes * (max_snake_length + 1)
        if board_size < 1 or board_size * board_size < cells_needed:
            raise ValueError(
                f"MultiSnake: board_size={board_size} gives {max(board_size, 0) ** 2} cells; "
                f"{num_snakes} snakes of length up to {max_snake_length} and their food need "
                f"{cells_needed}: raise board_size or lower num_snakes / max_snake_length"
            )
        self.board_size = int(board_size)
        self.num_snakes = int(num_snakes)
        self.num_players = int(num_players)
        self.max_snake_length = int(max_snake_length)
        self.max_steps = int(max_steps)
        self.rng = np.random.default_rng()
        self.snakes: List[_Snake] = []
        self.food: List[_Food] = []
        self.step = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            global_features=["step"],
            entities={
                "SnakeHead": Entity(["x", "y", "color"]),
                "SnakeBody": Entity(["x", "y", "color"]),
                "Food": Entity(["x", "y", "color"]),
            },
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return {"move": CategoricalActionSpace(list(MOVES))}

    def reset(self) -> Observation:
        self.snakes = []
        self.food = []
        self.step = 0
        for color in range(self.num_snakes):
            self.snakes.append(_Snake(color, [self._free_cell()]))
        for color in range(self.num_snakes):
            self.food.append(_Food(color, self._free_cell()))
        return self._observe(reward=0.0, done=False, truncated=False)

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        action = expect_action_type("MultiSnake", "move", actions.get("move"), CategoricalAction)
        self.step += 1
        game_over = False
        n_grown = 0
        eaten: List[int] = []  # colours to respawn once every snake has moved
        for snake_id, choice in zip(action.actors, action.indices):
            snake = self._snake(snake_id)
            dx, dy = MOVE_DELTAS[check_choice("MultiSnake", "move", choice, len(MOVES))]
            x, y = snake.segments[-1]
            head = (x + dx, y + dy)
            if not self._on_board(head) or any(head in s.segments for s in self.snakes):
                game_over = True
            snake.segments.append(head)
            grew = False
            for i, food in enumerate(self.food):
                if food.cell != head:
                    continue
                if food.color != snake.color:
                    game_over = True
                elif len(snake.segments) <= self.max_snake_length:
                    grew = True
                    n_grown += 1
                del self.food[i]
                eaten.append(food.color)
                break
            if not grew:
                del snake.segments[0]

        per_player = self.num_snakes // self.num_players
        for player in range(self.num_players):
            team = self.snakes[player * per_player:(player + 1) * per_player]
            if all(len(s.segments) >= self.max_snake_length for s in team):
                game_over = True
        for color in eaten:
            self.food.append(_Food(color, self._free_cell()))

        truncated = not game_over and self.step >= self.max_steps
        reward = n_grown / (self.max_snake_length - 1) / self.num_snakes
        return self._observe(reward=reward, done=game_over or truncated, truncated=truncated)

    def _snake(self, snake_id: object) -> _Snake:
        if not isinstance(snake_id, (int, np.integer)) or not 0 <= snake_id < self.num_snakes:
            raise ValueError(
                f"MultiSnake.act: actor {snake_id!r} is not a snake; expected a SnakeHead id in "
                f"[0, {self.num_snakes})"
            )
        return self.snakes[int(snake_id)]

    def _on_board(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.board_size and 0 <= cell[1] < self.board_size

    def _free_cell(self) -> Cell:
        """A uniformly random cell holding neither a snake segment nor food."""
        occupied = np.zeros((self.board_size, self.board_size), dtype=bool)  # [board, board]
        for cell in [seg for s in self.snakes for seg in s.segments] + [f.cell for f in self.food]:
            if self._on_board(cell):
                occupied[cell] = True
        free = np.argwhere(~occupied)  # [n_free, 2]
        # The board-size check in __init__ guarantees a free cell.
        x, y = free[self.rng.integers(len(free))]
        return int(x), int(y)

    def _observe(self, reward: float, done: bool, truncated: bool) -> Observation:
        heads = [(*s.segments[-1], s.color) for s in self.snakes]
        bodies = [(*seg, s.color) for s in self.snakes for seg in s.segments[:-1]]
        food = [(*f.cell, f.color) for f in self.food]
        return Observation(
            global_features=np.array([self.step], dtype=np.float32),  # [1]
            features={
                "SnakeHead": np.array(heads, dtype=np.float32).reshape(-1, 3),  # [n_snakes, 3]
                "SnakeBody": np.array(bodies, dtype=np.float32).reshape(-1, 3),  # [n_body, 3]
                "Food": np.array(food, dtype=np.float32).reshape(-1, 3),  # [n_food, 3]
            },
            ids={"SnakeHead": list(range(len(self.snakes)))},
            actions={"move": CategoricalActionMask(actor_types=["SnakeHead"])},
            reward=reward,
            done=done,
            truncated=truncated,
        )
