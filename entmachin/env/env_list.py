"""``EnvList``: a list of environments stepped in this process, with auto-reset and seeding."""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import dill
import numpy as np
import numpy.typing as npt

from entmachin.env.action import ActionSpace
from entmachin.env.adapters import ensure_environment
from entmachin.env.batch import batch_obs
from entmachin.env.common import ActionName, mark_environment
from entmachin.env.environment import Environment, Observation, ObsSpace
from entmachin.env.finite import NonFiniteObservationError, refuse_non_finite
from entmachin.env.multi_agent import (
    RESULT_NAMES,
    check_game_step,
    check_seats,
    game_results,
    is_multi_agent,
)
from entmachin.env.vec_actions import check_actions, check_values, row_choices, to_env_actions
from entmachin.env.vec_env import RowIndex, VecEnv, VecObs, env_seeds, ragged_actions
from entmachin.ragged.array import RaggedArray

logger = logging.getLogger(__name__)

__all__ = ["EnvList", "check_actions", "check_values", "row_choices", "to_env_actions"]


class EnvList(VecEnv):
    """Steps ``num_envs`` environments one after another in this process.

    Finished environments are reset at once: the returned row holds the first observation of
    the next episode with ``done`` set, the finished step's ``reward``, ``metrics`` and
    ``truncated``, and the finished episode's last observation in ``VecObs.final_obs``.

    Environments with several players (``MultiAgentEnvironment``) give one row per (environment,
    seat), in environment order and then seat order (``row_index()``); every seat's row of an
    environment ends its game on the same step, with the seat's ``VecObs.result``.

    Args:
        create_env: builds one environment (an entmachin ``Environment`` or
            ``MultiAgentEnvironment``, or an environment written against the ``entity_gym``
            package, which is wrapped in ``EntityGymAdapter``).
        num_envs: number of environments.
        seed: ``None`` leaves the environments unseeded; an int gives environment ``i`` its own
            seed derived from it (``env_seeds``), so equal seeds give equal observations.
        check_finite: raise ``NonFiniteObservationError`` (naming the environment, entity type
            and feature) when an observation, final observation or reward holds NaN or
            infinity, instead of handing it to a model whose running statistics it would
            poison. One vectorised test per entity type and step; False turns it off.

    Raises:
        NonFiniteObservationError: from ``reset`` / ``act``, see ``check_finite``.
    """

    def __init__(
        self, create_env: Callable[[], Environment], num_envs: int, seed: Optional[int] = None, *,
        check_finite: bool = True,
    ):
        if num_envs < 1:
            raise ValueError(f"EnvList: num_envs must be >= 1, got {num_envs}")
        self._init(create_env, env_seeds(seed, num_envs), seeded=seed is not None, first_index=0,
                   check_finite=check_finite)

    @classmethod
    def _with_seeds(
        cls, create_env: Callable[[], Environment], seeds: Sequence[Optional[int]], seeded: bool, first_index: int,
        check_finite: bool = True, owner: str = "EnvList",
    ) -> "EnvList":
        """An EnvList of ``len(seeds)`` environments numbered from ``first_index`` (worker side;
        ``owner`` names the list in its messages)."""
        self = cls.__new__(cls)
        self._init(create_env, seeds, seeded, first_index, check_finite, owner)
        return self

    def _init(self, create_env: Callable[[], Environment], seeds: Sequence[Optional[int]], seeded: bool,
              first_index: int, check_finite: bool, owner: str = "EnvList") -> None:
        if not isinstance(check_finite, bool):
            raise TypeError(f"{owner}: check_finite must be a bool, got {check_finite!r}")
        self.check_finite = check_finite
        self._owner = owner
        self.envs = [ensure_environment(create_env()) for _ in seeds]
        self.first_index = first_index
        if seeded:
            for env, s in zip(self.envs, seeds):
                env.seed(s)
        self._obs_space = self.envs[0].obs_space()
        self._action_space = self.envs[0].action_space()
        self._obs_filter = self._obs_space
        self.last_obs: List[Observation] = []  # one per row
        games = [is_multi_agent(env) for env in self.envs]
        if any(games) and not all(games):
            raise TypeError(f"{owner}: create_env built environments of one player and of several; build one kind")
        self._seats = [check_seats(f"{owner}: environment {first_index + i} ({type(env).__name__})", env.seats())
                       for i, env in enumerate(self.envs)] if games[0] else None
        self._rows = RowIndex.of(self._seats or [None] * len(self.envs))
        self._returns = np.zeros(len(self._rows), dtype=np.float64)  # [n_rows]: each game's returns so far

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self._action_space

    def __len__(self) -> int:
        return len(self._rows)

    def row_index(self) -> RowIndex:
        return self._rows

    def reset(self, obs_config: Optional[ObsSpace] = None) -> VecObs:
        self._obs_filter = obs_config or self._obs_space
        self._returns[:] = 0.0
        observations: List[Observation] = []
        for i in range(len(self.envs)):
            observations.extend(self._reset(i))
        return self._batch(observations)

    def _reset(self, i: int) -> List[Observation]:
        """Environment ``i``'s first observations, one per row."""
        obs = self._call(i, lambda e: e.reset_filter(self._obs_filter))
        return [obs] if self._seats is None else self._by_seat(i, obs, "reset()")

    def _by_seat(self, i: int, by_seat: Any, method: str) -> List[Observation]:
        """A game's observations, checked, in seat order."""
        seats = self._seats[i]  # type: ignore[index]
        try:
            check_game_step(f"{type(self.envs[i]).__name__}.{method}", by_seat, seats)
        except (TypeError, ValueError) as e:
            self._mark(e, i)
            raise
        return [by_seat[seat] for seat in seats]

    def act(self, actions: Mapping[ActionName, RaggedArray], obs_filter: Optional[ObsSpace] = None) -> VecObs:
        if not self.last_obs:
            raise RuntimeError("EnvList.act called before reset()")
        if obs_filter is not None:
            self._obs_filter = obs_filter
        obs_filter = self._obs_filter
        actions = ragged_actions(actions)
        check_actions(actions, self._last_vec, self._action_space)
        choices = row_choices(actions, len(self._rows))
        observations: List[Observation] = []
        finals: List[Observation] = []
        final_index: List[int] = []
        row = 0
        for i, env in enumerate(self.envs):
            n = 1 if self._seats is None else len(self._seats[i])
            moves = [to_env_actions(obs_filter, self._action_space, choices[r], self.last_obs[r])
                     for r in range(row, row + n)]
            if self._seats is None:
                stepped = [self._call(i, lambda e: e.act_filter(moves[0], obs_filter))]
            else:
                by_seat = dict(zip(self._seats[i], moves))
                stepped = self._by_seat(i, self._call(i, lambda e: e.act_filter(by_seat, obs_filter)), "act()")
            if stepped[0].done:
                finals.extend(stepped)
                final_index.extend(range(row, row + n))
                stepped = self._restart(i, row, stepped)
            elif self._seats is not None:
                self._returns[row:row + n] += [o.reward for o in stepped]
            observations.extend(stepped)
            row += n
        self.final_observations = finals  # the Observations behind vec.final_obs (a recorder reads their ids)
        vec = self._batch(observations)
        if finals:
            vec.final_obs = self._batch_obs(finals, final_index, final=True)
            vec.final_index = np.array(final_index, dtype=np.int64)
        return vec

    def _restart(self, i: int, row: int, ended: List[Observation]) -> List[Observation]:
        """Environment ``i``'s next game, its rows carrying the ended game's last reward, metrics,
        ``truncated`` and each seat's result (the higher return wins where none is stated)."""
        if self._seats is not None:
            returns = self._returns[row:row + len(ended)] + [o.reward for o in ended]
            try:
                scores = game_results([o.result for o in ended], returns, f"{type(self.envs[i]).__name__}.act()")
            except ValueError as e:
                self._mark(e, i)
                raise
            for obs, score in zip(ended, scores):
                obs.result = RESULT_NAMES[score]
            self._returns[row:row + len(ended)] = 0.0
        fresh = self._reset(i)
        for new_obs, obs in zip(fresh, ended):
            new_obs.done = True
            new_obs.truncated = obs.truncated
            new_obs.reward = obs.reward
            new_obs.metrics = obs.metrics
            new_obs.result = obs.result
        return fresh

    def _call(self, i: int, fn: Callable[[Environment], Observation]) -> Observation:
        try:
            return fn(self.envs[i])
        except Exception as e:
            self._mark(e, i)
            raise

    def _mark(self, e: Exception, i: int) -> None:
        mark_environment(e, self.first_index + i, self.envs[i])  # env_index: read by ParallelEnvList's workers

    def _batch(self, observations: List[Observation]) -> VecObs:
        self.last_obs = observations
        self._last_vec = self._batch_obs(observations, range(len(observations)))
        return self._last_vec

    def _batch_obs(self, observations: List[Observation], rows: Sequence[int], final: bool = False) -> VecObs:
        """``batch_obs`` of the observations of environments ``rows``; a malformed observation
        raises with the index of its environment (in this list's numbering, which a worker of
        ParallelEnvList offsets), found by batching the rows one at a time. With
        ``check_finite``, NaN or infinity raises ``NonFiniteObservationError`` likewise."""
        try:
            vec = batch_obs(observations, self._obs_filter, self._action_space)
        except (ValueError, TypeError):
            for obs, i in zip(observations, rows):
                try:
                    batch_obs([obs], self._obs_filter, self._action_space, first_row=self.first_index + i)
                except (ValueError, TypeError) as e:
                    self._mark(e, i)
                    raise e from None
            raise
        if self.check_finite:
            try:
                refuse_non_finite(vec, self._obs_filter, rows, self._owner, final, self.first_index)
            except NonFiniteObservationError as e:
                self._mark(e, e.env_index - self.first_index)
                raise
        return vec

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """Every environment's frame, in environment order: ``[num_envs, ...]``."""
        return np.stack([e.render(**kwargs) for e in self.envs])

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def get_state(self) -> bytes:
        """The environments and the observations they last returned, pickled with ``dill``.

        With :meth:`set_state` this continues the episodes in progress exactly (a run's
        checkpoint holds it). Loading it runs code from the data: restore only your own.
        """
        return dill.dumps((self.envs, self.last_obs, getattr(self, "_last_vec", None), self._obs_filter,
                           self._returns))

    def set_state(self, state: bytes) -> None:
        """Restores the environments from ``state``, which :meth:`get_state` returned (the same number of them).

        Raises:
            ValueError: the state holds another number of environments, or other seats.
        """
        envs, last_obs, last_vec, obs_filter, *returns = dill.loads(state)  # no returns: a state of one-player lists
        if len(envs) != len(self.envs):
            raise ValueError(f"EnvList.set_state: the state holds {len(envs)} environments; this EnvList has "
                             f"{len(self.envs)}")
        seats = RowIndex.of([env.seats() if is_multi_agent(env) else None for env in envs]).seats
        if seats != self._rows.seats:
            raise ValueError(f"EnvList.set_state: the state's environments have seats {seats}; this EnvList's have "
                             f"{self._rows.seats}")
        self.envs, self.last_obs, self._obs_filter = list(envs), last_obs, obs_filter
        self._returns = returns[0] if returns else np.zeros(len(self._rows), dtype=np.float64)
        if last_vec is not None:
            self._last_vec = last_vec
