"""Entity environments: an entity-gym 0.1.10 compatible API (no torch imported here)."""
from entmachin.env.action import (
    Action,
    ActionMask,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import GLOBAL_ENTITY, ActionName, EntityID, EntityName, Features
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace

__all__ = [
    "Action", "ActionMask", "ActionSpace", "ActionName", "EntityID", "EntityName", "Features",
    "CategoricalAction", "CategoricalActionMask", "CategoricalActionSpace",
    "GlobalCategoricalAction", "GlobalCategoricalActionMask", "GlobalCategoricalActionSpace",
    "SelectEntityAction", "SelectEntityActionMask", "SelectEntityActionSpace",
    "Entity", "Environment", "Observation", "ObsSpace", "GLOBAL_ENTITY",
]
