#!/usr/bin/env bash
# The GPU check: entmachin's gpu-marked tests, the RogueNet benchmarks eager and compiled, and
# MineSweeper trained end to end, on one CUDA card in at most 5 minutes; one markdown table at the end.
#
#   bash benchmarks/gpu_check.sh [--cpu] [--out DIR] [--wheels DIR] [--scatter-stub DIR]
#
# The GPU machines reach no package index: first run `bash benchmarks/gpu_wheels.sh` where pip
# reaches one, and bring the wheels folder (default .whl/) along with the checkout. rogue-net needs
# torch_scatter: its stand-in is looked for in ../shared/tools/torch_scatter_stub beside the
# checkout, or in the folder --scatter-stub names (bring it along too).
#
# Install: entmachin runs from this checkout (PYTHONPATH: nothing to build, no index needed); when
# dill, pytest, hypothesis, gymnasium, rogue-net, entity-gym or msgpack-numpy is not installed, every
# project of the wheels folder is installed with `pip --no-index --find-links` into DIR/site (also on
# PYTHONPATH). ENTMACHIN_SKIP_INSTALL=1 skips that step. rogue-net joins the RogueNet stages where it
# imports (with entmachin's ragged_buffer stand-in where ragged-buffer has no wheel).
#
# Stages, each under `timeout`, each leaving as it finishes DIR/STAGE.log (its output) and
# DIR/STAGE.status ("ok" or why not, a tab, its seconds); a failed stage is recorded and the next
# one runs:
#   tests        pytest -m gpu on the test files holding gpu marks
#   rogue_net    bench_rogue_net.py --compile both on MineSweeper's training workload (DIR/rogue_net.json)
#   bound        bench_rogue_net_bound.py --compile both, the same workload (DIR/bound.json)
#   minesweeper  entmachin train MineSweeper (the bundled config, processes: 2), run directory DIR/minesweeper
# DIR is --out, else $OUT, else a new temporary folder. The table goes to stdout and DIR/table.md.
#
# Without CUDA (torch.cuda.is_available() false) or with --cpu, the same stages run on the CPU,
# eager only and at tiny sizes: CI's smoke test of this script.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
out="${OUT:-}"
wheels="$root/.whl"
stub=""
force_cpu=0
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu) force_cpu=1 ;;
        --out) out="$2"; shift ;;
        --wheels) wheels="$2"; shift ;;
        --scatter-stub) stub="$(cd "$2" && pwd)" || exit 2; shift ;;
        -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "gpu_check.sh: unknown argument '$1' (expected --cpu, --out DIR, --wheels DIR, --scatter-stub DIR)" >&2
           exit 2 ;;
    esac
    shift
done
if [ -z "$out" ]; then
    out="$(mktemp -d "${TMPDIR:-/tmp}/entmachin-gpu-check-XXXXXX")"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root" || exit 1
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

needed=(dill pytest hypothesis gymnasium rogue_net entity_gym msgpack_numpy)
missing() {  # exit status 0 when one of the needed packages is not installed
    "$python" -c "import importlib.util, sys; sys.exit(all(importlib.util.find_spec(m) for m in sys.argv[1:]))" \
        "${needed[@]}"
}
if [ "${ENTMACHIN_SKIP_INSTALL:-0}" != 1 ] && missing 2>/dev/null; then
    echo "installing the wheels of $wheels into $out/site"
    # by project name, so that of two versions in the folder pip takes the newer
    mapfile -t projects < <(find "$wheels" -maxdepth 1 -type f -name '*.whl' -printf '%f\n' | cut -d- -f1 | sort -u)
    "$python" -m pip install --quiet --no-index --no-deps --ignore-requires-python --find-links "$wheels" \
        --target "$out/site" "${projects[@]}" \
        || { echo "gpu_check.sh: the wheels of $wheels did not install (run benchmarks/gpu_wheels.sh first)" >&2; exit 1; }
    export PYTHONPATH="$out/site:$PYTHONPATH"
fi

device=cpu
if [ "$force_cpu" = 0 ] && [ "$("$python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null)" = 1 ]; then
    device=cuda
fi
card="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
if [ "$device" = cuda ] && [ -z "$card" ]; then
    card="$("$python" -c 'import torch; print(torch.cuda.get_device_name())')"
elif [ "$device" = cpu ]; then
    card="CPU ($(nproc) cores${card:+; card present: $card})"
fi

# run_stage NAME SECONDS COMMAND...: COMMAND's output into NAME.log, then NAME.status.
run_stage() {
    local name="$1" limit="$2" started=$SECONDS rc=0 status=ok
    shift 2
    echo "stage $name (at most $limit s)"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
    if [ "$rc" = 124 ]; then
        status="timed out after $limit s"
    elif [ "$rc" != 0 ]; then
        status="failed (exit $rc)"
    fi
    printf '%s\t%s\n' "$status" "$((SECONDS - started))" >"$out/$name.status"
}

workload=(--workloads minesweeper-train ${stub:+--scatter-stub "$stub"})
# rogue-net 0.1.9 joins the RogueNet stages where it imports here (through entmachin's ragged_buffer
# stand-in where ragged-buffer has no wheel: benchmarks/_rogue_net_side.py)
probe="import sys, _rogue_net_args as a, _rogue_net_side as s; s._import_scatter(sys.argv[1] or a.DEFAULT_STUB)
s._ragged_buffer(); import rogue_net.rogue_net, entity_gym.env"
if (cd benchmarks && "$python" -c "$probe" "$stub") >"$out/rogue_net_import.log" 2>&1; then
    workload+=(--roguenet-python "$python")
    echo "rogue-net imports: it joins the RogueNet stages"
else
    echo "rogue-net does not import here ($out/rogue_net_import.log): the RogueNet stages time entmachin alone"
fi
if [ "$device" = cuda ]; then
    sizes=(--device cuda --compile both --repeats 5)
    limits=(75 90 60 75)  # 300 s in all; on an NVIDIA H200 the stages took 41, 52, 29 and 51 s
    steps=51200
    evaluation=(--set log.eval_episodes=20)
else
    sizes=(--device cpu --compile off --repeats 1 --rows 8 --max-entities 8 --infer-rows 4 --n-envs 4 --n-steps 4
           --batch-size 8)
    limits=(60 60 60 60)
    steps=1024
    evaluation=(--set log.eval_episodes=2)
fi
mapfile -t gpu_tests < <(grep -rl --include='*.py' "mark.gpu" test)

run_stage tests "${limits[0]}" "$python" -m pytest -p no:cacheprovider -q -m gpu "${gpu_tests[@]}"
run_stage rogue_net "${limits[1]}" "$python" benchmarks/bench_rogue_net.py "${sizes[@]}" "${workload[@]}" \
    --json "$out/rogue_net.json"
run_stage bound "${limits[2]}" "$python" benchmarks/bench_rogue_net_bound.py "${sizes[@]}" "${workload[@]}" \
    --json "$out/bound.json"
run_stage minesweeper "${limits[3]}" "$python" -m entmachin train MineSweeper --run-dir "$out/minesweeper" --force \
    --no-progress --set "train.device=$device" --set rollout.processes=2 --set "train.total_steps=$steps" \
    --set "log.eval_interval=$steps" --set "log.checkpoint_interval=$steps" "${evaluation[@]}"

"$python" benchmarks/_gpu_check_table.py "$out" "$card" "$device" tests rogue_net bound minesweeper | tee "$out/table.md"
