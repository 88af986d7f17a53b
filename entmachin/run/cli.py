"""``entmachin`` / ``python -m entmachin``: train, resume, evaluate, list environments, write configs,
play, rate checkpoints in a league, export a policy to ONNX, record episodes to a dataset, verify files.

    entmachin train [CONFIG | ENV_NAME] [--set key=value ...] [--run-dir DIR] [--force]
    entmachin train --resume RUN_DIR
    entmachin eval RUN_DIR [--checkpoint STEPS|best] [--episodes N] [--deterministic] [--seed S]
                   [--opponent OPPONENT]
    entmachin envs
    entmachin init ENV [--frame A2C] > my.yaml
    entmachin play [ENV] [--checkpoint RUN_DIR] [--seed S] [--seat SEAT] [--opponent OPPONENT] [--record DIR]
    entmachin league RUN_DIR [RUN_DIR ...] [--best] [--games N] [--seed S] [--deterministic] [--out DIR]
    entmachin export RUN_DIR [-o policy.onnx] [--checkpoint STEPS|best]
    entmachin record [ENV] --policy POLICY --episodes N -o DIR [--seed S] [--processes N] [--deterministic]
                     [--checkpoint STEPS|best]

Wherever a run directory names a policy (play --checkpoint, --opponent, record --policy, train.init_from),
RUN_DIR/checkpoints/best names its best checkpoint (log.best).
    entmachin relabel DIR --reward pkg.mod:function -o NEW_DIR
    entmachin verify PATH [PATH ...]

Bad input ends with a one-line error and exit status 2 (``--debug`` shows the traceback).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import List, Optional, Union

# commands (imported when a command runs) uses these too: they live in paths, importable from here as before
from entmachin.run.paths import bundled_config_path, default_run_dir

__all__ = ["main", "bundled_config_path", "default_run_dir"]

logger = logging.getLogger("entmachin")


def _shadowed() -> Optional[str]:
    """What ``import entmachin`` found instead of the package, if it found a folder without an
    ``__init__.py`` (Python imports one as an empty namespace package, before an editable install)."""
    import entmachin

    if getattr(entmachin, "__file__", None) is not None:
        return None
    folders = [str(f) for f in getattr(entmachin, "__path__", [])] or ["entmachin"]
    parents = ", ".join(sorted({os.path.dirname(f) or "." for f in folders}))
    return (f"'import entmachin' found the folder {', '.join(folders)}, not the entmachin package (it has no "
            f"__init__.py), and it shadows the installed one: its parent {parents} is on sys.path (PYTHONPATH or the "
            "working directory); take it off PYTHONPATH, run from another directory, or rename the folder")


def _version() -> str:
    import platform

    import entmachin

    return f"{entmachin.__version__} (Python {platform.python_version()})"


def _checkpoint(text: str) -> Union[int, str]:
    """``--checkpoint``: a checkpoint's environment steps, or ``best`` (the run's best checkpoint, ``log.best``)."""
    if text == "best":
        return text
    try:
        steps = int(text)
    except ValueError:
        steps = -1
    if steps < 0:
        raise argparse.ArgumentTypeError(f"expected a checkpoint's environment steps or 'best', got {text!r}")
    return steps


_CHECKPOINT_HELP = "the checkpoint of this many environment steps, or best: the run's best checkpoint (log.best)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="entmachin", description="Reinforcement learning for entity-based "
                                     "environments.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors, and start-up times")
    parser.add_argument("--version", action="version", version=f"entmachin {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser("train", help="train from a YAML config or a bundled one")
    train.add_argument("target", nargs="?", default=None,
                       help="a YAML config file, or an example environment's name (its bundled config); "
                            "default: MineSweeper")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field, e.g. --set frame.discount=0.995 (repeatable)")
    train.add_argument("--run-dir", default=None, help="the run directory (default: log.run_dir, or runs/<env>-<time>)")
    train.add_argument("--resume", metavar="RUN_DIR", default=None, help="continue the run in RUN_DIR")
    train.add_argument("--trust-checkpoint", action="store_true",
                       help="with --resume: restore the environments' state even where your own key did not sign "
                            "it (a run directory from someone else, or from before checkpoints were signed); "
                            "unpickling it runs whatever code its author put in it")
    train.add_argument("--force", action="store_true", help="start over in a run directory that holds a run")
    train.add_argument("--frame", default="PPO", choices=["PPO", "A2C", "DQN", "BC"],
                       help="bundled config of this frame")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    tune = commands.add_parser("tune", help="search a config's hyperparameters (its tune: section) with Optuna")
    tune.add_argument("target", nargs="?", default=None,
                      help="a YAML config with a tune: section, or an example environment's name (its bundled config)")
    tune.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a config field, e.g. --set tune.steps=50000 (repeatable)")
    tune.add_argument("--trials", type=int, default=None, help="finished trials the study should hold "
                                                               "(default: tune.trials)")
    tune.add_argument("--jobs", type=int, default=1, help="trials run at once, each in a process of its own")
    tune.add_argument("--storage", default=None, help="an Optuna storage URL (e.g. postgresql://user@host/db) shared "
                                                      "by several machines; default: study.db in the study directory")
    tune.add_argument("--study", default=None, help="the study's name (default: <env>-tune)")
    tune.add_argument("--dir", dest="study_dir", default=None,
                      help="the study directory (default: studies/<study name>); running again continues it")
    tune.add_argument("--report", metavar="STUDY_DIR", default=None,
                      help="print a study's best trials and write best.yaml and the PNGs, without running trials")

    evaluate = commands.add_parser("eval", help="evaluate a run's latest checkpoint (or another, or its best)")
    evaluate.add_argument("run_dir", help="a run directory (or its checkpoints/ directory)")
    evaluate.add_argument("--checkpoint", type=_checkpoint, default=None, metavar="STEPS|best",
                          help=_CHECKPOINT_HELP + " (default: the latest)")
    evaluate.add_argument("--episodes", type=int, default=100)
    evaluate.add_argument("--deterministic", action="store_true", help="most likely actions instead of sampling")
    evaluate.add_argument("--seed", type=int, default=None, help="environment seed (default: the run's)")
    evaluate.add_argument("--opponent", default=None, metavar="OPPONENT",
                          help="games of several players: play --episodes games against random, scripted (the "
                               "environment's own), a run directory or pkg.mod:function, seats alternating; prints "
                               "wins, draws, losses and the win rate (draws count half) with its 95%% interval")

    commands.add_parser("envs", help="list the example environments and their spaces")
    commands.add_parser("schema", help="print the run config's JSON Schema (for editors to complete and check YAML)")

    init = commands.add_parser("init", help="print a complete, commented config for an environment")
    init.add_argument("env", help="an example environment's name or 'package.module:Class'")
    init.add_argument("--frame", default="PPO", choices=["PPO", "A2C"])

    play = commands.add_parser(
        "play", help="play an environment yourself, with a checkpoint's advice if you like",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Play an environment in the terminal, one actor at a time. At each prompt type\n"
                    "  a categorical choice's name or number,\n"
                    "  a select-entity choice's entity id (e.g. ('Cherry', 3) or Cherry 3) or #position,\n"
                    "  'a' or Enter for the agent's most likely choice (with --checkpoint, whose\n"
                    "  probabilities are shown beside the choices); q quits (so does the end of input).")
    play.add_argument("env", nargs="?", default=None, metavar="ENV",
                      help="an example environment's name or 'package.module:Class' (default: the checkpoint's)")
    play.add_argument("--checkpoint", default=None, metavar="RUN_DIR",
                      help="a run directory (or its checkpoints/; RUN_DIR/checkpoints/best: its best checkpoint): "
                           "show its agent's probabilities, let it choose")
    play.add_argument("--seed", type=int, default=None, help="environment seed (default: unseeded)")
    play.add_argument("--seat", default=None, metavar="SEAT",
                      help="a game of several players: the seat you play (default: the first)")
    play.add_argument("--record", default=None, metavar="DIR",
                      help="write every finished episode (every seat's rows) to this new dataset directory")
    play.add_argument("--opponent", default=None, metavar="OPPONENT",
                      help="a game of several players: who plays the other seats (random, scripted, a run directory "
                           "or pkg.mod:function; default: the --checkpoint's agent)")

    league = commands.add_parser(
        "league", help="games of several players: every checkpoint of some runs against every other, rated by Elo")
    league.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of one game")
    league.add_argument("--best", action="store_true",
                        help="each run's best checkpoint (log.best) plays too, as RUN@best")
    league.add_argument("--games", type=int, default=50, help="games of every pair of players (seats alternating)")
    league.add_argument("--seed", type=int, default=None, help="seed of the games (default: the first run's evaluation seed, its train.seed + 1,000,003)")
    league.add_argument("--deterministic", action="store_true", help="most likely actions instead of sampling")
    league.add_argument("--out", default=None, metavar="DIR",
                        help="where league.json and league.png go (default: the first run directory)")

    export = commands.add_parser(
        "export", help="write a run's acting network as one ONNX graph (run it with entmachin.deploy, no torch)")
    export.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (or its checkpoints/ directory)")
    export.add_argument("-o", "--out", default=None, metavar="FILE",
                        help="the .onnx file (default: RUN_DIR/policy.onnx)")
    export.add_argument("--checkpoint", type=_checkpoint, default=None, metavar="STEPS|best",
                        help=_CHECKPOINT_HELP + " (default: the latest)")

    record = commands.add_parser("record", help="write episodes of a policy to a dataset directory (Parquet parts)")
    record.add_argument("env", nargs="?", default=None, metavar="ENV",
                        help="an example environment's name or 'package.module:Class' (default: the policy run's)")
    record.add_argument("--policy", required=True, metavar="POLICY",
                        help="random, scripted (the environment's own), a run directory or pkg.mod:function")
    record.add_argument("--episodes", type=int, required=True, help="episodes (games) to record")
    record.add_argument("-o", "--out", required=True, metavar="DIR", help="a new dataset directory")
    record.add_argument("--seed", type=int, default=0, help="seed of the environments and of sampling")
    record.add_argument("--processes", type=int, default=0, help="environment worker processes (0: this one)")
    record.add_argument("--num-envs", type=int, default=16, help="environments stepped together")
    record.add_argument("--deterministic", action="store_true", help="a run's most likely actions instead of samples")
    record.add_argument("--checkpoint", type=_checkpoint, default=None, metavar="STEPS|best",
                        help="a run's " + _CHECKPOINT_HELP.removeprefix("the ") + " (default: the latest)")
    record.add_argument("--no-progress", action="store_true", help="no progress bar")

    relabel = commands.add_parser("relabel", help="a dataset's rewards recomputed by a function, into a new dataset")
    relabel.add_argument("dataset", metavar="DIR", help="a dataset directory (entmachin record); only read")
    relabel.add_argument("--reward", required=True, metavar="pkg.mod:function",
                         help="takes one part's rows (state, action, next_state, flags) and returns a reward per row")
    relabel.add_argument("-o", "--out", required=True, metavar="NEW_DIR", help="the new dataset directory")

    verify = commands.add_parser(
        "verify", help="check a run directory, checkpoint, export or dataset for damage, without loading code")
    verify.add_argument("paths", nargs="+", metavar="PATH",
                        help="a run directory, a checkpoints/ directory or checkpoint_<steps>.json, an .onnx export, "
                             "or a dataset directory; exit status 1 when any check fails")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the command line; returns the exit status."""
    from entmachin.run import startup

    startup.begin()
    shadowed = _shadowed()
    if shadowed is not None:
        print(f"entmachin: error: {shadowed}", file=sys.stderr)
        return 2
    # A user's own environment (`entmachin init mygame:Reach`) is found in the working directory, as
    # `python -m entmachin` finds it; the installed command's script only has its own folder on sys.path.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.debug:
        logging.getLogger("entmachin").setLevel(logging.DEBUG)
    from entmachin.run import commands

    startup.mark("importing torch and entmachin")
    try:
        return {"train": commands.train, "eval": commands.evaluate_run, "envs": commands.list_envs,
                "init": commands.init, "schema": commands.schema, "play": commands.play,
                "league": commands.league, "export": commands.export,
                "record": commands.record, "relabel": commands.relabel, "verify": commands.verify,
                "tune": commands.tune}[args.command](args)
    except KeyboardInterrupt:
        print("entmachin: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `entmachin init X | head`: the reader left; nothing to report
        sys.stdout = open(os.devnull, "w")
        return 0
    except Exception as e:  # one line for the user; the traceback with --debug
        if args.debug:
            raise
        print(f"entmachin: error: {commands.one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
