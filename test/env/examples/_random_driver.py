"""A small random-action driver for the example environments' tests.

It reads each observation's masks, checks the observation's layout against the environment's
spaces, and picks a random allowed choice for every actor: enough to exercise an environment
without the vectorised machinery.
"""
from typing import Dict, List, Optional, Sequence

import numpy as np

from entmachin.env import (
    Action,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    EntityID,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
)


def check_observation(env: Environment, obs: Observation) -> None:
    """Fail the test unless ``obs`` has the layout that ``env``'s spaces promise."""
    space = env.obs_space()
    for etype, entity in space.entities.items():
        feats = obs.features[etype]
        assert isinstance(feats, np.ndarray) and feats.dtype == np.float32, etype
        assert feats.ndim == 2 and feats.shape[1] == len(entity.features), (etype, feats.shape)
        if etype in obs.ids:
            assert len(obs.ids[etype]) == feats.shape[0], etype
    assert set(obs.features) == set(space.entities)
    if space.global_features:
        glob = obs.global_features
        assert isinstance(glob, np.ndarray) and glob.dtype == np.float32
        assert glob.shape == (len(space.global_features),)
    assert set(obs.actions) == set(env.action_space())
    assert isinstance(obs.reward, float)
    assert not obs.truncated or obs.done


def _ids(
    obs: Observation,
    space: ObsSpace,
    ids: Optional[Sequence[EntityID]],
    types: Optional[Sequence[str]],
) -> List[EntityID]:
    if ids is not None:
        return list(ids)
    return [eid for etype in (space.entities if types is None else types) for eid in obs.ids[etype]]


def random_actions(env: Environment, obs: Observation, rng: np.random.Generator) -> Dict[str, Action]:
    """One random allowed choice per actor of every action in ``obs``."""
    space, actions = env.obs_space(), {}
    for name, action_space in env.action_space().items():
        mask = obs.actions[name]
        if isinstance(mask, GlobalCategoricalActionMask):
            assert isinstance(action_space, GlobalCategoricalActionSpace)
            n = len(action_space.index_to_label)
            allowed = np.ones(n, np.bool_) if mask.mask is None else np.asarray(mask.mask).reshape(n)
            index = int(rng.choice(np.flatnonzero(allowed)))
            actions[name] = GlobalCategoricalAction(index, action_space.index_to_label[index])
            continue
        actors = _ids(obs, space, mask.actor_ids, mask.actor_types)
        if isinstance(mask, CategoricalActionMask):
            assert isinstance(action_space, CategoricalActionSpace)
            n = len(action_space.index_to_label)
            rows = np.ones((len(actors), n), np.bool_) if mask.mask is None else np.asarray(mask.mask)
            assert rows.shape == (len(actors), n), (name, rows.shape)
            indices = np.array([rng.choice(np.flatnonzero(row)) for row in rows], dtype=np.int64)
            actions[name] = CategoricalAction(actors, indices, action_space.index_to_label)
        else:
            assert isinstance(mask, SelectEntityActionMask)
            actees = _ids(obs, space, mask.actee_ids, mask.actee_types)
            chosen = [actees[int(rng.integers(len(actees)))] for _ in actors]
            actions[name] = SelectEntityAction(actors, chosen)
    return actions


def random_run(env: Environment, n_steps: int, seed: int) -> List[Observation]:
    """Seed ``env``, play ``n_steps`` random steps (resetting after each episode), checking
    every observation; returns all observations, initial ones included."""
    rng = np.random.default_rng(seed)
    env.seed(seed)
    obs = env.reset()
    check_observation(env, obs)
    history = [obs]
    for _ in range(n_steps):
        obs = env.act(random_actions(env, obs, rng))
        check_observation(env, obs)
        history.append(obs)
        if obs.done:
            obs = env.reset()
            check_observation(env, obs)
            assert not obs.done
            history.append(obs)
    return history


def same_observations(a: Sequence[Observation], b: Sequence[Observation]) -> bool:
    """Whether two observation histories agree in features, ids, rewards and end flags."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if (x.reward, x.done, x.truncated) != (y.reward, y.done, y.truncated) or x.ids != y.ids:
            return False
        if set(x.features) != set(y.features):
            return False
        if any(not np.array_equal(x.features[k], y.features[k]) for k in x.features):
            return False
        if not np.array_equal(np.asarray(x.global_features), np.asarray(y.global_features)):
            return False
    return True
