#!/usr/bin/env bash
# Downloads the wheels the GPU machines lack, for benchmarks/gpu_check.sh.
#
#   bash benchmarks/gpu_wheels.sh [FOLDER]      # default: .whl/ in the checkout (ignored by git)
#
# Run it where pip reaches a package index. The GPU machines run Python 3.12 with torch, numpy,
# tensorboard, pyyaml, tqdm, matplotlib, onnxruntime and pyarrow installed, and reach no index;
# each wheel is asked for CPython 3.12 on x86-64 Linux, as a wheel only and without its
# dependencies (those the machines lack are named here too), so the folder fits them whatever
# Python runs this script. All are pure Python except hypothesis where the index has a built wheel, and msgpack.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.whl}"
python="${PYTHON:-python3}"

# entmachin's runtime dependency (setup.py's install_requires) missing there
runtime=(dill)
# the tests': pytest and hypothesis with their pure dependencies; gymnasium (test_gymnasium_adapter,
# GymnasiumVecEnv) with its own (typing-extensions comes with torch, named in case it is too old)
tests=(pytest pluggy iniconfig packaging pygments hypothesis attrs sortedcontainers
       gymnasium cloudpickle farama-notifications typing-extensions)

# rogue-net's side of the RogueNet benchmarks: rogue-net and entity-gym declare Python < 3.11 but are
# pure Python; ragged-buffer has no wheel for 3.12, and entmachin's stand-in takes its place there
# (benchmarks/_rogue_net_side.py); entity-gym's msgpack-numpy needs msgpack (a built wheel)
competitor=(rogue-net==0.1.9 entity-gym==0.1.10 msgpack-numpy msgpack)

mkdir -p "$dest"
for package in "${runtime[@]}" "${tests[@]}" "${competitor[@]}"; do
    "$python" -m pip download --quiet --dest "$dest" --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --only-binary=:all: --no-deps --ignore-requires-python "$package"
done
ls "$dest"
