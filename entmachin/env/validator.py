"""``ValidatingEnv`` and ``validate_observation``: check environment output against its spaces.

Wrap an environment while writing or debugging it; every observation returned by ``reset`` and
``act`` is checked against ``obs_space()`` / ``action_space()`` and a mistake raises a
``ValueError`` or ``TypeError`` naming the entity type, action or field, what was expected and
what arrived. The checks are numpy-vectorised, cheap enough for long test runs.

Accepted layouts where more than one is allowed:

* ``visible[etype]``: bool ``(n_entities,)`` or ``(n_entities, 1)`` (``batch_obs`` flattens
  both the same way).
* ``GlobalCategoricalActionMask.mask``: bool ``(n_choices,)`` or ``(1, n_choices)``.
* Categorical masks of actions without actors: ``(0, n_choices)`` or any empty array.
* Select-entity masks of actions without actors are ignored (as ``batch_obs`` does).
* ``ContinuousActionMask.low`` / ``.high``: each optional, float ``(n_actors, n_values)`` (any
  empty array when nobody acts); ``GlobalContinuousActionMask``'s: ``(n_values,)`` or
  ``(1, n_values)``. Finite, within the space's bounds (a mask narrows them, never widens them),
  ``low <= high`` for every actor and value (a bound not given is the space's).

Example:
    >>> env = ValidatingEnv(MineSweeper())
    >>> obs = env.reset()  # raises if MineSweeper's observation is malformed
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import numpy.typing as npt

from entmachin.env.action import (
    CONTINUOUS_SPACES,
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionSpace,
    GlobalCategoricalAction,
    GlobalCategoricalActionSpace,
    GlobalContinuousAction,
    GlobalContinuousActionSpace,
    SelectEntityAction,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.continuous_checks import (
    actor_order,
    check_continuous_taken,
    check_no_actors,
    continuous_choices,
    continuous_values,
    check_action_space,
)
from entmachin.env.environment import Environment, Observation, ObsSpace
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, check_by_seat, check_game_step, is_multi_agent
from entmachin.env.observation_checks import validate_observation

_ACTION_CLASS = {
    CategoricalActionSpace: CategoricalAction,
    SelectEntityActionSpace: SelectEntityAction,
    GlobalCategoricalActionSpace: GlobalCategoricalAction,
    ContinuousActionSpace: ContinuousAction,
    GlobalContinuousActionSpace: GlobalContinuousAction,
}


class ValidatingEnv(Environment):
    """An environment that forwards to ``env`` and validates every observation it returns.

    Given a ``MultiAgentEnvironment`` it returns a ``ValidatingMultiAgentEnv``, which checks
    every seat.

    ``reset_filter`` / ``act_filter`` filter the validated observation (the base class's
    filtering); ``seed``, ``render`` and ``close`` go to ``env``. The actions passed to ``act``
    are checked lightly: known names, the right action class, categorical choices in range.
    Continuous actions are checked in full against the last observation: float32 values, one
    row per actor of its mask, finite and within each actor's bounds.

    Args:
        env: the environment to check. Its spaces are read once, here.

    Raises:
        ValueError, TypeError: from ``reset`` / ``act`` when an observation (or an action) does
            not fit the spaces; see ``validate_observation``. From the constructor, when a
            continuous action space's bounds are not finite or cross (changed after it was built).
    """

    def __new__(cls, env: Any = None) -> Any:  # no argument when unpickled
        if is_multi_agent(env):
            return ValidatingMultiAgentEnv(env)
        return super().__new__(cls)

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._obs_space = env.obs_space()
        self._action_space = env.action_space()
        self._name = type(env).__name__
        check_action_space(self._action_space, f"{self._name}.action_space()")
        self._last: Optional[Observation] = None  # what the continuous actions of act() must fit

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def reset(self) -> Observation:
        obs = self.env.reset()
        validate_observation(obs, self._obs_space, self._action_space, where=f"{self._name}.reset()")
        self._last = obs
        return obs

    def act(self, actions: Mapping[ActionName, Action]) -> Observation:
        where = f"{self._name}.act()"
        _check_actions_taken(actions, self._action_space, where)
        if self._last is not None:
            check_continuous_taken(self._last, self._obs_space, self._action_space, actions, where)
        obs = self.env.act(actions)
        validate_observation(obs, self._obs_space, self._action_space, where=where)
        self._last = obs
        return obs

    def seed(self, seed: Optional[int]) -> None:
        """Seeds the wrapped environment with ``seed``."""
        self.env.seed(seed)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()


class ValidatingMultiAgentEnv(MultiAgentEnvironment):
    """A game of several players that forwards to ``env`` and checks every seat.

    Each step's observations must name exactly the seats, end the game for every seat at once,
    state valid results and fit the spaces (``validate_observation`` per seat). The actions
    passed to ``act`` must name exactly the seats and fit each seat's last observation
    (``checked_choices``): an error names the seat and action, and ``env`` is not called.
    """

    def __init__(self, env: MultiAgentEnvironment) -> None:
        self.env = env
        self._seats = env.seats()
        self._obs_space = env.obs_space()
        self._action_space = env.action_space()
        self._name = type(env).__name__
        check_action_space(self._action_space, f"{self._name}.action_space()")
        self._last: Optional[Dict[Seat, Observation]] = None

    def seats(self) -> List[Seat]:
        return list(self._seats)

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def reset(self) -> Dict[Seat, Observation]:
        return self._checked(self.env.reset(), f"{self._name}.reset()")

    def act(self, actions: Mapping[Seat, Mapping[ActionName, Action]]) -> Dict[Seat, Observation]:
        where = f"{self._name}.act()"
        if self._last is None:
            raise RuntimeError(f"{where} called before reset()")
        check_by_seat(where, actions, self._seats, "actions")
        for seat in self._seats:
            checked_choices(self._last[seat], self._obs_space, self._action_space, actions[seat],
                            f"{where}: seat '{seat}'")
        return self._checked(self.env.act(actions), where)

    def _checked(self, by_seat: Dict[Seat, Observation], where: str) -> Dict[Seat, Observation]:
        check_game_step(where, by_seat, self._seats)
        for seat in self._seats:
            validate_observation(by_seat[seat], self._obs_space, self._action_space, f"{where}: seat '{seat}'")
        self._last = by_seat
        return by_seat

    def seed(self, seed: Optional[int]) -> None:
        """Seeds the wrapped environment with ``seed``."""
        self.env.seed(seed)

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        return self.env.render(**kwargs)

    def close(self) -> None:
        self.env.close()


def checked_choices(
    obs: Observation,
    obs_space: ObsSpace,
    action_space: Mapping[ActionName, ActionSpace],
    actions: Any,
    where: str = "actions",
) -> Dict[ActionName, npt.NDArray[Any]]:
    """Check ``actions`` against the masks of ``obs`` and return each action's choices as entity-gym rows hold
    them: int64 ``[n_actors]`` in the mask's actor order (select-entity choices are positions in the actee
    list); for a continuous action, its float32 values ``[n_actors, n_values]`` in that order (global:
    ``[1, n_values]``), what ``row_choices`` gives. The inverse of ``to_env_actions``.

    Every action whose mask lists actors must be given, for exactly those actors (in any order
    when the actors have distinct ids), with allowed choices; an action for no actors may be
    left out (its choices are then empty: ``[0]``, or ``[0, n_values]`` for a continuous action).

    Args:
        obs: the observation the actions answer.
        obs_space: the layout of ``obs`` (entity order, for the actors' and actees' indices).
        action_space: the environment's actions by name.
        actions: action name -> ``Action``, as ``Environment.act`` takes them.
        where: what error messages begin with (default ``"actions"``).

    Raises:
        TypeError: ``actions`` is not a mapping, an action has the wrong class, or continuous
            values are not a float32 array.
        ValueError: an unknown action, an action with no actors to take it, missing or unknown
            actors, a choice out of range or masked, continuous values of the wrong shape, not
            finite or outside their actor's bounds (each named, with ``where``).
    """
    _check_actions_taken(actions, action_space, where)
    out: Dict[ActionName, npt.NDArray[Any]] = {}
    for name, space in action_space.items():
        amask = obs.actions.get(name)
        actors = _EMPTY if amask is None else obs._actor_indices(name, obs_space)  # [n_actors]
        action = actions.get(name)
        field = f"{where}: actions['{name}']"
        if len(actors) == 0:
            check_no_actors(action, name, field)
            out[name] = np.zeros((0, len(space)), np.float32) if isinstance(space, CONTINUOUS_SPACES) else _EMPTY
            continue
        if action is None:
            raise ValueError(f"{field} is missing; the observation has {len(actors)} actor(s) for it")
        if isinstance(space, CONTINUOUS_SPACES):
            out[name] = continuous_choices(obs, obs_space, space, amask, actors, action, field)
            continue
        if isinstance(space, GlobalCategoricalActionSpace):
            allowed = None if amask.mask is None else np.asarray(amask.mask, np.bool_).reshape(1, -1)
            out[name] = _allowed_choices(np.array([action.index], np.int64), allowed, len(space), field, "choice")
            continue
        order = actor_order(list(action.actors), obs.entity_ids(obs_space, amask.actor_ids, actors), field)
        if isinstance(space, CategoricalActionSpace):
            chosen = np.asarray(action.indices, dtype=np.int64).reshape(-1)
            if len(chosen) != len(order):
                raise ValueError(f"{field} has {len(chosen)} choices for {len(order)} actors")
            allowed = None if amask.mask is None else np.asarray(amask.mask, np.bool_).reshape(len(actors), -1)
            out[name] = _allowed_choices(chosen[order], allowed, len(space), field, "choice")
            continue
        candidates = obs.entity_ids(obs_space, amask.actee_ids, obs._actee_indices(name, obs_space))
        position = {eid: k for k, eid in enumerate(candidates)}
        if len(action.actees) != len(order) or any(a not in position for a in action.actees):
            raise ValueError(f"{field} selects {list(action.actees)[:5]}; expected one of the actees "
                             f"{candidates[:8]} for each of its {len(order)} actors")
        chosen = np.array([position[a] for a in action.actees], dtype=np.int64)[order]
        allowed = None if amask.mask is None else np.asarray(amask.mask, np.bool_).reshape(len(actors), -1)
        out[name] = _allowed_choices(chosen, allowed, len(candidates), field, "actee")
    return out


_EMPTY = np.zeros(0, dtype=np.int64)


def _allowed_choices(chosen: npt.NDArray[np.int64], allowed: Optional[np.ndarray], limit: int, field: str,
                     what: str) -> npt.NDArray[np.int64]:
    bad = (chosen < 0) | (chosen >= limit)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{field}: actor {k} chose {what} {chosen[k]}; expected one in [0, {limit})")
    if allowed is not None:
        masked = ~allowed[np.arange(len(chosen)), chosen]
        if masked.any():
            k = int(np.flatnonzero(masked)[0])
            raise ValueError(f"{field}: actor {k} chose {what} {chosen[k]}, which its mask forbids")
    return chosen


def _check_actions_taken(actions: Any, action_space: Mapping[ActionName, ActionSpace], where: str) -> None:
    """Light checks of what is passed to ``act``: names, action classes, choices in range,
    continuous values float32, one row per actor given, finite and within the space's bounds."""
    if not isinstance(actions, Mapping):
        raise TypeError(f"{where}: actions must be a mapping from action name to action, got {type(actions).__name__}")
    for name, action in actions.items():
        if name not in action_space:
            raise ValueError(f"{where}: actions has unknown action '{name}'; the action space has {list(action_space)}")
        space = action_space[name]
        expected = _ACTION_CLASS[type(space)]
        if not isinstance(action, expected):
            raise TypeError(f"{where}: actions['{name}'] is a {type(action).__name__}; expected a {expected.__name__}")
        if isinstance(action, SelectEntityAction):
            continue
        if isinstance(space, CONTINUOUS_SPACES):
            continuous_values(action, space, f"{where}: actions['{name}']")
            continue
        chosen = np.asarray(action.index if isinstance(action, GlobalCategoricalAction) else action.indices)
        bad = (chosen < 0) | (chosen >= len(space.index_to_label))
        if bad.any():
            value = chosen.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
            raise ValueError(
                f"{where}: actions['{name}'] chose {value}; expected a choice in [0, {len(space.index_to_label)})"
            )


__all__: List[str] = ["ValidatingEnv", "ValidatingMultiAgentEnv", "check_action_space", "checked_choices",
                      "validate_observation"]
