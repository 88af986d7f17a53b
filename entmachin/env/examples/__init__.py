"""Example environments, by name in ``ENV_REGISTRY``: one-player ``Environment``s and games of
several players (``MultiAgentEnvironment``s, named in ``MULTI_AGENT``)."""
from typing import Dict, List, Type, Union

from entmachin.env.environment import Environment
from entmachin.env.multi_agent import MultiAgentEnvironment
from entmachin.env.examples.cherry_pick import CherryPick
from entmachin.env.examples.connect_four import ConnectFour
from entmachin.env.examples.conveyor import Conveyor
from entmachin.env.examples.count import Count
from entmachin.env.examples.floor_is_lava import FloorIsLava
from entmachin.env.examples.minefield import Minefield
from entmachin.env.examples.minesweeper import MineSweeper
from entmachin.env.examples.move_to_origin import MoveToOrigin
from entmachin.env.examples.multi_armed_bandit import MultiArmedBandit
from entmachin.env.examples.multi_snake import MultiSnake
from entmachin.env.examples.not_hotdog import NotHotdog
from entmachin.env.examples.pick_matching_balls import PickMatchingBalls
from entmachin.env.examples.recall import Recall
from entmachin.env.examples.rock_paper_scissors import RockPaperScissors
from entmachin.env.examples.rock_paper_scissors_duel import RockPaperScissorsDuel
from entmachin.env.examples.skirmish import Skirmish
from entmachin.env.examples.turrets import Turrets
from entmachin.env.examples.vehicles import Vehicles
from entmachin.env.examples.xor import Xor

ENV_REGISTRY: Dict[str, Type[Union[Environment, MultiAgentEnvironment]]] = {
    cls.__name__: cls
    for cls in (
        MineSweeper, MoveToOrigin, CherryPick, Count, FloorIsLava, MultiArmedBandit, NotHotdog,
        PickMatchingBalls, RockPaperScissors, Xor, MultiSnake, Minefield,
        ConnectFour, Skirmish, RockPaperScissorsDuel, Vehicles, Turrets, Recall, Conveyor,
    )
}
#: The names of the registry's games of several players, sorted.
MULTI_AGENT: List[str] = sorted(name for name, cls in ENV_REGISTRY.items() if issubclass(cls, MultiAgentEnvironment))
#: The names of the registry's one-player environments, sorted.
SINGLE_AGENT: List[str] = sorted(set(ENV_REGISTRY) - set(MULTI_AGENT))

__all__ = ["ENV_REGISTRY", "MULTI_AGENT", "SINGLE_AGENT", *ENV_REGISTRY]
