"""Replay buffer speed and memory: entmachin against Machin 0.4.2, measured in the same run.

Workloads (as in the buffer issue):

* dense: state ``{"state": [1, 16]}``, action ``{"action": [1, 1]}``, float reward, bool
  terminal; ``append`` one transition at a time (dicts built beforehand; and Machin's loop,
  where each step builds its dict from that step's values and its ``next_state`` is the next
  step's ``state``, with torch or numpy ``[1, 16]`` values), ``sample_batch(256)``, and a
  prioritized ``sample_batch(256)`` + ``update_priority`` loop;
* ragged (entmachin only: Machin cannot concatenate ragged data): canonical entity states with
  1-32 entities of 16 features per row; ``sample_batch`` at batch 256 and 4096 against the
  data-movement floor (the same rows gathered from every stored column with one ``take`` each,
  plus the ragged index expansion), and storage bytes against the raw bytes appended.

Machin runs in its own interpreter (``--machin-python``, a venv with ``machin==0.4.2``), as a
subprocess of this script, so both sides are measured in one run on one machine::

    python benchmarks/bench_buffer.py --machin-python /tmp/machin-venv/bin/python

Without ``--machin-python`` the Machin column reads "skipped".
"""

import argparse
import json
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch
from _competitor import run_competitor

STATE_DIM, BATCH = 16, 256
RAGGED_BATCHES = (256, 4096)


def _dense_steps(n: int, seed: int) -> List[Dict[str, Any]]:
    """``n`` distinct one-row dense transitions (the same on both sides for the same seed)."""
    gen = torch.Generator().manual_seed(seed)
    # separate tensors, not views of one big tensor (copying a view copies its whole storage)
    states = [t.clone() for t in torch.rand(n + 1, 1, STATE_DIM, generator=gen)]  # each [1, STATE_DIM]
    actions = [t.clone() for t in torch.randint(0, 4, (n, 1, 1), generator=gen).float()]  # each [1, 1]
    rewards = torch.rand(n, generator=gen).tolist()
    return [
        {"state": {"state": states[i]}, "action": {"action": actions[i]}, "next_state": {"state": states[i + 1]},
         "reward": rewards[i], "terminal": i % 100 == 99}
        for i in range(n)
    ]


def _step_values(n: int, seed: int, as_numpy: bool) -> Dict[str, list]:
    """The values of ``n`` env steps: ``n + 1`` states, ``n`` actions, rewards and terminals.

    States are ``[1, STATE_DIM]`` and actions ``[1, 1]`` float32 tensors, or numpy arrays with
    ``as_numpy``; rewards are Python floats and terminals Python bools, as an env loop gives.
    """
    gen = torch.Generator().manual_seed(seed)
    states = [t.clone() for t in torch.rand(n + 1, 1, STATE_DIM, generator=gen)]  # each [1, STATE_DIM]
    actions = [t.clone() for t in torch.randint(0, 4, (n, 1, 1), generator=gen).float()]  # each [1, 1]
    if as_numpy:
        states, actions = [s.numpy() for s in states], [a.numpy() for a in actions]
    return {"states": states, "actions": actions, "rewards": torch.rand(n, generator=gen).tolist(),
            "terminals": [i % 100 == 99 for i in range(n)]}


def _append_loop(buffer: Any, values: Dict[str, list]) -> float:
    """Machin's loop: each step builds its dict transition and appends it; returns steps per second.

    A step's ``next_state`` is the next step's ``state`` (the same object), as in an env loop.
    """
    states, actions, rewards, terminals = values["states"], values["actions"], values["rewards"], values["terminals"]
    start = time.perf_counter()
    for i in range(len(actions)):
        buffer.append({"state": {"state": states[i]}, "action": {"action": actions[i]},
                       "next_state": {"state": states[i + 1]}, "reward": rewards[i], "terminal": terminals[i]})
    return len(actions) / (time.perf_counter() - start)


def _best_rate(fn: Callable[[], Any], units: int, seconds: float, repeats: int) -> float:
    """Best of ``repeats`` windows of ``seconds``: calls of ``fn`` (``units`` each) per second."""
    best = 0.0
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            fn()
            calls += 1
        best = max(best, calls * units / (time.perf_counter() - start))
    return best


def _measure(part: str, buffer_cls: Any, prioritized_cls: Any, args: argparse.Namespace) -> float:
    """One dense measurement, with either library's classes (they share Machin's signatures)."""
    if part in ("append_loop", "append_loop_numpy"):
        values = _step_values(args.n_transitions, 0, as_numpy=part == "append_loop_numpy")
        if part == "append_loop_numpy" and buffer_cls.__module__.startswith("machin"):
            # Machin takes tensors only: its side gets tensors sharing the arrays' memory, made
            # before the clock starts (a Machin loop would pay for torch.from_numpy as well)
            values = {**values, "states": [torch.from_numpy(s) for s in values["states"]],
                      "actions": [torch.from_numpy(a) for a in values["actions"]]}
        return _append_loop(buffer_cls(args.n_transitions), values)
    steps = _dense_steps(args.n_transitions, seed=0)
    if part == "append":
        buffer = buffer_cls(args.n_transitions)
        start = time.perf_counter()
        for step in steps:
            buffer.append(step)
        return len(steps) / (time.perf_counter() - start)
    if part == "sample":
        buffer = buffer_cls(args.n_transitions)
        for step in steps:
            buffer.append(step)
        return _best_rate(lambda: buffer.sample_batch(BATCH, concatenate=True), BATCH, args.seconds, 1)
    buffer = prioritized_cls(args.n_transitions)
    for step in steps:
        buffer.append(step)
    rng = np.random.default_rng(0)

    def step_once() -> None:
        _, _, index, _ = buffer.sample_batch(BATCH)
        buffer.update_priority(rng.random(BATCH), index)

    return _best_rate(step_once, 1, args.seconds, 1)


def _machin_worker(args: argparse.Namespace) -> None:
    """Runs inside Machin's interpreter: prints one measurement as JSON."""
    from machin.frame.buffers import Buffer, PrioritizedBuffer

    for alias, meant in (("float", float), ("long", int)):  # Machin 0.4.2's PrioritizedBuffer uses
        if not hasattr(np, alias):  # these aliases of builtins, which numpy 1.24 removed
            setattr(np, alias, meant)
    torch.set_num_threads(1)
    print(json.dumps({"value": _measure(args.machin_part, Buffer, PrioritizedBuffer, args)}))


def _machin(part: str, args: argparse.Namespace) -> Optional[float]:
    if not args.machin_python:
        return None
    worker_args = ["--machin-part", part, "--n-transitions", str(args.n_transitions), "--seconds", str(args.seconds)]
    return run_competitor(args.machin_python, __file__, worker_args, "Machin")["value"]


# ------------------------------------------------------------------------------ ragged


def _ragged_replay_buffer(n_rows: int, seed: int) -> Any:
    """A buffer of ``n_rows`` entity rows (1-32 entities of 16 features) and the raw bytes appended."""
    from entmachin.buffer import Buffer, Transition
    from entmachin.ragged import ragged_from_arrays

    rng = np.random.default_rng(seed)
    buffer, raw_bytes, padded_bytes, chunk = Buffer(n_rows, seed=seed), 0, 0, 256
    for first in range(0, n_rows, chunk):
        n = min(chunk, n_rows - first)

        def entities() -> Any:
            counts = rng.integers(1, 33, n)
            return counts, ragged_from_arrays(rng.standard_normal((int(counts.sum()), STATE_DIM), dtype=np.float32), counts)

        counts, units = entities()
        next_counts, next_units = entities()
        actors = rng.integers(0, 2, int(counts.sum()))  # about half of the entities act
        actor_counts = np.add.reduceat(actors, np.concatenate([[0], np.cumsum(counts)[:-1]]))
        actor_ids = ragged_from_arrays(np.flatnonzero(actors)[:, None].astype(np.int64), actor_counts)
        choices = ragged_from_arrays(rng.integers(0, 4, (int(actor_counts.sum()), 1)), actor_counts)
        state = {"entities": {"Unit": units}, "action_masks": {"move": {"actors": actor_ids}}}
        next_state = {"entities": {"Unit": next_units}, "action_masks": {"move": {"actors": actor_ids}}}
        buffer.append(Transition(state, {"action": {"move": choices}}, next_state,
                                 rng.random(n, dtype=np.float32), np.zeros(n, np.bool_)))
        items = 4 * STATE_DIM * int(counts.sum() + next_counts.sum()) + 8 * 3 * int(actor_counts.sum())
        raw_bytes += items + 8 * 5 * n  # items, and one int64 length per row and ragged key
        padded_bytes += 4 * STATE_DIM * 32 * n * 2 + 8 * 32 * n * 3  # padded to the 32-entity maximum
    return buffer, raw_bytes, padded_bytes


def _floor(buffer: Any) -> Callable[[np.ndarray], list]:
    """The data-movement floor of ``sample_batch``: the same tensors, and nothing else.

    For every stored column: the ragged index expansion (lengths, offsets, batch index and
    item index of the chosen rows) and one ``take`` of the rows or items, handed to torch
    without copies (``torch.from_numpy``); no checks, no ``RaggedTensor`` or ``arrdict``
    objects, no row choice.
    """
    from entmachin.buffer.columns import RaggedColumn

    columns = buffer._storage.columns

    def gather(slots: np.ndarray) -> list:
        out = []
        for column in columns:
            if isinstance(column, RaggedColumn):
                lengths = column.lengths.take(slots)
                offsets = np.zeros(slots.shape[0] + 1, np.int64)
                np.cumsum(lengths, out=offsets[1:])
                batch_index = np.repeat(np.arange(slots.shape[0]), lengths)
                starts = column.starts.take(slots) % column.item_capacity
                items = np.arange(offsets[-1]) + (starts - offsets[:-1]).take(batch_index)
                parts = (column.array.take(items, axis=0), lengths, offsets, batch_index)
                out.append([torch.from_numpy(part) for part in parts])
            else:
                out.append(torch.from_numpy(column.array.take(slots, axis=0)))
        return out

    return gather


def _ragged(args: argparse.Namespace) -> Dict[str, Any]:
    buffer, raw_bytes, padded_bytes = _ragged_replay_buffer(args.ragged_rows, seed=0)
    ragged_bytes = sum(
        column.nbytes for spec, column in zip(buffer.schema.leaves, buffer._storage.columns) if spec.kind == "ragged"
    )
    out: Dict[str, Any] = {"storage": ragged_bytes, "raw": raw_bytes, "padded": padded_bytes}
    floor = _floor(buffer)
    rng = np.random.default_rng(1)
    for batch in RAGGED_BATCHES:
        if batch > args.ragged_rows:
            continue
        rows = [rng.choice(args.ragged_rows, batch, replace=False) for _ in range(16)]
        methods = [lambda b, n, picked=picked: picked for picked in rows]  # the same rows for both
        ours = [lambda m=m: buffer.sample_batch(batch, sample_method=m) for m in methods]
        minimum = [lambda r=r: floor(r) for r in rows]
        out[batch] = tuple(1e3 * t for t in _paired_best_times(ours, minimum, args))
    return out


def _paired_best_times(a: List[Callable[[], Any]], b: List[Callable[[], Any]], args: argparse.Namespace) -> List[float]:
    """Best seconds per call of two workloads, timed in alternating short windows (fair under load)."""
    best = [float("inf"), float("inf")]
    for _ in range(10 * args.repeats):
        for side, calls in enumerate((a, b)):
            start, n = time.perf_counter(), 0
            while time.perf_counter() - start < args.seconds / 10:
                calls[n % len(calls)]()
                n += 1
            best[side] = min(best[side], (time.perf_counter() - start) / n)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machin-python", default=None, help="interpreter of a venv with machin==0.4.2")
    parser.add_argument("--n-transitions", type=int, default=50_000, help="dense transitions (20k-100k)")
    parser.add_argument("--ragged-rows", type=int, default=100_000, help="rows of the ragged workload")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timing window")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each side, alternating; the best is kept")
    parser.add_argument("--machin-part", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.machin_part:
        _machin_worker(args)
        return

    from entmachin.buffer import Buffer, PrioritizedBuffer

    rows = []
    for part, label, unit, target in (
        ("append", "append, one transition at a time", "transitions/s", 25),
        ("append_loop", "  Machin's loop: dict built per step, torch", "transitions/s", 25),
        ("append_loop_numpy", "  Machin's loop: dict built per step, numpy", "transitions/s", 25),
        ("sample", f"sample_batch({BATCH}, concatenate=True)", "samples/s", 10),
        ("prioritized", f"prioritized sample_batch({BATCH}) + update_priority", "iterations/s", 10),
    ):
        ours, theirs = 0.0, None
        for _ in range(args.repeats):  # alternate the two sides, keep the best of each
            machin = _machin(part, args)
            theirs = None if machin is None else max(theirs or 0.0, machin)
            ours = max(ours, _measure(part, Buffer, PrioritizedBuffer, args))
        rows.append((label, unit, ours, theirs, target))
    print(f"dense workload: {args.n_transitions} transitions, state [1, {STATE_DIM}], torch threads 1")
    print(f"{'workload':<52} {'unit':<14} {'entmachin':>12} {'machin':>12} {'ratio':>8} {'target':>8}")
    for label, unit, ours, theirs, target in rows:
        machin = "skipped" if theirs is None else f"{theirs:,.0f}"
        ratio = "-" if theirs is None else f"{ours / theirs:.1f}x"
        print(f"{label:<52} {unit:<14} {ours:>12,.0f} {machin:>12} {ratio:>8} {'>=' + str(target) + 'x':>8}")
    if args.machin_python is None:
        print("machin: skipped (pass --machin-python PATH to measure it)")

    ragged = _ragged(args)
    print(f"\nragged workload: {args.ragged_rows} rows, 1-32 entities of {STATE_DIM} features (Machin cannot concatenate ragged rows)")
    print(f"{'workload':<52} {'entmachin':>12} {'floor':>12} {'ratio':>8} {'target':>8}")
    for batch in (b for b in RAGGED_BATCHES if b in ragged):
        ours, floor = ragged[batch]
        print(f"{f'sample_batch({batch}) ms':<52} {ours:>12.3f} {floor:>12.3f} {ours / floor:>7.2f}x {'<=1.5x':>8}")
    mib = 2**20
    print(f"{'storage MiB of ragged columns vs raw bytes appended':<52} {ragged['storage'] / mib:>12.1f} "
          f"{ragged['raw'] / mib:>12.1f} {ragged['storage'] / ragged['raw']:>7.2f}x {'<=1.2x':>8}")
    print(f"{'  (a layout padded to 32 entities would need)':<52} {ragged['padded'] / mib:>12.1f} "
          f"{'':>12} {ragged['padded'] / ragged['raw']:>7.2f}x")


if __name__ == "__main__":
    sys.exit(main())
