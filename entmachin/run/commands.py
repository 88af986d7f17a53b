"""The commands behind ``entmachin``'s sub-commands (argument parsing lives in :mod:`entmachin.run.cli`)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Dict, Optional, Sequence, Tuple

from entmachin.run.config import ConfigError, RunConfig, apply_overrides, config_from_dict, config_to_dict, load_config
from entmachin.run.paths import bundled_config_path, default_run_dir

logger = logging.getLogger("entmachin")

# Fields a resumed run may change: how long it goes on, what it logs and calls, and whether its network
# runs compiled (the same weights and checkpoints either way).
_RESUMABLE = ("train.total_steps", "train.callbacks", "log.", "model.compile")


def one_line(error: BaseException) -> str:
    """An error as one line in entmachin's words (file errors say which file)."""
    if isinstance(error, FileNotFoundError) and error.filename:
        return f"{error.filename}: no such file or directory"
    if isinstance(error, PermissionError) and error.filename:
        return f"{error.filename}: permission denied"
    if isinstance(error, IsADirectoryError) and error.filename:
        return f"{error.filename}: is a directory, expected a YAML file"
    text = str(error).strip() or type(error).__name__
    return " ".join(text.split())


def resolve_train_config(target: Optional[str], overrides: Sequence[str] = (), frame: str = "PPO") -> RunConfig:
    """The config ``entmachin train`` runs: a file, a bundled config by name, or MineSweeper's; an
    environment without a bundled config trains with the defaults ``entmachin init`` writes."""
    target = target or "MineSweeper"
    if os.path.exists(target) or target.endswith((".yaml", ".yml")):
        return load_config(target, overrides)
    own = bundled_config_path(target, frame) if "." not in target and ":" not in target else None
    if own is not None:  # read with the overrides, as a file is: `auto` settings see the overridden budget
        return load_config(own, overrides)
    data, source = starting_config(target, frame)
    if source == "defaults":
        logger.info("%s has no bundled %s config: training with entmachin's defaults (`entmachin init %s%s > "
                    "my.yaml` writes them to a file to edit)", target, frame, target,
                    "" if frame == "PPO" else f" --frame {frame}")
    return config_from_dict(apply_overrides(data, overrides), target)


def resumed_config(run_dir: str, overrides: Sequence[str] = ()) -> RunConfig:
    """The config a resumed run goes on with: its own, with the few fields a resume may change."""
    from entmachin.run.runner import load_run_config

    stored = load_run_config(run_dir)
    frozen = [o.partition("=")[0] for o in overrides if not o.partition("=")[0].startswith(_RESUMABLE)]
    if frozen:
        raise ConfigError(f"--set {frozen[0]}: a resumed run keeps its config; only train.total_steps, "
                          "train.callbacks, log.* and model.compile may change")
    return config_from_dict(apply_overrides(config_to_dict(stored), overrides), "--resume")


def starting_config(env: str, frame: str) -> Tuple[Dict[str, Any], str]:
    """Plain config data for ``env`` and ``frame`` (``--set`` overrides apply before the defaults
    fill in what it leaves out), and where it came from (a bundled file's name, or ``"defaults"``):
    the bundled config of that frame, else the environment's bundled config with the frame
    changed, else the defaults (``entmachin.run.defaults.default_config``) with a step limit
    (``env.max_episode_steps``: the class's own ``max_episode_steps`` attribute where it declares
    one, else 1000)."""
    from entmachin.run.envs import EnvFactory, env_class
    from entmachin.run.config import EnvSection
    from entmachin.run.defaults import GENERIC, default_config, default_env_section

    cls = env_class(env)  # an unknown name says so, with close matches
    own = bundled_config_path(env, frame)
    if own is not None:
        return config_to_dict(load_config(own)), os.path.basename(own)
    if frame not in GENERIC:
        raise ConfigError(f"{env!r} has no bundled {frame} config, and entmachin's defaults are PPO's and A2C's: "
                          f"start from `entmachin init {env} > my.yaml` and set frame.name: {frame} there")
    path = bundled_config_path(env)
    if path is not None:  # the environment's settings, the frame's own defaults
        data = config_to_dict(load_config(path))
        return {**data, "frame": {"name": frame}}, os.path.basename(path)
    section = default_env_section(env, cls)
    return default_config(section, frame, EnvFactory(EnvSection(**section)).spaces()[0]), "defaults"


def train(args: argparse.Namespace) -> int:
    """``entmachin train``; under ``torchrun`` each rank runs it (see ``entmachin.run.distributed``)."""
    from entmachin.run import startup
    from entmachin.run.distributed import from_environment

    config = _train_config(args)
    startup.mark("config")
    distributed = from_environment(config.distributed, config.train.device)
    try:
        result, runner = _train(args, config, distributed)
        if distributed is not None:
            # Every rank reaches the teardown together: a rank that destroys its process group
            # while another still runs its last steps (rank 0's final evaluation) can make gloo
            # abort ("terminate called without an active exception").
            distributed.barrier()
    except BaseException as e:  # the other ranks stop naming this one instead of waiting for it
        if distributed is not None:
            distributed.report(e)
        raise
    finally:
        if distributed is not None:
            distributed.close()
    if distributed is not None and distributed.rank != 0:
        return 0 if result.stopped is None else (130 if result.stopped == "SIGINT" else 143)
    return _report(result, runner)


def _train_config(args: argparse.Namespace) -> RunConfig:
    from entmachin.run.runner import RunError

    if args.resume is None:
        if args.trust_checkpoint:
            raise RunError("--trust-checkpoint goes with --resume RUN_DIR: it says whose environment state a resumed "
                           "run may unpickle")
        return resolve_train_config(args.target, args.overrides, args.frame)
    if args.target is not None:
        raise RunError("give a config or --resume RUN_DIR, not both (a resumed run keeps its config)")
    return resumed_config(args.resume, args.overrides)


def _train(args: argparse.Namespace, config: RunConfig, distributed: Any) -> Any:
    from entmachin.run.runner import Runner

    if args.resume is not None:
        runner = Runner(config, args.resume, resume=True, progress=not args.no_progress, distributed=distributed,
                        trust_checkpoint=args.trust_checkpoint)
    else:
        run_dir = args.run_dir or config.log.run_dir or default_run_dir(config.env.name)
        if distributed is not None and run_dir != (args.run_dir or config.log.run_dir):  # one name for all ranks
            run_dir = distributed.gather_bytes(run_dir.encode())[0].decode()
        runner = Runner(config, run_dir, force=args.force, progress=not args.no_progress, distributed=distributed)
    return runner.train(), runner


def _report(result: Any, runner: Any) -> int:
    if result.reason is not None:
        print(f"stopped early by {result.reason}")
    if result.final_eval is not None:
        from entmachin.run.build import seeds
        from entmachin.run.envs import EnvFactory
        from entmachin.run.evaluation import random_policy_return

        final = result.final_eval
        unit = "samples" if runner.config.frame.name == "BC" else "environment steps"  # BC counts dataset rows
        after = f"after {result.env_steps} {unit}"
        if final.get("win_rate"):  # a game of several players: its seats' returns cancel out, its results do not
            rates = ", ".join(f"{rate:.3f} against {name}" for name, rate in final["win_rate"].items())
            print(f"win rate {rates} over {final['episodes']} games each {after}; run directory: {result.run_dir}")
            return 0
        baseline = random_policy_return(EnvFactory(runner.config.env), int(final["episodes"]),
                                        seeds(runner.config)["eval"], runner.config)
        print(f"mean evaluation return {final['mean']:.3f} over {final['episodes']} episodes {after} (a random "
              f"policy: {baseline.mean:.3f}); run directory: {result.run_dir}")
        return 0
    print(f"stopped by {result.stopped} at {result.env_steps} environment steps; resume with: entmachin train "
          f"--resume {result.run_dir}")
    return 130 if result.stopped == "SIGINT" else 143


def evaluate_run(args: argparse.Namespace) -> int:
    from entmachin.run.evaluation import describe_checkpoint, differ_widely, evaluate_both_ways
    from entmachin.run.matches import match_checkpoint

    if args.opponent is not None:
        result = match_checkpoint(args.run_dir, args.opponent, args.episodes, args.deterministic, args.seed,
                                  args.checkpoint)
        print(f"games {result.games}  wins {result.wins}  draws {result.draws}  losses {result.losses}")
        print(f"{result.line()}; {describe_checkpoint(args.run_dir, args.checkpoint)}")
        return 0
    evaluation = evaluate_both_ways(args.run_dir, args.episodes, args.deterministic, args.seed,
                                    version=args.checkpoint)
    result, other = evaluation.asked, evaluation.other
    print(f"episodes {len(result.returns)}  return mean {result.mean:.3f}  min {result.min:.3f}  max {result.max:.3f}"
          f"  length mean {sum(result.lengths) / len(result.lengths):.1f}  min {min(result.lengths)}"
          f"  max {max(result.lengths)}")
    print(evaluation.settings)
    if differ_widely(result, other):
        kind = "sampled actions" if args.deterministic else "most likely actions (--deterministic)"
        print(f"{kind}: return mean {other.mean:.3f} on the same environments; the two differ widely: deploy the "
              "better (an exported policy acts on its most likely actions unless told deterministic=False; "
              "docs/guides/export-and-deploy.md)")
    return 0


def list_envs(args: argparse.Namespace) -> int:
    from entmachin.env.examples import ENV_REGISTRY
    from entmachin.env.multi_agent import is_multi_agent
    from entmachin.run.spaces import describe_spaces

    for name, cls in ENV_REGISTRY.items():
        env = cls()
        seats = f" (a game of {len(env.seats())} players, seats {env.seats()})" if is_multi_agent(env) else ""
        print(f"{name}{seats}")
        for line in describe_spaces(env.obs_space(), env.action_space()):
            print(f"  {line}")
    return 0


def init(args: argparse.Namespace) -> int:
    from entmachin.run.describe import commented_yaml

    data, source = starting_config(args.env, args.frame)
    data = config_to_dict(config_from_dict(data, args.env))
    source = "with entmachin's defaults" if source == "defaults" else f"from the bundled {source}"
    header = (f"# entmachin run config for {args.env} ({args.frame}), {source}.\n"
              f"# Train with: entmachin train THIS_FILE [--set section.field=value]")
    sys.stdout.write(commented_yaml(data, header))
    return 0


def schema(args: argparse.Namespace) -> int:
    import json

    from entmachin.run.schema import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=1) + "\n")
    return 0


def play(args: argparse.Namespace) -> int:
    from entmachin.run.play import play as play_env

    return play_env(args.env, args.checkpoint, args.seed, args.seat, args.opponent, args.record)


def league(args: argparse.Namespace) -> int:
    from entmachin.run.league import league as play_league

    result = play_league(args.run_dirs, args.games, args.seed, args.deterministic, args.out, best=args.best)
    for line in result.table():
        print(line)
    print(f"{len(result.pairs)} pairs of players, {result.games} games each (seed {result.seed}); league.json and "
          f"league.png in {result.out}")
    return 0


def export(args: argparse.Namespace) -> int:
    from entmachin.run.export import export_run

    result = export_run(args.run_dir, args.out, args.checkpoint)
    print(f"wrote {result.path} ({result.kind}, {result.size / 1024:.0f} KiB, in {result.seconds:.2f} s); run it "
          "with entmachin.deploy.OnnxPolicy (numpy and onnxruntime, no torch)")
    return 0


def record(args: argparse.Namespace) -> int:
    from entmachin.run.record import record as record_episodes

    result = record_episodes(args.env, args.policy, args.episodes, args.out, seed=args.seed, processes=args.processes,
                             num_envs=args.num_envs, deterministic=args.deterministic, progress=not args.no_progress,
                             checkpoint=args.checkpoint)
    print(f"recorded {result.episodes} episodes ({result.rows} rows, {result.parts} parts"
          f"{', with entity ids' if result.ids else ''}) in {result.directory}; mean return {result.mean_return:.3f}")
    return 0


def verify(args: argparse.Namespace) -> int:
    from entmachin.run.verify import main as verify_paths

    return verify_paths(args.paths)


def relabel(args: argparse.Namespace) -> int:
    from entmachin.data.relabel import relabel as relabel_dataset
    from entmachin.run.matches import resolve_function

    writer = relabel_dataset(args.dataset, args.out, resolve_function(args.reward, "relabel --reward"), args.reward)
    print(f"relabelled {writer.rows} rows ({writer.parts} parts) of {args.dataset} with {args.reward} into {args.out}")
    return 0



def tune(args: argparse.Namespace) -> int:
    """``entmachin tune``: runs (or continues) a study, then prints its table; ``--report`` prints it only."""
    from entmachin.run.tune.report import report
    from entmachin.run.tune.study import run_study

    if args.report is not None:
        study_dir = args.report
    else:
        config = resolve_train_config(args.target, args.overrides)
        study_dir = args.study_dir or os.path.join("studies", args.study or f"{config.env.name}-tune")
        try:
            run_study(config, study_dir, trials=args.trials, jobs=args.jobs, storage=args.storage, name=args.study)
        except KeyboardInterrupt:
            print(f"entmachin tune: interrupted; the study in {study_dir} keeps its finished trials (run the command "
                  "again to continue it)", file=sys.stderr)
            return 130
    for line in report(study_dir):
        print(line)
    return 0
