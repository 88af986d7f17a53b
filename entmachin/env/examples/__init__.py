"""Example environments, by name in ``ENV_REGISTRY``."""
from typing import Dict, Type

from entmachin.env.environment import Environment
from entmachin.env.examples.cherry_pick import CherryPick
from entmachin.env.examples.count import Count
from entmachin.env.examples.floor_is_lava import FloorIsLava
from entmachin.env.examples.minefield import Minefield
from entmachin.env.examples.minesweeper import MineSweeper
from entmachin.env.examples.move_to_origin import MoveToOrigin
from entmachin.env.examples.multi_armed_bandit import MultiArmedBandit
from entmachin.env.examples.multi_snake import MultiSnake
from entmachin.env.examples.not_hotdog import NotHotdog
from entmachin.env.examples.pick_matching_balls import PickMatchingBalls
from entmachin.env.examples.rock_paper_scissors import RockPaperScissors
from entmachin.env.examples.xor import Xor

ENV_REGISTRY: Dict[str, Type[Environment]] = {
    cls.__name__: cls
    for cls in (
        MineSweeper, MoveToOrigin, CherryPick, Count, FloorIsLava, MultiArmedBandit, NotHotdog,
        PickMatchingBalls, RockPaperScissors, Xor, MultiSnake, Minefield,
    )
}

__all__ = ["ENV_REGISTRY", *ENV_REGISTRY]
