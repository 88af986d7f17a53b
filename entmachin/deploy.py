"""Running an exported policy (``entmachin export``) with numpy and onnxruntime only.

Importing this module never imports torch: a game server, a simulation or a test harness that
only acts with a trained policy needs numpy, onnxruntime and entmachin's environment layer.

Example:
    >>> from entmachin.deploy import OnnxPolicy
    >>> policy = OnnxPolicy("policy.onnx")
    >>> obs = env.reset()
    >>> while not obs.done:
    ...     obs = env.act(policy.act(obs))           # the most likely action of every actor
    >>> policy.act(obs, deterministic=False, rng=np.random.default_rng(0))   # sampled

Memory: a policy whose network has memory (``model.memory``) keeps a state per game between calls:
``act(obs, game=KEY)`` carries the state of game ``KEY`` (any hashable; default 0) and ``reset(KEY)``
forgets it when that game's episode begins again; ``act_batch`` keeps one state per row of the batch and
starts a row's next episode where the batch says its episode ended (``VecObs.done``), as the
vectorised environments report it. A policy that keeps a state per entity (``model.memory.per_entity``) keeps
it by the entities' ids (``Observation.ids``; ``VecObs.ids``, which ``EnvList`` passes), as training does.

Continuous actions: the graph gives each actor's distribution parameters and deterministic
value (``point/<a>``); sampling draws from those parameters here, in numpy, within each actor's
bounds (``entmachin.model.continuous`` is the same rule in torch).
"""
from __future__ import annotations

import json
import logging
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from entmachin import export_checksum
from entmachin.deploy_checks import check_batch
from entmachin.deploy_memory import Carried, memory_feeds
from entmachin.env.action import CONTINUOUS_SPACES, GLOBAL_SPACES, Action, SelectEntityActionSpace
from entmachin.env.batch import batch_obs
from entmachin.env.canonical import to_state
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.env_list import to_env_actions
from entmachin.env.episodes import EvalResult, eval_budget, run_episodes
from entmachin.env.environment import Observation
from entmachin.env.spaces import spaces_from_record
from entmachin.env.time_limit import TimeLimit
from entmachin.env.validator import validate_observation
from entmachin.env.vec_env import VecObs
from entmachin.ragged.array import RaggedArray
from entmachin.ragged.arrays import ragged_from_arrays

__all__ = ["FORMAT", "OnnxPolicy", "PolicyFileError"]

#: ``entmachin.format`` in an exported file's metadata.
FORMAT = "entmachin-policy/1"
#: A continuous action's distributions (``entmachin.continuous`` in the metadata) and the graph
#: outputs holding their parameters (``RogueNetConfig.continuous`` names the same two).
DISTRIBUTIONS = {"beta": ("alpha", "beta"), "squashed_gaussian": ("mean", "log_std")}

logger = logging.getLogger(__name__)


class PolicyFileError(ValueError):
    """A file that is not an entmachin export (or one of a format this version cannot run)."""


class OnnxPolicy:
    """An exported policy (or Q-network), run by onnxruntime.

    Args:
        path: the ``.onnx`` file ``entmachin export`` wrote.
        threads: onnxruntime's intra-op threads (1: one core, the predictable choice inside a
            game loop; 0: onnxruntime's default, every core).
        providers: onnxruntime execution providers (default: the CPU).

    Attributes:
        obs_space / action_space: the spaces the policy was trained on (None for dense models).
        kind: ``"rogue-net policy"``, ``"rogue-net q"``, ``"dense-net policy"`` (``model.kind: mlp``;
            observations as a RogueNet's), ``"mlp policy"`` or ``"mlp q"`` (``act_dense``).
        continuous: continuous action name -> its distribution, ``"beta"`` or ``"squashed_gaussian"``.
        memory_size: floats of recurrent state per game (``model.memory``; 0: a feed-forward policy).
        entity_memory_size: floats of recurrent state per entity (``model.memory.per_entity``; else 0).
        metadata: every ``entmachin.*`` entry of the file's metadata, JSON decoded.

    Raises:
        PolicyFileError: the file does not exist, is not ONNX, is not an entmachin export, or
            differs from the checksum its export recorded (naming what differs: the graph, a weight,
            the metadata). A file exported before exports carried a checksum loads with a warning.
        ImportError: onnxruntime is not installed (``pip install entmachin[export]``).
    """

    def __init__(self, path: str, *, threads: int = 1, providers: Optional[list] = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ImportError(f"OnnxPolicy needs onnxruntime ({e}): pip install 'entmachin[export]' "
                              "(or onnxruntime alone)") from None

        self.path = str(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:  # read once: the bytes checked are the bytes onnxruntime runs
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise PolicyFileError(f"{self.path}: cannot be read ({e.strerror or e})") from None
        try:
            self.session = ort.InferenceSession(data, options, providers=providers or ["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own types (and RuntimeError) for unreadable files
            raise PolicyFileError(f"{self.path}: not an ONNX model onnxruntime can load "
                                  f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
        props = self.session.get_modelmeta().custom_metadata_map
        if props.get("entmachin.format") != FORMAT:
            raise PolicyFileError(
                f"{self.path}: not an entmachin export (its metadata has entmachin.format="
                f"{props.get('entmachin.format')!r}; expected {FORMAT!r}); write one with `entmachin export RUN_DIR`")
        self._check(data)
        self.metadata: Dict[str, Any] = {}
        for key, value in props.items():
            if key.startswith("entmachin."):
                try:
                    self.metadata[key[len("entmachin."):]] = json.loads(value)
                except ValueError:
                    self.metadata[key[len("entmachin."):]] = value
        self.kind: str = self.metadata["kind"]
        self.obs_space, self.action_space = None, None
        if "spaces" in self.metadata:
            self.obs_space, self.action_space = spaces_from_record(self.metadata["spaces"], f"{self.path} metadata")
        self.continuous: Dict[str, str] = dict(self.metadata.get("continuous") or {})
        for name, space in (self.action_space or {}).items():
            if isinstance(space, CONTINUOUS_SPACES) and self.continuous.get(name) not in DISTRIBUTIONS:
                raise PolicyFileError(
                    f"{self.path}: continuous action {name!r} has distribution {self.continuous.get(name)!r} in "
                    f"the metadata's entmachin.continuous; expected one of {list(DISTRIBUTIONS)} (export it again "
                    "with this version)")
        self._values = "q" if self.kind.endswith(" q") else "probs"
        self._outputs = [o.name for o in self.session.get_outputs()]
        self._rng = np.random.default_rng()
        self.memory_size = int((self.metadata.get("memory") or {}).get("state_size", 0))
        self.entity_memory_size = int((self.metadata.get("entity_memory") or {}).get("state_size", 0))
        self._games: Dict[Any, Carried] = {}  # act(): each game's states
        self._rows: Optional[Carried] = None  # act_batch(): each row's states
        self._next: Tuple[Any, Dict[str, np.ndarray]] = (None, {})  # the last run's next states (rows', entities')

    def __repr__(self) -> str:
        return f"OnnxPolicy({self.path!r}, kind={self.kind!r})"

    def _check(self, data: bytes) -> None:
        """Refuses a file whose graph, weights or metadata differ from its export's checksum."""
        try:
            saved = export_checksum.recorded(data)
            if saved is None:
                logger.warning("%s: exported before exports carried a checksum; it cannot be checked for damage "
                               "(export it again to add one)", self.path)
                return
            differ = export_checksum.differences(data, saved)
        except export_checksum.ChecksumError as e:
            raise PolicyFileError(f"{self.path}: damaged: {e}") from None
        if differ:
            raise PolicyFileError(f"{self.path}: damaged or changed since it was exported: {'; '.join(differ)}")

    # ---------------------------------------------------------------- entity policies

    def act(self, observation: Observation, deterministic: bool = True,
            rng: Optional[np.random.Generator] = None, *, game: Any = 0) -> Dict[str, Action]:
        """The actions of one environment's observation, as its ``Environment.act`` takes them.

        Args:
            observation: one environment's (or one seat's) observation.
            deterministic: each actor's most likely choice (continuous: ``point/<a>``, the distribution's mean
                within the bounds); False samples, drawing from ``rng`` (default: this policy's own generator).
            game: with memory, whose state this observation continues (any hashable key); the first call
                for a game, and the first after :meth:`reset`, begins its episode.

        Returns:
            action name -> ``CategoricalAction``, ``SelectEntityAction``, ``GlobalCategoricalAction``,
            ``ContinuousAction`` or ``GlobalContinuousAction`` (float32 values within each actor's bounds).

        Raises:
            TypeError / ValueError: an observation that does not fit the stored spaces (an unknown entity type or
                action, a wrong number of features, a mask of the wrong width), named; with per-entity memory, an
                entity without an id, an id given twice, or an id that named an entity of another type earlier in
                the game's episode.
        """
        self._entity_policy("act")
        validate_observation(observation, self.obs_space, self.action_space, where=f"{self.path}: observation")
        vec = batch_obs([observation], self.obs_space, self.action_space)
        carried = self._games.get(game) or self._carried(1)
        recurrent = carried.inputs(vec, None, f"{self.path}: game {game!r}") if carried else None
        out = self._run_vec(vec, deterministic, rng, recurrent)
        if carried:
            carried.keep(*self._next)
            self._games[game] = carried
        choices = {name: chosen for name, (chosen, _) in out.items()}
        probs = {name: p for name, (_, p) in out.items()}
        return to_env_actions(self.obs_space, self.action_space, choices, observation, probs)

    def act_batch(self, vec_obs: VecObs, deterministic: bool = True,
                  rng: Optional[np.random.Generator] = None) -> Dict[str, RaggedArray]:
        """The actions of ``vec_obs``, a batch of observations, as ``VecEnv.act`` takes them: action name -> int64
        ragged ``[n_actors, 1]`` (select-entity: positions in the row's actee list; continuous: float32 ragged
        ``[n_actors, n_values]``, within each actor's bounds); ``deterministic`` and ``rng`` as :meth:`act`.

        Raises:
            TypeError / ValueError: a batch that does not fit the stored spaces, named; with per-entity
                memory, a batch without ``ids`` or ids that break their contract (as :meth:`act`).
        """
        self._entity_policy("act_batch")
        check_batch(vec_obs, self.obs_space, self.action_space, f"{self.path}: observations")
        lengths = {name: vec_obs.action_masks[name].actors.size1() for name in self.action_space}
        if self.memory_size and (self._rows is None or self._rows.n_rows != len(vec_obs)):
            self._rows = self._carried(len(vec_obs))
        recurrent = self._rows.inputs(vec_obs, vec_obs.done, f"{self.path}: act_batch") if self.memory_size else None
        out = {}
        for name, (chosen, _) in self._run_vec(vec_obs, deterministic, rng, recurrent).items():
            if isinstance(self.action_space[name], CONTINUOUS_SPACES):
                out[name] = ragged_from_arrays(chosen, lengths[name], np.float32)  # [n_actors, n_values]
            else:
                out[name] = ragged_from_arrays(chosen.reshape(-1, 1), lengths[name])  # [n_actors, 1]
        if self.memory_size:
            self._rows.keep(*self._next)
        return out

    def _carried(self, n_rows: int) -> Optional[Carried]:
        """Fresh states for ``n_rows`` rows (None without memory)."""
        types = list(self.obs_space.entities)
        return Carried(n_rows, self.memory_size, self.entity_memory_size, types) if self.memory_size else None

    def reset(self, game: Any = None) -> None:
        """Forgets the recurrent states (a policy with memory: the game's and its entities') of ``game``
        (:meth:`act`'s key), or with None of every game and of :meth:`act_batch`'s rows: their next call begins
        an episode."""
        if game is None:
            self._games, self._rows = {}, None
        else:
            self._games.pop(game, None)

    def outputs(self, vec_obs: VecObs, noise: Optional[Mapping[str, np.ndarray]] = None,
                memory: Optional[np.ndarray] = None, episode_start: Optional[np.ndarray] = None,
                entity_memory: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """Every output of the graph for the batch ``vec_obs`` (``probs/<a>`` or ``q/<a>``, ``argmax/<a>``,
        ``sample/<a>``, ``counts/<a>``; continuous: ``point/<a>`` and the parameters, ``alpha/<a>`` and ``beta/<a>`` or
        ``mean/<a>`` and ``log_std/<a>``; with memory ``memory_out``, and per entity ``entity_memory_out/<t>``), with
        the given uniform ``noise`` per discrete action (default 0) and, with memory, the rows' states (``memory``:
        float32 ``[B, memory_size]``), ``episode_start`` (bool ``[B]``; default: every row begins an episode) and each
        entity type's states (``entity_memory``: type -> float32 ``[N_t, entity_memory_size]`` in the batch's entity
        order; default zeros). The states :meth:`act` and :meth:`act_batch` keep are neither read nor changed."""
        self._entity_policy("outputs")
        check_batch(vec_obs, self.obs_space, self.action_space, f"{self.path}: observations")
        feeds = self.feeds(vec_obs, noise, memory, episode_start, entity_memory)
        return dict(zip(self._outputs, self.session.run(self._outputs, feeds)))

    def feeds(self, vec_obs: VecObs, noise: Optional[Mapping[str, np.ndarray]] = None,
              memory: Optional[np.ndarray] = None, episode_start: Optional[np.ndarray] = None,
              entity_memory: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
        """The graph's inputs for the batch ``vec_obs``, named as the documentation's export guide lists them
        (a continuous action's ``low/<a>`` and ``high/<a>``: each actor's bounds, the space's where the batch does
        not narrow them); ``noise``, ``memory``, ``episode_start`` and ``entity_memory`` as :meth:`outputs`."""
        state = to_state(vec_obs, self.action_space)
        entities, visible = state["entities"], state.get("visible", {})
        feeds: Dict[str, np.ndarray] = {}
        for t, entity in self.obs_space.entities.items():
            ragged = entities[t]
            feeds[f"features/{t}"] = ragged.as_array().reshape(ragged.items(), len(entity.features))
            feeds[f"lengths/{t}"] = ragged.size1().astype(np.int64)
            n = feeds[f"features/{t}"].shape[0]
            feeds[f"visible/{t}"] = visible[t].as_array().reshape(-1) if t in visible else np.ones(n, np.bool_)
        if self.obs_space.global_features:
            feeds["global_features"] = entities[GLOBAL_ENTITY].as_array()
        for name, space in self.action_space.items():
            mask = state["action_masks"][name]
            actors = mask["actors"]
            feeds[f"actor_lengths/{name}"] = actors.size1().astype(np.int64)
            n_actors = actors.items()
            if not isinstance(space, GLOBAL_SPACES):
                feeds[f"actors/{name}"] = actors.as_array().reshape(-1)
            if isinstance(space, CONTINUOUS_SPACES):
                for side in ("low", "high"):  # to_state fills in the space's bounds
                    feeds[f"{side}/{name}"] = mask[side].as_array().reshape(n_actors, len(space))
                continue
            if isinstance(space, SelectEntityActionSpace):
                feeds[f"actees/{name}"] = mask["actees"].as_array().reshape(-1)
                feeds[f"actee_lengths/{name}"] = mask["actees"].size1().astype(np.int64)
                feeds[f"actee_mask/{name}"] = mask["actee_mask"].as_array().reshape(-1)
            else:
                feeds[f"mask/{name}"] = mask["mask"].as_array()
            given = None if noise is None else noise.get(name)
            feeds[f"noise/{name}"] = (np.zeros(n_actors, np.float32) if given is None
                                      else np.asarray(given, np.float32).reshape(n_actors))
        if self.memory_size:
            memory_feeds(feeds, len(vec_obs), (self.memory_size, self.entity_memory_size),
                         list(self.obs_space.entities), self.path, memory, episode_start, entity_memory)
        return feeds

    def _run_vec(self, vec: VecObs, deterministic: bool, rng: Optional[np.random.Generator],
                 recurrent: Optional[Tuple[Any, ...]] = None) -> Dict[str, Any]:
        """action name -> (int64 choices ``[n_actors]``, the probabilities or Q-values per actor), or
        for a continuous action (float32 values ``[n_actors, n_values]``, None); with memory, ``recurrent``
        is the rows' states, episode starts and entities' states, and the next states are left in ``_next``."""
        noise = None
        rng = rng if rng is not None else self._rng
        if not deterministic:
            noise = {name: rng.random(vec.action_masks[name].actors.items(), dtype=np.float32)
                     for name, space in self.action_space.items() if not isinstance(space, CONTINUOUS_SPACES)}
        feeds = self.feeds(vec, noise, *(recurrent or ()))
        out = dict(zip(self._outputs, self.session.run(self._outputs, feeds)))
        self._next = (out.get("memory_out"), {t: out[f"entity_memory_out/{t}"] for t in self.obs_space.entities
                                               if f"entity_memory_out/{t}" in out})
        pick = "argmax" if deterministic else "sample"
        result: Dict[str, Tuple[np.ndarray, Optional[np.ndarray]]] = {}
        for name, space in self.action_space.items():
            if isinstance(space, CONTINUOUS_SPACES):
                values = out[f"point/{name}"] if deterministic else \
                    self._sample(name, out, feeds[f"low/{name}"], feeds[f"high/{name}"], rng)
                result[name] = (values, None)
                continue
            values = out[f"{self._values}/{name}"]
            if isinstance(space, SelectEntityActionSpace):
                counts = out[f"counts/{name}"]
                values = values.reshape(len(counts), -1) if len(counts) and len(set(counts.tolist())) == 1 else values
            result[name] = (out[f"{pick}/{name}"], values)
        return result

    def _sample(self, name: str, out: Mapping[str, np.ndarray], low: np.ndarray, high: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
        """Values drawn from action ``name``'s distribution, within ``[low, high]``, as
        ``entmachin.model.continuous.bounded`` samples them.

        Shape:
            low, high and the graph's parameters: float32 ``[n_actors, n_values]``; returns float32
            ``[n_actors, n_values]``.
        """
        first, second = (out[f"{p}/{name}"].astype(np.float64) for p in DISTRIBUTIONS[self.continuous[name]])
        if self.continuous[name] == "beta":
            unit = rng.beta(first, second)  # [n_actors, n_values] in [0, 1]
        else:  # mean and log std of the Gaussian before tanh
            unit = (np.tanh(first + np.exp(second) * rng.standard_normal(first.shape)) + 1.0) * 0.5
        values = (low + unit * (high.astype(np.float64) - low)).astype(np.float32)
        return np.minimum(np.maximum(values, low), high)  # rounding never leaves the bounds

    def _entity_policy(self, method: str) -> None:
        if self.obs_space is None:
            raise TypeError(f"{self.path}: a dense {self.kind} takes feature vectors: use act_dense(), not {method}()")

    def evaluate(self, make_env: Any, episodes: int, deterministic: bool = True, seed: Optional[int] = None, *,
                 num_envs: Optional[int] = None, max_steps: Optional[int] = None,
                 max_episode_steps: Optional[int] = None, check_finite: Optional[bool] = None,
                 rng: Optional[np.random.Generator] = None) -> EvalResult:
        """Episodic returns of this policy, as ``entmachin.frame.evaluate`` gives a frame's.

        What is not given comes from the run the file was exported from (``entmachin export``
        stores how the run evaluates, ``metadata["evaluation"]``): its seed, its environment's step
        limit, ``min(episodes, 128)`` environments and its step cap, so the same actions give the
        returns ``entmachin eval RUN_DIR --deterministic`` prints. A file without them (written by
        ``export_policy`` from Python) runs unseeded, on 16 environments, for at most 10,000 steps.

        Args:
            make_env: builds one environment (a class or any callable).
            episodes: episodes to run, >= 1.
            deterministic: as :meth:`act`.
            seed: seeds the environments.
            num_envs: most environments stepped together.
            max_steps: vectorised steps after which unfinished episodes count with the return they have so far.
            max_episode_steps: cut each episode there (``TimeLimit``; truncated, as the run's environments were).
            check_finite: stop with an error at a NaN or infinite observation or reward.
            rng: as :meth:`act`.
        """
        self._entity_policy("evaluate")
        run = self.metadata.get("evaluation") or {}
        seed = run.get("seed") if seed is None else seed
        limit = run.get("max_episode_steps") if max_episode_steps is None else max_episode_steps
        default_envs, default_steps = eval_budget(episodes, run["episode_cap"]) if run else (16, 10_000)
        make = make_env if limit is None else (lambda: TimeLimit(make_env(), limit))
        self._rows = None  # fresh episodes
        return run_episodes(lambda obs, space: self.act_batch(obs, deterministic, rng), make, episodes, seed,
                            num_envs=num_envs or default_envs, max_steps=max_steps or default_steps,
                            check_finite=run.get("check_finite", True) if check_finite is None else check_finite)

    # ---------------------------------------------------------------- dense models

    def act_dense(self, state: np.ndarray, mask: Optional[np.ndarray] = None, deterministic: bool = True,
                  rng: Optional[np.random.Generator] = None) -> np.ndarray:
        """The choices of an exported ``MLPActor`` / ``MLPQNet`` for ``state`` float ``[B, d_state]`` (``mask``: bool
        ``[B, n_actions]``, default all allowed); returns int64 ``[B]``. ``deterministic`` and ``rng`` are as in
        :meth:`act`."""
        if self.obs_space is not None:
            raise TypeError(f"{self.path}: an entity {self.kind} takes observations: use act() or act_batch()")
        dense = self.metadata["dense"]
        state = np.asarray(state, np.float32)
        if state.ndim != 2 or state.shape[1] != dense["d_state"]:
            raise ValueError(f"{self.path}: state has shape {state.shape}; expected [B, {dense['d_state']}]")
        n = state.shape[0]
        mask = np.ones((n, dense["n_actions"]), np.bool_) if mask is None else np.asarray(mask, np.bool_)
        if mask.shape != (n, dense["n_actions"]):
            raise ValueError(f"{self.path}: mask has shape {mask.shape}; expected [B, {dense['n_actions']}]")
        noise = np.zeros(n, np.float32)
        if not deterministic:
            noise = (rng if rng is not None else self._rng).random(n, dtype=np.float32)
        best, sample = self.session.run(["argmax", "sample"], {"state": state, "mask": mask, "noise": noise})
        return best if deterministic else sample
