"""One-off migration: each learning record gains the whole config it trained, read from the git history.

    python benchmarks/refingerprint_records.py            # writes benchmarks/results/learning.jsonl in place
    python benchmarks/refingerprint_records.py --check    # only reports what it would do
    python benchmarks/refingerprint_records.py --sweep    # the same for benchmarks/results/sweep.jsonl

Records written before ``settings`` existed carry only ``config``, a fingerprint under the rule of their
day, which hashed every field (so adding a field with a default changed every fingerprint). To judge them
by today's rule (``entmachin.run.fingerprint``), this script finds the config each record trained:

1. the commit that added the record's line to the results file;
2. from that commit back through the commits that touched the configs, their declarations or the
   benchmark, the first whose own ``bench_learning.config_fingerprint(env, frame)`` equals the record's
   ``config`` (a record's fingerprint is taken before its job trains, so a config edited in the same
   commit as its rows were added matches that commit's parent);
3. that commit's ``config_to_dict(load_config(bundled config))``, computed by that commit's own code.

With ``--sweep`` a record of ``sweep_defaults.py`` is matched the same way by that commit's
``sweep_defaults.fingerprint_by_env(candidate)``, and gains that commit's ``job_config`` of its candidate.

The record gains ``settings`` (that plain config) and ``settings_from`` (the commit); ``config`` is left as
it was. A record no commit matches is left without ``settings`` and reported: today's rule cannot vouch for
it, and it is not current. The script's last run wrote ``benchmarks/results/refingerprint_records.txt``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join("benchmarks", "results", "learning.jsonl")
SWEEP = os.path.join("benchmarks", "results", "sweep.jsonl")
# What decides a bundled config as the benchmark read it: the YAML files, the sections' declarations and
# defaults, and the fingerprint itself.
RELEVANT = ["entmachin/run/configs", "entmachin/run/config.py", "entmachin/run/defaults.py",
            "entmachin/frame/config.py", "entmachin/model/config.py", "entmachin/settings.py",
            "benchmarks/bench_learning.py", "benchmarks/sweep_defaults.py"]
MAX_BACK = 12  # relevant commits tried before a record is given up as matching none

_PROBE = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/benchmarks"]
try:
    import ragged_buffer
except ImportError:  # older trees imported it at module level; reading configs never calls it
    import types
    stub = types.ModuleType("ragged_buffer")
    for name in ("RaggedBufferBool", "RaggedBufferF32", "RaggedBufferI64"):
        setattr(stub, name, type(name, (), {}))
    sys.modules["ragged_buffer"] = stub
import entmachin, bench_learning
assert entmachin.__file__.startswith(sys.argv[1]), entmachin.__file__
from entmachin.run.cli import bundled_config_path
from entmachin.run.config import config_to_dict, load_config
out = {}
for key in json.loads(sys.argv[2]):
    env, frame, *candidate = key.split("/")
    try:
        if candidate:  # a sweep record: that commit's own job of the candidate
            import sweep_defaults
            out[key] = {"fingerprint": sweep_defaults.fingerprint_by_env(candidate[0])[(env, frame)],
                        "settings": sweep_defaults.job_config(env, frame, sweep_defaults.CANDIDATES[candidate[0]])}
        else:
            out[key] = {"fingerprint": bench_learning.config_fingerprint(env, frame),
                        "settings": config_to_dict(load_config(bundled_config_path(env, frame)))}
    except (Exception, SystemExit) as e:
        out[key] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def line_commits(results: str) -> Dict[str, str]:
    """Each line of the results file -> the latest commit that added it."""
    added: Dict[str, str] = {}
    commit = None
    for line in git("log", "--reverse", "-p", "--format=COMMIT %H", "--", results).splitlines():
        if line.startswith("COMMIT "):
            commit = line.split()[1]
        elif line.startswith("+{"):
            added[line[1:]] = commit
    return added


def probe(commit: str, keys: List[str], cache: Dict[Tuple[str, str], Dict[str, Any]]) -> None:
    """Fills ``cache[(commit, key)]`` with that commit's fingerprint and plain config of each ``env/frame``."""
    keys = [k for k in keys if (commit, k) not in cache]
    if not keys:
        return
    with tempfile.TemporaryDirectory(prefix="entmachin-refingerprint-") as tree:
        archive = subprocess.run(["git", "archive", commit, "entmachin", "benchmarks"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        done = subprocess.run([sys.executable, "-c", _PROBE, tree, json.dumps(keys)], capture_output=True, text=True,
                              cwd=tree, env={**os.environ, "PYTHONPATH": tree})
        if done.returncode != 0:
            raise SystemExit(f"refingerprint: the probe failed at {commit[:7]}:\n{done.stderr[-2000:]}")
        for key, value in json.loads(done.stdout.strip().splitlines()[-1]).items():
            cache[(commit, key)] = value


def find_settings(record: Dict[str, Any], commit: str, cache: Dict[Tuple[str, str], Dict[str, Any]]
                  ) -> Tuple[Optional[str], Optional[Dict[str, Any]], List[str]]:
    """The commit (from ``commit`` back) whose bundled config has the record's fingerprint, its plain config,
    and what each commit tried gave."""
    key = "/".join([record["env"], record["frame"]] + ([record["candidate"]] if "candidate" in record else []))
    tried = []
    candidates = git("log", "--format=%H", f"-{MAX_BACK}", commit, "--", *RELEVANT).split()
    if commit not in candidates:
        candidates.insert(0, commit)
    for candidate in candidates:
        probe(candidate, [key], cache)
        got = cache[(candidate, key)]
        tried.append(f"{candidate[:7]}:{got.get('fingerprint', got.get('error'))}")
        if got.get("fingerprint") == record["config"]:
            return candidate, got["settings"], tried
    return None, None, tried


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report only; leave the results file as it is")
    parser.add_argument("--sweep", action="store_true", help="the records of sweep_defaults.py (sweep.jsonl)")
    args = parser.parse_args(argv)
    results = SWEEP if args.sweep else RESULTS
    path = os.path.join(ROOT, results)
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    added = line_commits(results)
    cache: Dict[Tuple[str, str], Dict[str, Any]] = {}
    out, report = [], []
    for line in lines:
        record = json.loads(line)
        where = (f"{record.get('candidate', '')} {record['env']} {record['frame']} seed {record['seed']} "
                 f"config {record['config']}").strip()
        if "settings" in record:
            out.append(line)
            continue
        commit = added.get(line)
        if commit is None:
            report.append(f"{where}: its line is in no commit; left as it is")
            out.append(line)
            continue
        found, settings, tried = find_settings(record, commit, cache)
        if found is None:
            report.append(f"{where}: added in {commit[:7]}; no commit's config has its fingerprint "
                          f"(tried {', '.join(tried)}); left without settings")
            out.append(line)
            continue
        report.append(f"{where}: added in {commit[:7]}, config of {found[:7]}")
        out.append(json.dumps({**record, "settings": settings, "settings_from": found[:12]}))
    print("\n".join(report))
    if not args.check:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n".join(out) + "\n")
        os.replace(path + ".tmp", path)
        report_file = "refingerprint_sweep.txt" if args.sweep else "refingerprint_records.txt"
        with open(os.path.join(HERE, "results", report_file), "w", encoding="utf-8") as f:
            f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
