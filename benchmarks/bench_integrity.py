"""What checking for damage costs: a dataset's parts and an exported policy, against their loads.

Usage::

    python benchmarks/bench_integrity.py [--megabytes 100] [--rounds 5] [--envs MineSweeper CherryPick]

Dataset: MineSweeper episodes of a random policy are recorded once (``Recorder``, about 8,192
rows, repeated 16 times: a part of about 1 MB) and the part written again until the dataset holds
``--megabytes`` of Parquet. A round times

* ``load``: ``Dataset(directory).read()``, everything a reader does, checks included;
* ``sha256``: the SHA-256 of every part's bytes (what the description's checksum costs);
* ``pages``: ``pq.read_table`` of every part's bytes with Parquet's page checksums verified minus
  the same read without them (what the page checksums cost).

Export: the bundled PPO configs' actors of ``--envs`` (``bench_export.py``'s files), exported once;
a round times ``OnnxPolicy(path)`` (read, onnxruntime session, metadata, checksum) and the checksum
alone (``export_checksum.differences``). The parts of a round take turns, and each figure is the
median over ``--rounds`` rounds; ``share`` is the checks' median over the load's median (the issue's
target: at most 5%).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def clock(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def record_parts(directory: str, megabytes: float) -> int:
    """A dataset of about ``megabytes`` MB: one recorded part written again and again; its size."""
    from entmachin.data import DatasetWriter, concat_rows
    from entmachin.data.recorder import Recorder
    from entmachin.env import EnvList, random_actions
    from entmachin.env.examples import MineSweeper

    envs = EnvList(MineSweeper, 64, seed=0)
    obs_space, action_space = envs.obs_space(), envs.action_space()
    rows = []

    class Collect:  # a writer that keeps the rows, to write them as parts below
        def __init__(self):
            self.action_space, self.obs_space = action_space, obs_space

        def write(self, r):
            rows.append(r)

    recorder = Recorder(Collect(), 64)
    rng, obs = np.random.default_rng(0), envs.reset()
    while sum(len(r) for r in rows) < 8192:
        actions = random_actions(obs, action_space, rng)
        nxt = envs.act(actions)
        recorder.step(obs, actions, nxt)
        obs = nxt
    part = concat_rows([concat_rows(rows)] * 16)  # parts of about 1 MB, as entmachin record writes at scale
    with DatasetWriter(directory, obs_space, action_space, rows_per_part=len(part)) as writer:
        size = 0
        while size < megabytes * 1e6:
            writer.write(part)
            size = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))
    return size


def dataset_rounds(directory: str, rounds: int) -> Dict[str, List[float]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from entmachin.data import Dataset
    from entmachin.files import sha256_of

    paths = Dataset(directory).paths
    blobs = [open(p, "rb").read() for p in paths]
    out: Dict[str, List[float]] = {"load": [], "sha256": [], "pages": []}
    for _ in range(rounds):
        out["load"].append(clock(lambda: Dataset(directory).read()))
        out["sha256"].append(clock(lambda: [sha256_of(b) for b in blobs]))
        timed = {}
        for verify in ((True, False) if len(out["pages"]) % 2 else (False, True)):  # the order alternates
            timed[verify] = clock(lambda: [pq.read_table(pa.BufferReader(b), page_checksum_verification=verify)
                                           for b in blobs])
        out["pages"].append(timed[True] - timed[False])
    return out


def export_rounds(name: str, directory: str, rounds: int) -> Dict[str, object]:
    import torch

    from entmachin import export_checksum
    from entmachin.deploy import OnnxPolicy
    from entmachin.run.build import make_frame
    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import load_config
    from entmachin.run.export import export_policy
    from entmachin.run.paths import bundled_config_path

    config = load_config(bundled_config_path(name))
    torch.manual_seed(0)
    frame, _ = make_frame(config, *EnvFactory(config.env).spaces())
    path = os.path.join(directory, f"{name}.onnx")
    size = export_policy(frame, path).size
    OnnxPolicy(path, threads=1)  # onnxruntime's first session loads its libraries
    out: Dict[str, object] = {"name": name, "kib": size / 1024, "load": [], "checksum": []}
    for _ in range(rounds):
        out["load"].append(clock(lambda: OnnxPolicy(path, threads=1)))

        data = open(path, "rb").read()  # OnnxPolicy reads the file once, for onnxruntime and the check alike
        out["checksum"].append(clock(lambda: export_checksum.differences(data, export_checksum.recorded(data))))
    return out


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--envs", nargs="+", default=["MineSweeper", "CherryPick"])
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f}; one thread")
    with tempfile.TemporaryDirectory() as tmp:
        directory = os.path.join(tmp, "dataset")
        size = record_parts(directory, args.megabytes)
        d = dataset_rounds(directory, args.rounds)
        load, sha, pages = (statistics.median(d[k]) for k in ("load", "sha256", "pages"))
        print("| dataset | MB | parts | load s | sha256 s | page checksums s | share |")
        print("|---|---|---|---|---|---|---|")
        parts = len([n for n in os.listdir(directory) if n.endswith(".parquet")])
        print(f"| MineSweeper, random policy | {size / 1e6:.1f} | {parts} | {load:.3f} | {sha:.4f} | {pages:.4f} | "
              f"{(sha + max(pages, 0.0)) / load:.1%} |")
        print()
        print("| export | KiB | OnnxPolicy(path) ms | checksum ms | share |")
        print("|---|---|---|---|---|")
        for name in args.envs:
            e = export_rounds(name, tmp, args.rounds)
            load, check = statistics.median(e["load"]) * 1e3, statistics.median(e["checksum"]) * 1e3
            print(f"| {name} | {e['kib']:.0f} | {load:.2f} | {check:.3f} | {check / load:.1%} |")


if __name__ == "__main__":
    main()
