"""The markdown table of ``gpu_check.sh``: one row per stage, from the files the stages left.

    python benchmarks/_gpu_check_table.py DIR CARD DEVICE STAGE...

Each stage left ``DIR/STAGE.status`` (``ok`` or why not, a tab, its seconds) and ``DIR/STAGE.log``;
the benchmarks also ``DIR/STAGE.json`` (their ``--json``) and the training run ``DIR/STAGE/``
(its run directory). A stage that left nothing reads "not run".
"""
from __future__ import annotations

import json
import os
import sys
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))


def _tests(out: str, stage: str) -> str:
    """pytest's summary line."""
    lines = [line.strip(" =") for line in _read(out, f"{stage}.log").splitlines() if line.strip()]
    return lines[-1] if lines else "-"


def _rogue_net(out: str, stage: str) -> str:
    with open(os.path.join(out, f"{stage}.json"), encoding="utf-8") as f:
        figures = json.load(f)
    rows = []
    for w in figures["workloads"]:
        rates = {**w["rates"], **({"rogue-net": w["rogue-net"]} if w.get("rogue-net") else {})}
        text = ", ".join(f"{side} {rate:,.0f}" for side, rate in rates.items())
        if "rogue-net" in rates:
            text += f" (entmachin / rogue-net {rates['entmachin'] / rates['rogue-net']:.2f}x)"
        rows.append(f"{w['label']}: {text} {w['unit']}/s" + (f"; {w['compile']}" if w["compile"] else ""))
    return "<br>".join(rows)


def _bound(out: str, stage: str) -> str:
    with open(os.path.join(out, f"{stage}.json"), encoding="utf-8") as f:
        figures = json.load(f)
    rows = []
    for w in figures["workloads"]:
        rates = ", ".join(f"{k} {v:,.1f}" for k, v in w["gflops"].items() if v == v)  # NaN: a side skipped
        rows.append(f"{w['label']}: {w['mflop']:,.1f} MFLOP/step; GFLOP/s {rates}"
                    + (f"; {w['compile']}" if w["compile"] else ""))
    return "<br>".join(rows)


def _training(out: str, stage: str) -> str:
    """Environment steps/s of collecting + updating (the run's ``charts/SPS``) and the last evaluation."""
    sys.path.insert(0, HERE)
    from bench_pendulum import training_seconds

    run_dir = os.path.join(out, stage)
    with open(os.path.join(run_dir, "eval.json"), encoding="utf-8") as f:
        last = json.load(f)[-1]
    steps = int(last["env_steps"])
    return (f"{steps:,} env steps, {steps / training_seconds(run_dir):,.0f} env steps/s (collect + update, "
            f"charts/SPS); evaluation mean {float(last['mean']):.2f}")


FIGURES = {"tests": _tests, "rogue_net": _rogue_net, "bound": _bound, "minesweeper": _training}


def _read(out: str, name: str) -> str:
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def table(out: str, card: str, device: str, stages: List[str]) -> str:
    import torch

    lines = [f"GPU check on {card} ({device}), torch {torch.__version__}; logs in {out}", "",
             "| stage | status | seconds | figures |", "|---|---|---|---|"]
    for stage in stages:
        status, _, seconds = _read(out, f"{stage}.status").strip().partition("\t")
        figures = "-"
        if status == "ok":
            try:
                figures = FIGURES[stage](out, stage)
            except Exception as e:  # the table is still printed; the log says more
                figures = f"figures unreadable ({type(e).__name__}: {e})"
        lines.append(f"| {stage} | {status or 'not run'} | {seconds or '-'} | {figures} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
