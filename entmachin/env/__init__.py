"""Entity environments: an entity-gym 0.1.10 compatible API (no torch imported here)."""
from entmachin.env.action import (
    Action,
    ActionMask,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import GLOBAL_ENTITY, ActionName, EntityID, EntityName, Features
from entmachin.env.environment import Entity, Environment, Observation, ObsSpace
from entmachin.env.multi_agent import MultiAgentEnvironment, Opponent, Seat, game_results
from entmachin.env.vec_env import (
    Metric,
    VecActionMask,
    VecCategoricalActionMask,
    VecContinuousActionMask,
    VecEnv,
    VecObs,
    VecSelectEntityActionMask,
    RowIndex,
    env_seeds,
)
from entmachin.env.batch import batch_obs
from entmachin.env.env_list import EnvList
from entmachin.env.parallel_env_list import EnvWorkerError, ParallelEnvList
from entmachin.env.finite import NonFiniteObservationError
from entmachin.env.canonical import random_actions, to_state, to_vec_actions
from entmachin.env.validator import ValidatingEnv, ValidatingMultiAgentEnv, checked_choices, validate_observation
from entmachin.env.add_metrics_wrapper import AddMetricsWrapper
from entmachin.env.time_limit import TimeLimit
from entmachin.env.adapters import EntityGymAdapter, GymnasiumEnvironment, ensure_environment, from_gymnasium
from entmachin.env.gymnasium_vec import GymnasiumVecEnv
from entmachin.env.pettingzoo_adapter import PettingZooEnvironment, SpacesDifferError, from_pettingzoo

__all__ = [
    "Action", "ActionMask", "ActionSpace", "ActionName", "EntityID", "EntityName", "Features",
    "CategoricalAction", "CategoricalActionMask", "CategoricalActionSpace",
    "GlobalCategoricalAction", "GlobalCategoricalActionMask", "GlobalCategoricalActionSpace",
    "SelectEntityAction", "SelectEntityActionMask", "SelectEntityActionSpace",
    "ContinuousAction", "ContinuousActionMask", "ContinuousActionSpace",
    "GlobalContinuousAction", "GlobalContinuousActionMask", "GlobalContinuousActionSpace",
    "Entity", "Environment", "Observation", "ObsSpace", "GLOBAL_ENTITY",
    "MultiAgentEnvironment", "Opponent", "Seat", "game_results", "RowIndex",
    "Metric", "VecActionMask", "VecCategoricalActionMask", "VecEnv", "VecObs",
    "VecSelectEntityActionMask", "VecContinuousActionMask", "env_seeds", "batch_obs", "EnvList", "ParallelEnvList", "EnvWorkerError",
    "NonFiniteObservationError",
    "random_actions", "to_state", "to_vec_actions",
    "EntityGymAdapter", "GymnasiumEnvironment", "ensure_environment", "from_gymnasium",
    "GymnasiumVecEnv", "PettingZooEnvironment", "SpacesDifferError", "from_pettingzoo",
    "ValidatingEnv", "ValidatingMultiAgentEnv", "checked_choices", "validate_observation", "AddMetricsWrapper", "TimeLimit",
]
