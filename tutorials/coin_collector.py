"""CoinCollector: the entity environment that tutorial 2 writes and trains.

Game: a robot walks on a ``size x size`` grid among rocks, collecting coins of different
values; a magnet, whenever it is charged, pulls one coin of its choice. A collected coin is
replaced at once by a new one on a free cell, so there is always something to collect and the
return measures how fast and how well the coins are collected. An episode lasts
``episode_steps`` steps and then is cut short (``truncated=True``): the game itself never ends.

Observed (four entity types):
    ``Robot`` (x, y), ``Coin`` (x, y, value), ``Rock`` (x, y), ``Magnet`` (charge: steps until
    it can pull again; 0 means now).

Actions:
    ``move``: categorical, taken by the robot: ``up`` (y + 1), ``down``, ``left`` (x - 1),
    ``right``. The mask forbids moves off the grid and into rocks, and :meth:`act` raises on a
    forbidden move: the mask is a promise the policy keeps (RogueNet samples only allowed
    choices), not a hint. Rocks stand on cells with two odd coordinates, so every free cell has
    a free neighbour and the robot always has an allowed move.
    ``pull``: select-entity, taken by the magnet on the steps it is charged; it selects any coin.

Reward: the value of the coin the robot steps on, and twice the value of the coin the magnet
pulls; values are drawn uniformly from [0.1, 1.0]. (Without the doubling the magnet's choice
would hardly matter: a coin it leaves is collected later anyway, by the robot or by a later
pull. With it, pulling coin ``c`` is worth ``value(c)`` more than leaving it, so the best pull is
the most valuable coin, something a policy can visibly learn.)

This module lives beside the tutorials so that a run config can name it as
``coin_collector:CoinCollector`` once the ``tutorials`` directory is on ``sys.path``; an
environment in a package of your own is named the same way, ``your_package.module:Class``.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from entmachin.env import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)

MOVES = ["up", "down", "left", "right"]
STEPS = [(0, 1), (0, -1), (-1, 0), (1, 0)]  # (dx, dy) of each move
ROBOT_ID, MAGNET_ID = "robot", "magnet"

Cell = Tuple[int, int]


class CoinCollector(Environment):
    """A robot and a magnet collect coins on a grid with rocks.

    Args:
        size: the grid is ``size x size`` (at least 3, so that there is room for rocks).
        n_coins: coins on the grid at every step.
        n_rocks: rocks, on distinct cells with two odd coordinates.
        cooldown: steps the magnet needs to recharge after a pull (it starts charged).
        episode_steps: length of an episode.

    Raises:
        ValueError: a size or count out of range.

    Shape:
        features: ``Robot`` ``[1, 2]``, ``Coin`` ``[n_coins, 3]``, ``Rock`` ``[n_rocks, 2]``,
        ``Magnet`` ``[1, 1]``; ``move`` mask ``[1, 4]``.
    """

    def __init__(self, size: int = 5, n_coins: int = 3, n_rocks: int = 3, cooldown: int = 4,
                 episode_steps: int = 30) -> None:
        pillars = [(x, y) for x in range(1, size, 2) for y in range(1, size, 2)]
        if size < 3:
            raise ValueError(f"CoinCollector: size must be >= 3, got {size}")
        if not 0 <= n_rocks <= len(pillars):
            raise ValueError(f"CoinCollector: n_rocks must be in [0, {len(pillars)}] on a {size}x{size} grid "
                             f"(rocks stand on cells with two odd coordinates), got {n_rocks}")
        if not 1 <= n_coins <= size * size - n_rocks - 1:
            raise ValueError(f"CoinCollector: n_coins must be in [1, {size * size - n_rocks - 1}] on a {size}x{size} "
                             f"grid with {n_rocks} rocks and a robot, got {n_coins}")
        if cooldown < 0 or episode_steps < 1:
            raise ValueError(f"CoinCollector: expected cooldown >= 0 and episode_steps >= 1, got {cooldown} and "
                             f"{episode_steps}")
        self.size, self.n_coins, self.n_rocks = size, n_coins, n_rocks
        self.cooldown, self.episode_steps, self.pillars = cooldown, episode_steps, pillars
        self.rng = np.random.default_rng()  # EnvList(seed=...) replaces it through seed()

    # ------------------------------------------------------------------ what it shows and accepts

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={
            "Robot": Entity(["x", "y"]),
            "Coin": Entity(["x", "y", "value"]),
            "Rock": Entity(["x", "y"]),
            "Magnet": Entity(["charge"]),
        })

    def action_space(self) -> Dict[str, ActionSpace]:
        return {"move": CategoricalActionSpace(list(MOVES)), "pull": SelectEntityActionSpace()}

    # ------------------------------------------------------------------ dynamics

    def reset(self) -> Observation:
        picks = self.rng.choice(len(self.pillars), size=self.n_rocks, replace=False)
        self.rocks: List[Cell] = [self.pillars[i] for i in sorted(picks)]
        self.coins: List[Tuple[int, int, float]] = []  # (x, y, value)
        self.robot: Cell = (-1, -1)  # off the grid until placed
        self.robot = self._random_free_cell()
        self._spawn_coins()
        self.charge, self.t = 0, 0
        return self._observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        # Both actions are checked before either changes the state.
        pulled = self._pulled_coin(actions.get("pull"))
        dx, dy = self._robot_step(actions.get("move"))
        reward, taken = 0.0, set()
        if pulled is not None:
            taken.add(pulled)
            reward += 2 * self.coins[pulled][2]  # the magnet's coins count double
            self.charge = self.cooldown
        else:
            self.charge = max(self.charge - 1, 0)
        self.robot = (self.robot[0] + dx, self.robot[1] + dy)
        for i, (x, y, value) in enumerate(self.coins):
            if (x, y) == self.robot and i not in taken:
                taken.add(i)
                reward += value
        self.coins = [coin for i, coin in enumerate(self.coins) if i not in taken]
        self._spawn_coins()
        self.t += 1
        return self._observe(reward)

    def _pulled_coin(self, pull: Optional[Action]) -> Optional[int]:
        """The index of the coin the magnet pulls, or None when it does not pull."""
        if not isinstance(pull, SelectEntityAction) or len(pull.actors) == 0:
            return None
        if self.charge > 0:
            raise ValueError(f"CoinCollector.act: the magnet pulled with charge {self.charge}; it may pull only when "
                             "its charge is 0 (the observation's 'pull' mask has no actor then)")
        _, index = pull.actees[0]  # an id, not a position: ("Coin", i)
        return int(index)

    def _robot_step(self, move: Optional[Action]) -> Cell:
        """The robot's ``(dx, dy)``; ``(0, 0)`` when it does not move."""
        if not isinstance(move, CategoricalAction) or len(move.indices) == 0:
            return (0, 0)
        choice = int(move.indices[0])
        if not self._allowed_moves()[choice]:
            raise ValueError(f"CoinCollector.act: the robot at {self.robot} chose {MOVES[choice]!r}, which this "
                             "step's mask forbids (off the grid or into a rock)")
        return STEPS[choice]

    def _random_free_cell(self) -> Cell:
        occupied = set(self.rocks) | {(x, y) for x, y, _ in self.coins} | {self.robot}
        free = [(x, y) for x in range(self.size) for y in range(self.size) if (x, y) not in occupied]
        return free[int(self.rng.integers(len(free)))]

    def _spawn_coins(self) -> None:
        while len(self.coins) < self.n_coins:
            x, y = self._random_free_cell()
            self.coins.append((x, y, round(float(self.rng.uniform(0.1, 1.0)), 2)))

    def _allowed_moves(self) -> List[bool]:
        x, y = self.robot
        return [0 <= x + dx < self.size and 0 <= y + dy < self.size and (x + dx, y + dy) not in self.rocks
                for dx, dy in STEPS]

    # ------------------------------------------------------------------ the observation

    def _observe(self, reward: float) -> Observation:
        coin_ids = [("Coin", i) for i in range(len(self.coins))]
        ended = self.t >= self.episode_steps
        return Observation(
            features={
                "Robot": np.array([self.robot], dtype=np.float32),  # [1, 2]
                "Coin": np.array(self.coins, dtype=np.float32).reshape(len(self.coins), 3),  # [n_coins, 3]
                "Rock": np.array(self.rocks, dtype=np.float32).reshape(len(self.rocks), 2),  # [n_rocks, 2]
                "Magnet": np.array([[self.charge]], dtype=np.float32),  # [1, 1]
            },
            ids={"Robot": [ROBOT_ID], "Coin": coin_ids, "Magnet": [MAGNET_ID]},
            actions={
                "move": CategoricalActionMask(actor_ids=[ROBOT_ID],
                                              mask=np.array([self._allowed_moves()], dtype=np.bool_)),  # [1, 4]
                "pull": SelectEntityActionMask(actor_ids=[MAGNET_ID] if self.charge == 0 else [],
                                               actee_ids=coin_ids),
            },
            reward=reward,
            done=ended,
            truncated=ended,  # the episode is cut short: the game would go on
        )
