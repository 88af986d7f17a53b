"""``entmachin eval``: a run's latest checkpoint (or another version, or its best), rebuilt from its config and
evaluated."""
from __future__ import annotations

import contextlib
import json
import math
import os
from typing import Any, Dict, Iterator, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch

from entmachin.env import random_actions
from entmachin.env.episodes import EVAL_MAX_ENVS, eval_budget
from entmachin.frame import EvalResult, evaluate
from entmachin.frame.checkpoint import latest_version, read_frame_checkpoint
from entmachin.frame.checkpoint_files import manifest_versions, read_blob, read_manifest
from entmachin.run.best import BEST, best_dir, best_version
from entmachin.run.build import make_frame, seeds
from entmachin.run.envs import EnvFactory, env_layout
from entmachin.run.config import RunConfig
from entmachin.run.defaults import DEFAULT_MAX_EPISODE_STEPS
from entmachin.run.logs import RunError, load_run_config
from entmachin.run.spaces import space_differences, spaces_record

__all__ = ["Evaluation", "Version", "checkpoint_version", "describe_checkpoint", "differ_widely", "eval_envs", "eval_options",
           "eval_settings", "evaluate_both_ways", "evaluate_checkpoint", "load_trained", "random_policy_return",
           "run_dir_of"]

Version = Union[int, str]  # a checkpoint's environment steps, or "best" (``log.best``)


def eval_envs(episodes: int) -> int:
    """Environments of an evaluation: one episode each up to ``EVAL_MAX_ENVS`` (wide batches, no length bias)."""
    return min(episodes, EVAL_MAX_ENVS)


def eval_settings(config: RunConfig) -> Dict[str, Any]:
    """How a run evaluates, beyond the number of episodes (an export of the run carries it as
    ``entmachin.evaluation``, for ``OnnxPolicy.evaluate``): the seed (``train.seed + 1,000,003``),
    the environment's step limit (``env.max_episode_steps``), the steps after which an episode is
    counted as it stands (``log.eval_max_steps``; by default the step limit, or 1000 without one)
    and the finite check (``env.check_finite``)."""
    return {"seed": seeds(config)["eval"], "max_episode_steps": config.env.max_episode_steps,
            "episode_cap": config.log.eval_max_steps or config.env.max_episode_steps or DEFAULT_MAX_EPISODE_STEPS,
            "check_finite": config.env.check_finite}


def eval_options(config: RunConfig, episodes: int) -> Dict[str, Any]:
    """``evaluate``'s keywords for a run's evaluation of ``episodes`` episodes: its environments,
    its step cap (:func:`eval_settings`' ``episode_cap`` per episode) and the finite check."""
    settings = eval_settings(config)
    num_envs, max_steps = eval_budget(episodes, settings["episode_cap"])
    return {"num_envs": num_envs, "max_steps": max_steps, "check_finite": settings["check_finite"]}


def _names_best(path: str) -> bool:
    """Whether ``path`` is a run's ``checkpoints/best`` directory."""
    path = os.path.normpath(path)
    return os.path.basename(path) == BEST and os.path.basename(os.path.dirname(path)) == "checkpoints" and \
        os.path.exists(os.path.join(os.path.dirname(os.path.dirname(path)), "config.yaml"))


def run_dir_of(path: str) -> str:
    """The run directory ``path`` names: itself, or the run above its ``checkpoints/`` (or ``checkpoints/best``)
    directory."""
    path = os.path.normpath(path)
    if _names_best(path):
        return os.path.dirname(os.path.dirname(path))
    if os.path.basename(path) == "checkpoints" or not os.path.exists(os.path.join(path, "config.yaml")):
        parent = os.path.dirname(path)
        if os.path.exists(os.path.join(parent, "config.yaml")):
            return parent
    return path


def checkpoint_version(path: str, version: Optional[Version] = None) -> Tuple[str, int]:
    """The directory and version of the checkpoint ``path`` and ``version`` name: a run directory (or its
    ``checkpoints/``) and the version's environment steps (default: the latest) or ``"best"``; or a run's
    ``checkpoints/best`` directory (its best checkpoint).

    Raises:
        RunError: not a run directory, no checkpoint (of that version), or no best checkpoint.
    """
    run_dir = run_dir_of(path)
    if _names_best(path):
        if version not in (None, BEST):
            raise RunError(f"{path!r} is a run's best checkpoint; --checkpoint {version} names another (give the run "
                           "directory with --checkpoint STEPS)")
        version = BEST
    config = load_run_config(run_dir)
    checkpoint_dir = os.path.join(run_dir, "checkpoints")
    try:
        latest = latest_version(checkpoint_dir)
    except FileNotFoundError:  # its message names the caller; this one serves every command
        missing = "does not exist" if not os.path.isdir(checkpoint_dir) else "holds no checkpoint_<version>.json"
        raise RunError(f"{run_dir!r} holds no checkpoint yet: {checkpoint_dir!r} {missing} (a run saves one every "
                       "log.checkpoint_interval steps, and when it ends)") from None
    if version == BEST:
        if (best := best_version(checkpoint_dir)) is None:
            why = ("its log.best is null: set log.best to keep one" if config.log.best is None else
                   f"no evaluation has been done yet (log.best: {config.log.best})")
            raise RunError(f"{run_dir!r} has no best checkpoint: {best_dir(checkpoint_dir)!r} holds none ({why})")
        return best_dir(checkpoint_dir), best
    if version is None:
        return checkpoint_dir, latest
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunError(f"--checkpoint {version!r}: expected a checkpoint's environment steps or {BEST!r}")
    if version not in (saved := manifest_versions(checkpoint_dir)):
        raise RunError(f"{checkpoint_dir!r} holds no checkpoint of version {version}; it holds {saved}")
    return checkpoint_dir, version


def describe_checkpoint(path: str, version: Optional[Version] = None) -> str:
    """Which checkpoint ``path`` and ``version`` name, in words: ``checkpoint 512 (the latest)``, ``the best
    checkpoint (256 steps, win rate against scripted 0.750)``."""
    directory, steps = checkpoint_version(path, version)
    if os.path.basename(directory) != BEST:
        return f"checkpoint {steps}{' (the latest)' if version is None and not _names_best(path) else ''}"
    manifest = read_manifest(directory, steps)
    try:
        best = json.loads(read_blob(directory, manifest, "runner").decode())["best"]
        figure = "mean return" if best["figure"] == "return" else f"win rate against {best['figure']}"
        return f"the best checkpoint ({steps} steps, {figure} {best['value']:.3f} in the run's evaluations)"
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        return f"the best checkpoint ({steps} steps)"


def load_trained(path: str, env_factory: Optional[EnvFactory] = None,
                 version: Optional[Version] = None) -> Tuple[Any, RunConfig, EnvFactory]:
    """The frame of a run directory's checkpoint, its config and its environment factory.

    Args:
        path: a run directory or its ``checkpoints/`` directory, or its ``checkpoints/best``
            directory (its best checkpoint).
        env_factory: the environment to use the policy in (default: the run's): an ``EnvFactory``
            or any callable that builds one (an environment class); its spaces must be those the
            checkpoint was trained on.
        version: the checkpoint's version (its environment steps; default: the latest), or
            ``"best"``: the run's best checkpoint (``log.best``).

    Raises:
        RunError: not a run directory, no checkpoint (of that version), no best checkpoint, or
            an environment with other spaces.
        CheckpointError: a damaged checkpoint.
    """
    checkpoint_dir, version = checkpoint_version(path, version)
    config = load_run_config(run_dir_of(path))
    factory = env_factory or EnvFactory(config.env)
    obs_space, action_space, _ = env_layout(factory)
    current = spaces_record(obs_space, action_space)
    saved = _saved_spaces(checkpoint_dir, version)
    if saved is not None and saved != current:
        name = getattr(factory, "name", None) or getattr(factory, "__name__", repr(factory))
        raise RunError(f"{checkpoint_dir!r} was trained on other spaces than {name}'s: "
                       + "; ".join(space_differences(saved, current)))
    frame, _ = make_frame(config, obs_space, action_space)
    loaded = read_frame_checkpoint(frame, checkpoint_dir, None, version, extra_keys=())  # no environment state
    loaded.apply()
    return frame, config, factory


def _saved_spaces(checkpoint_dir: str, version: int) -> Optional[dict]:
    """The spaces a run's checkpoint was trained on (None: not recorded)."""
    manifest = read_manifest(checkpoint_dir, version)
    if "runner" not in manifest.files:
        return None
    try:
        return json.loads(read_blob(checkpoint_dir, manifest, "runner").decode()).get("spaces")
    except (ValueError, UnicodeDecodeError):
        return None


def evaluate_checkpoint(path: str, episodes: int, deterministic: bool, seed: Optional[int],
                        version: Optional[Version] = None) -> EvalResult:
    return evaluate_both_ways(path, episodes, deterministic, seed, both=False, version=version).asked


class Evaluation(NamedTuple):
    """An evaluation of a run's checkpoint: the returns of the asked actions (most likely, or
    sampled), those of the other kind on the same environments (None: not evaluated), and a line
    saying how the environments were set up."""

    asked: EvalResult
    other: Optional[EvalResult]
    settings: str


def evaluate_both_ways(path: str, episodes: int, deterministic: bool, seed: Optional[int],
                       both: bool = True, version: Optional[Version] = None) -> Evaluation:
    """``entmachin eval``: the run's way (:func:`eval_settings`), or with ``seed``; ``both``: the
    other kind of actions too (sampled after most likely, or the reverse); ``version``: as
    :func:`load_trained` takes it."""
    frame, config, factory = load_trained(path, version=version)
    settings, options = eval_settings(config), eval_options(config, episodes)
    chosen = settings["seed"] if seed is None else seed

    def run(most_likely: bool) -> EvalResult:
        with seeded_sampling(chosen):  # as the run's evaluations: its eval.json figure at the run's seed
            return evaluate(frame, factory, episodes, deterministic=most_likely, seed=chosen, **options)

    asked = run(deterministic)  # first: sampling draws what it drew before the other kind was added
    other = run(not deterministic) if both else None
    limit = settings["max_episode_steps"]
    whose = " (the run's: train.seed + 1,000,003; --seed to change)" if seed is None else ""
    line = (f"{describe_checkpoint(path, version)}; {'most likely' if deterministic else 'sampled'} actions; seed {chosen}{whose}, {options['num_envs']} "
            f"environment{'s' if options['num_envs'] > 1 else ''}, step limit {'none' if limit is None else limit} (env.max_episode_steps), an unfinished "
            f"episode counted as it stands after {settings['episode_cap']} steps (log.eval_max_steps)")
    return Evaluation(asked, other, line)


@contextlib.contextmanager
def seeded_sampling(seed: int) -> Iterator[None]:
    """Torch's generators seeded with ``seed`` inside the block and restored after it, so that an
    evaluation samples the same actions whoever runs it: the run's own evaluations, ``entmachin eval``."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else []):
        torch.manual_seed(seed)
        yield


def differ_widely(a: EvalResult, b: EvalResult) -> bool:
    """Whether two evaluations' mean returns differ by more than three standard errors of the
    difference and by more than a tenth of the larger one's size (beyond noise, and by enough to
    choose between them)."""
    gap = abs(a.mean - b.mean)
    noise = 3.0 * math.sqrt(sum(float(np.var(r.returns)) / len(r.returns) for r in (a, b)))
    return gap > noise and gap > 0.1 * max(abs(a.mean), abs(b.mean))


class _RandomPolicy:
    """Acts like a frame in :func:`evaluate`: a uniformly random allowed choice for every actor."""

    def __init__(self, action_space: Any, seed: int) -> None:
        self.action_space, self.rng = action_space, np.random.default_rng(seed)

    def act(self, obs: Any, deterministic: bool = False, collect_stats: bool = False) -> Any:
        return random_actions(obs, self.action_space, self.rng)


def random_policy_return(factory: EnvFactory, episodes: int, seed: int,
                         config: Optional[RunConfig] = None) -> EvalResult:
    """A random policy's returns on the same environments as an evaluation (``config``: a run's,
    with its step cap and finite check): the baseline to beat."""
    env = factory()  # any callable that builds one environment, as evaluate takes
    policy = _RandomPolicy(env.action_space(), seed)
    env.close()
    options = eval_options(config, episodes) if config is not None else {"num_envs": eval_envs(episodes)}
    return evaluate(policy, factory, episodes, seed=seed, state_fn=lambda obs: obs,
                    action_fn=lambda actions: (None, actions), **options)
