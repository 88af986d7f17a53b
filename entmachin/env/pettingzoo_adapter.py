"""``from_pettingzoo`` / ``PettingZooEnvironment``: a PettingZoo Parallel-API environment as a
``MultiAgentEnvironment``.

The environment is taken by duck typing (``possible_agents``, ``agents``,
``observation_space(agent)``, ``action_space(agent)``, ``reset(seed=...)``, ``step(actions)``,
``render``, ``close``); ``pettingzoo`` itself is never imported here.

Example:
    >>> env = from_pettingzoo(my_parallel_env())  # Box observations, Discrete actions
    >>> env.seed(0)
    >>> obs = env.reset()  # {"agent_0": Observation, "agent_1": Observation, ...}
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import numpy.typing as npt

from entmachin.env.action import ActionSpace
from entmachin.env.adapters import BoxDiscreteSpaces, _numeric_info
from entmachin.env.common import ActionName
from entmachin.env.environment import Observation, ObsSpace
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, SeatActions, check_by_seat, check_seats

_PARALLEL_ATTRS = ("possible_agents", "observation_space", "action_space", "reset", "step")  # "agents": after reset


class SpacesDifferError(ValueError):
    """Two PettingZoo agents have different observation (or action) spaces; entmachin's seats
    share one observation space and one action space.

    Attributes:
        agents: the two agents, as the PettingZoo environment names them.
        kind: ``"observation"`` or ``"action"``.
        spaces: the two differing spaces, in the order of ``agents``.
    """

    def __init__(self, agents: Tuple[Any, Any], kind: str, spaces: Tuple[Any, Any]) -> None:
        self.agents = agents
        self.kind = kind
        self.spaces = spaces
        super().__init__(
            f"from_pettingzoo: agents {agents[0]!r} and {agents[1]!r} have different {kind} spaces "
            f"({spaces[0]} and {spaces[1]}); every seat must share one observation space and one action "
            "space (give roles as features instead)"
        )


def from_pettingzoo(env: Any) -> "PettingZooEnvironment":
    """Wrap ``env``, a PettingZoo Parallel-API environment, as a ``MultiAgentEnvironment`` (see
    ``PettingZooEnvironment`` for the conversion and what it refuses).

    Example:
        >>> env = from_pettingzoo(my_parallel_env())
        >>> env.seats()
        ['agent_0', 'agent_1']
    """
    return PettingZooEnvironment(env)


class PettingZooEnvironment(MultiAgentEnvironment):
    """A PettingZoo ``ParallelEnv`` seen as an environment with several players.

    * Seats are ``possible_agents``, as strings (``str(agent)``), in that order.
    * Every agent must have the same observation and action space (else ``SpacesDifferError``);
      they are converted as ``from_gymnasium`` converts a one-player environment's
      (``BoxDiscreteSpaces``): the flattened ``Box`` observation becomes the global features,
      a ``Discrete`` / ``MultiDiscrete`` action one global categorical action per component.
    * An agent in the game (in ``env.agents``, neither terminated nor truncated) acts on every
      step, as the Parallel API requires. Any other seat (an agent not yet in the game, or
      removed from it) is a seat without actors: its observation lists no actions, ``act``
      takes an empty mapping for it, and the PettingZoo environment receives no action for it.
      Its features are the last observation the environment gave it (zeros before the first).
    * Rewards: an agent's reward on every step it is in the game, including the step that
      removes it; 0 for a seat outside the game.
    * The game ends for every seat when no agent is left in the game. A seat's ``truncated`` is
      set at the end if its agent's own ending was a truncation without termination (its agent
      truncated on the last step, or earlier); it is False for agents that terminated or simply
      left ``env.agents``.
    * ``result`` is never stated: the higher episode return wins (``game_results``). Top-level
      numeric ``infos[agent]`` entries become that seat's ``Observation.metrics``.
    * ``seed(s)`` makes the next ``reset`` call ``env.reset(seed=s)``; later resets pass seeds
      drawn from ``self.rng`` (seeded by ``s``), so a seeded run is reproducible game after game.
      Without a seed (or with ``seed(None)``) resets pass ``seed=None``.

    Args:
        env: the Parallel-API environment; ``close`` closes it.

    Raises:
        TypeError: ``env`` lacks a Parallel-API attribute, or its spaces are of an unsupported kind.
        ValueError: ``possible_agents`` is empty or two agents share a seat name.
        SpacesDifferError: two agents' observation or action spaces differ.
    """

    def __init__(self, env: Any) -> None:
        missing = [a for a in _PARALLEL_ATTRS if not hasattr(env, a)]
        if missing:
            raise TypeError(
                f"from_pettingzoo: expected a PettingZoo ParallelEnv, got {type(env).__name__} without {missing}"
                + ("; for an AEC environment use pettingzoo.utils.aec_to_parallel(env)" if hasattr(env, "agent_iter")
                   else "")
            )
        self.env = env
        agents = list(env.possible_agents)
        if not agents:
            raise ValueError(f"from_pettingzoo: {type(env).__name__}.possible_agents is empty")
        names = [str(agent) for agent in agents]
        for i, name in enumerate(names):
            if name in names[:i]:
                first = agents[names.index(name)]
                raise ValueError(
                    f"from_pettingzoo: agents {first!r} and {agents[i]!r} both become seat '{name}'; "
                    "possible_agents must have distinct string forms"
                )
        self._seats = check_seats("from_pettingzoo", names)
        self.agent_of: Dict[Seat, Any] = dict(zip(self._seats, agents))  # seat -> PettingZoo agent
        self._agents = agents
        self._index = {agent: i for i, agent in enumerate(agents)}
        first = agents[0]
        for kind, space_of in (("observation", env.observation_space), ("action", env.action_space)):
            reference = space_of(first)
            for agent in agents[1:]:
                other = space_of(agent)
                if not _same_space(reference, other):
                    raise SpacesDifferError((first, agent), kind, (reference, other))
        self.spaces = BoxDiscreteSpaces(env.observation_space(first), env.action_space(first), "from_pettingzoo")
        self._pending_seed: Optional[int] = None
        self._draw_seeds = False
        self._live: List[Any] = []  # agents in the game, in possible_agents order
        self._last: Dict[Any, npt.NDArray[np.float32]] = {}  # agent -> its latest features
        self._truncated: Dict[Any, bool] = {}  # agent -> whether it left the game by truncation alone
        self._over = True

    def seats(self) -> List[Seat]:
        return list(self._seats)

    def obs_space(self) -> ObsSpace:
        return self.spaces.obs_space

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        return self.spaces.action_space

    def seed(self, seed: Optional[int]) -> None:
        """Seed the next ``reset`` with ``seed`` (``env.reset(seed=seed)``) and the seeds of the resets after it
        (drawn from ``self.rng``, which ``seed`` seeds too; ``None``: every reset unseeded)."""
        super().seed(seed)
        self._pending_seed = None if seed is None else int(seed)  # PettingZoo wants a Python int
        self._draw_seeds = seed is not None

    def reset(self) -> Dict[Seat, Observation]:
        where = "PettingZooEnvironment.reset"
        if self._pending_seed is not None:
            seed: Optional[int] = self._pending_seed
            self._pending_seed = None
        elif self._draw_seeds:
            seed = int(self.rng.integers(2**31 - 1))
        else:
            seed = None
        result = self.env.reset(seed=seed)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(
                f"{where}: {type(self.env).__name__}.reset returned {type(result).__name__}; expected "
                "(observations, infos) as in the PettingZoo Parallel API"
            )
        obs, infos = result
        self._live = self._in_game(None, None, where)
        if not self._live:
            raise ValueError(f"{where}: {type(self.env).__name__}.reset left no agent in env.agents")
        self._last = {}
        self._truncated = {}
        self._over = False
        live = set(self._live)
        return self._observations(obs, {}, infos, live, live, where)

    def act(self, actions: Mapping[Seat, SeatActions]) -> Dict[Seat, Observation]:
        where = "PettingZooEnvironment.act"
        if self._over:
            raise RuntimeError(f"{where}: the game is over (or was never started); call reset() first")
        check_by_seat(where, actions, self._seats, "actions")
        before = set(self._live)
        pz_actions: Dict[Any, Any] = {}
        for seat, agent in self.agent_of.items():
            chosen = actions[seat]
            if not isinstance(chosen, Mapping):
                raise TypeError(
                    f"{where}: actions['{seat}'] must be a mapping from action name to action, "
                    f"got {type(chosen).__name__}"
                )
            if agent in before:
                pz_actions[agent] = self.spaces.gym_action(chosen, f"{where}: seat '{seat}'")
            elif chosen:
                raise ValueError(
                    f"{where}: seat '{seat}' has no actors (agent {agent!r} is not in the game) but was given "
                    f"actions {list(chosen)}; give it an empty mapping"
                )
        result = self.env.step(pz_actions)
        if not (isinstance(result, tuple) and len(result) == 5):
            got = f"a {len(result)}-tuple" if isinstance(result, tuple) else type(result).__name__
            raise TypeError(
                f"{where}: {type(self.env).__name__}.step returned {got}; expected (observations, rewards, "
                "terminations, truncations, infos) as in the PettingZoo Parallel API"
            )
        obs, rewards, terminations, truncations, infos = result
        for name, value in (("rewards", rewards), ("terminations", terminations), ("truncations", truncations)):
            if not isinstance(value, Mapping):
                raise TypeError(f"{where}: step's {name} must be a mapping from agent, got {type(value).__name__}")
        self._live = self._in_game(terminations, truncations, where)
        after = set(self._live)
        for agent in before - after:
            self._truncated[agent] = bool(truncations.get(agent, False)) and not bool(terminations.get(agent, False))
        for agent in after - before:
            self._truncated.pop(agent, None)
        self._over = not self._live
        return self._observations(obs, rewards, infos, before, after, where)

    def _in_game(self, terminations: Optional[Mapping[Any, Any]], truncations: Optional[Mapping[Any, Any]],
                 where: str) -> List[Any]:
        """The agents of ``env.agents`` not terminated or truncated, in ``possible_agents`` order."""
        current = list(self.env.agents)
        unknown = [a for a in current if a not in self._index]
        if unknown:
            raise ValueError(
                f"{where}: env.agents holds {unknown}, which possible_agents lacks; the seats are fixed "
                f"({self._seats}), so every agent that can ever play must be in possible_agents"
            )
        ended = set()
        for flags in (terminations, truncations):
            ended.update(a for a, flag in (flags or {}).items() if flag)
        current_set = set(current)
        return [a for a in self._agents if a in current_set and a not in ended]

    def _observations(self, obs: Any, rewards: Mapping[Any, Any], infos: Any, before: set, after: set,
                      where: str) -> Dict[Seat, Observation]:
        if not isinstance(obs, Mapping):
            raise TypeError(f"{where}: observations must be a mapping from agent, got {type(obs).__name__}")
        infos = infos if isinstance(infos, Mapping) else {}
        out = {}
        for seat, agent in self.agent_of.items():
            if agent in obs:
                features = self.spaces.flat(obs[agent], f"{where}: agent {agent!r}")
                self._last[agent] = features
            elif agent in after:
                raise ValueError(
                    f"{where}: {type(self.env).__name__} gave no observation for agent {agent!r}, which is in the game"
                )
            else:
                last = self._last.get(agent)
                features = np.zeros(self.spaces.n_features, np.float32) if last is None else last.copy()
            playing = agent in before or agent in after
            out[seat] = Observation(
                global_features=features,
                actions=self.spaces.masks() if agent in after else {},
                done=self._over,
                truncated=self._over and self._truncated.get(agent, False),
                reward=float(rewards.get(agent, 0.0)) if playing else 0.0,
                metrics=_numeric_info(infos.get(agent)),
            )
        return out

    def render(self, **kwargs: Any) -> npt.NDArray[np.uint8]:
        """The wrapped environment's ``render()`` (its ``render_mode`` is set at creation)."""
        if kwargs:
            raise TypeError(
                f"PettingZooEnvironment.render takes no arguments (PettingZoo sets render_mode when the "
                f"environment is created); got {sorted(kwargs)}"
            )
        frame = self.env.render()
        if frame is None:
            raise ValueError(
                f"PettingZooEnvironment.render: {type(self.env).__name__}.render() returned None; create it "
                "with render_mode='rgb_array'"
            )
        return frame

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()


def _same_space(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a space whose __eq__ fails on the other kind of space
        return False


__all__ = ["PettingZooEnvironment", "SpacesDifferError", "from_pettingzoo"]
