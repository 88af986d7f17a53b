"""The options that define RogueNet's benchmark workloads, shared by ``bench_rogue_net.py``,
``bench_rogue_net_bound.py`` and ``profile_rogue_net.py``.

``_rogue_net_workloads.build_workloads`` reads them. This module imports neither torch nor
entmachin: the scripts parse their options in rogue-net's interpreter too.
"""
import argparse
import os
from typing import Dict

from _device import add_device_argument

DEFAULT_STUB = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                             "tools", "torch_scatter_stub"))


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """rogue-net's interpreter, the workloads (which, their sizes), the torch threads, the seed and the device."""
    parser.add_argument("--roguenet-python", default=None,
                        help="interpreter of a venv with rogue-net==0.1.9 and entity-gym==0.1.10 (see above)")
    parser.add_argument("--scatter-stub", default=DEFAULT_STUB,
                        help="folder holding the torch_scatter stand-in, used where rogue-net's venv has none")
    parser.add_argument("--rows", type=int, default=256, help="rows of the synthetic forward + backward batch")
    parser.add_argument("--infer-rows", type=int, default=128, help="rows of the synthetic inference batch")
    parser.add_argument("--n-envs", type=int, default=128, help="environments of the MineSweeper/CherryPick rollouts")
    parser.add_argument("--n-steps", type=int, default=16, help="steps of those rollouts")
    parser.add_argument("--batch-size", type=int, default=1024, help="rows per minibatch drawn from a rollout")
    parser.add_argument("--max-entities", type=int, default=64, help="most type-A entities of a synthetic row")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workloads", default="",
                        help="comma-separated workload names, e.g. minesweeper-train,synthetic-infer (default: all)")
    add_device_argument(parser)


COMPILE_CHOICES = ("off", "on", "both")


def add_compile_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compile", choices=COMPILE_CHOICES, default="off",
                        help="entmachin's side eager (off), compiled (on: RogueNetConfig(compile=True)), or both "
                             "side by side, alternating step by step")


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write the figures to PATH as JSON (benchmarks/gpu_check.sh reads them)")


def entmachin_sides(compile_choice: str) -> Dict[str, bool]:
    """The entmachin sides a ``--compile`` choice times: column name -> compiled."""
    return {"off": {"entmachin": False}, "on": {"compiled": True},
            "both": {"entmachin": False, "compiled": True}}[compile_choice]
