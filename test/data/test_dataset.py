"""Entity datasets: round trips, parts published whole, a recorder killed mid-run, bad input named."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from entmachin.data import Dataset, DatasetError, DatasetWriter, Rows  # noqa: E402
from entmachin.env import (  # noqa: E402
    CategoricalActionSpace, ContinuousActionSpace, Entity, GlobalCategoricalActionSpace, GlobalContinuousActionSpace,
    ObsSpace, SelectEntityActionSpace,
)
from entmachin.env.action import CONTINUOUS_SPACES  # noqa: E402
from entmachin.env.common import GLOBAL_ENTITY  # noqa: E402
from entmachin.ragged.arrays import ragged_equal, ragged_from_arrays  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBS_SPACE = ObsSpace(global_features=["time", "score"], entities={
    "Unit": Entity(["x", "y", "hp"]), "Wall": Entity([]), "Coin": Entity(["value"])})
ACTION_SPACE = {"move": CategoricalActionSpace(["up", "down", "stay"]), "target": SelectEntityActionSpace(),
                "mode": GlobalCategoricalActionSpace(["calm", "angry"])}


def random_rows(rng, n_episodes, seats=None, id_kind=None, probs=False, first_episode=0):
    """Whole episodes of random rows (every episode ends with its final rows, one per seat)."""
    per_seat = seats or [None]
    columns = {k: [] for k in ("episode", "step", "final", "reward", "terminal", "truncated", "seat", "result")}
    counts = {t: [] for t in OBS_SPACE.entities}
    feats = {t: [] for t in OBS_SPACE.entities}
    visible = {t: [] for t in OBS_SPACE.entities}
    ids = {t: [] for t in OBS_SPACE.entities}
    masks = {a: {} for a in ACTION_SPACE}
    parts = {a: {"actors": [], "n_actors": [], "mask": [], "actees": [], "n_actees": [], "actee_mask": [],
                 "n_pairs": [], "action": [], "n_action": [], "probs": [], "widths": []} for a in ACTION_SPACE}
    glob_rows = []
    for e in range(first_episode, first_episode + n_episodes):
        length = int(rng.integers(1, 5))
        for step in range(length + 1):
            final = step == length
            for seat in per_seat:
                columns["episode"].append(e)
                columns["step"].append(step)
                columns["final"].append(final)
                columns["reward"].append(np.float32(rng.normal()))
                columns["terminal"].append(bool(final and rng.random() < 0.5))
                columns["truncated"].append(bool(final and not columns["terminal"][-1]))
                columns["seat"].append(seat)
                columns["result"].append(rng.choice(["win", "draw", "loss"]) if final and seats else None)
                n_total = 0
                for t, entity in OBS_SPACE.entities.items():
                    n = int(rng.integers(0, 4)) * int(rng.random() > 0.3)  # zero entities often
                    counts[t].append(n)
                    n_total += n
                    feats[t].append(rng.normal(size=(n, len(entity.features))).astype(np.float32))
                    visible[t].append(rng.random((n, 1)) < 0.8)
                    if id_kind == "int":
                        ids[t].append([int(i) for i in rng.integers(0, 1000, n)] if rng.random() < 0.9 else None)
                    elif id_kind == "str":
                        ids[t].append([f"{t}-{i}" for i in range(n)])
                glob_rows.append(rng.normal(size=(1, 2)).astype(np.float32))
                for a, space in ACTION_SPACE.items():
                    p = parts[a]
                    if isinstance(space, GlobalCategoricalActionSpace):
                        actors = np.array([n_total] if rng.random() < 0.8 else [], np.int64)
                    else:
                        actors = np.flatnonzero(rng.random(n_total) < 0.5)
                    p["actors"].append(actors)
                    p["n_actors"].append(len(actors))
                    if isinstance(space, SelectEntityActionSpace):
                        actees = np.flatnonzero(rng.random(n_total) < 0.5) if len(actors) else np.zeros(0, np.int64)
                        p["actees"].append(actees)
                        p["n_actees"].append(len(actees))
                        pairs = rng.random(len(actors) * len(actees)) < 0.7
                        p["actee_mask"].append(pairs)
                        p["n_pairs"].append(len(pairs))
                        width = len(actees)
                    else:
                        width = len(space.index_to_label)
                        p["mask"].append(rng.random((len(actors), width)) < 0.7)
                    chosen = [] if final or not width else list(rng.integers(0, width, len(actors)))
                    if not width and not final:
                        chosen = []
                    if not final and width:
                        p["action"].append(np.array(chosen, np.int64))
                        p["n_action"].append(len(chosen))
                    else:
                        p["action"].append(np.zeros(0, np.int64))
                        p["n_action"].append(0)
                    for _ in range(p["n_action"][-1]):
                        p["probs"].append(rng.random(width).astype(np.float32))
                        p["widths"].append(width)
    n = len(columns["episode"])
    entities = {t: ragged_from_arrays(np.concatenate(feats[t]).reshape(sum(counts[t]), len(e.features)),
                                      counts[t], np.float32) for t, e in OBS_SPACE.entities.items()}
    entities[GLOBAL_ENTITY] = ragged_from_arrays(np.concatenate(glob_rows), np.ones(n, np.int64), np.float32)
    vis = {t: ragged_from_arrays(np.concatenate(visible[t]).reshape(-1, 1), counts[t], np.bool_)
           for t in OBS_SPACE.entities}
    action, prob = {}, {}
    for a, space in ACTION_SPACE.items():
        p = parts[a]
        cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0))
        masks[a]["actors"] = ragged_from_arrays(cat(p["actors"]).reshape(-1, 1).astype(np.int64), p["n_actors"],
                                                np.int64)
        if isinstance(space, SelectEntityActionSpace):
            masks[a]["actees"] = ragged_from_arrays(cat(p["actees"]).reshape(-1, 1), p["n_actees"], np.int64)
            masks[a]["actee_mask"] = ragged_from_arrays(cat(p["actee_mask"]).reshape(-1, 1), p["n_pairs"], np.bool_)
        else:
            masks[a]["mask"] = ragged_from_arrays(
                np.concatenate(p["mask"]).reshape(-1, len(space.index_to_label)), p["n_actors"], np.bool_)
        action[a] = ragged_from_arrays(cat(p["action"]).reshape(-1, 1), p["n_action"], np.int64)
        if probs:
            prob[a] = (ragged_from_arrays(cat(p["probs"]).reshape(-1, 1).astype(np.float32), p["widths"], np.float32),
                       ~np.array(columns["final"]))
    return Rows(np.array(columns["episode"], np.int64), np.array(columns["step"], np.int64),
                np.array(columns["final"]), entities, vis, masks, action, np.array(columns["reward"], np.float32),
                np.array(columns["terminal"]), np.array(columns["truncated"]), columns["seat"], columns["result"],
                ids if id_kind else {}, prob)


def assert_rows_equal(a, b):
    assert len(a) == len(b)
    for name in ("episode", "step", "final", "reward", "terminal", "truncated"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.seat == b.seat and a.result == b.result
    for t in a.entities:
        assert ragged_equal(a.entities[t], b.entities[t]), t
    for t in a.visible:
        assert ragged_equal(a.visible[t], b.visible[t]), t
    for name in a.masks:
        assert a.masks[name].keys() == b.masks[name].keys()
        for key in a.masks[name]:
            assert ragged_equal(a.masks[name][key], b.masks[name][key]), (name, key)
        assert ragged_equal(a.action[name], b.action[name]), name
    assert a.ids == b.ids
    assert a.probs.keys() == b.probs.keys()
    for name in a.probs:
        assert ragged_equal(a.probs[name][0], b.probs[name][0]) and np.array_equal(a.probs[name][1], b.probs[name][1])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), n_episodes=st.integers(1, 6),
       seats=st.sampled_from([None, ["0", "1"], ["a", "b", "c"]]),
       id_kind=st.sampled_from([None, "int", "str"]), probs=st.booleans(), rows_per_part=st.integers(1, 40))
def test_rows_written_read_back_identical(tmp_path_factory, seed, n_episodes, seats, id_kind, probs, rows_per_part):
    rng = np.random.default_rng(seed)
    directory = str(tmp_path_factory.mktemp("ds"))
    written = []
    kinds = {t: id_kind for t in OBS_SPACE.entities} if id_kind else None
    with DatasetWriter(directory, OBS_SPACE, ACTION_SPACE, seats=seats, probs=probs, rows_per_part=rows_per_part,
                       recorded={"by": "test"}, id_kinds=kinds) as writer:
        for k in range(n_episodes):
            rows = random_rows(rng, 1, seats, id_kind, probs, first_episode=k)
            written.append(rows)
            writer.write(rows)
    dataset = Dataset(directory)
    assert dataset.recorded == {"by": "test"} and dataset.seats == seats and dataset.probs == probs
    assert len(dataset.paths) >= 1
    parts = list(dataset)
    assert all(len(p) > 0 for p in parts)
    from entmachin.data import concat_rows

    expected = concat_rows(written)
    if id_kind is None:
        expected.ids = {}
    assert_rows_equal(dataset.read(), expected)
    assert not glob.glob(os.path.join(directory, ".*"))  # no temporary file left


def test_a_dataset_is_readable_by_pyarrow_alone(tmp_path):
    import pyarrow.parquet as pq

    rows = random_rows(np.random.default_rng(0), 3, ["0", "1"], "int", True)
    with DatasetWriter(str(tmp_path), OBS_SPACE, ACTION_SPACE, seats=["0", "1"], probs=True) as writer:
        writer.write(rows)
    table = pq.read_table(str(tmp_path / "part-00000.parquet"))
    assert table.num_rows == len(rows)
    assert table.column("features/Unit").to_pylist()[0] == [list(map(float, r)) for r in
                                                             rows.entities["Unit"][0].as_array()]
    description = json.loads((tmp_path / "dataset.json").read_text())
    assert description["format"] == "entmachin-dataset/1" and description["spaces"]["actions"]["target"] == {
        "kind": "select entity"}


RECORD_FOREVER = """
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
from test.data.test_dataset import random_rows, OBS_SPACE, ACTION_SPACE
from entmachin.data import DatasetWriter
rng = np.random.default_rng(0)
writer = DatasetWriter(sys.argv[1], OBS_SPACE, ACTION_SPACE, rows_per_part=20)
k = 0
while True:
    writer.write(random_rows(rng, 1, first_episode=k))
    k += 1
"""


def test_a_recorder_killed_mid_run_leaves_every_published_part_readable(tmp_path):
    directory = str(tmp_path / "killed")
    child = subprocess.Popen([sys.executable, "-c", RECORD_FOREVER, directory, ROOT])
    try:
        # a part is renamed into place before the description lists it, so a kill can leave one file
        # unlisted: wait for six files to be sure that five are published
        deadline = time.time() + 60
        while len(glob.glob(os.path.join(directory, "part-*.parquet"))) < 6 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    dataset = Dataset(directory)
    assert len(dataset.paths) >= 5
    episodes = [np.unique(part.episode) for part in dataset]  # every part reads, whole episodes in each
    seen = np.concatenate(episodes)
    assert len(seen) == len(np.unique(seen))


def test_bad_datasets_are_named(tmp_path):
    rows = random_rows(np.random.default_rng(1), 4)
    directory = str(tmp_path / "d")
    with DatasetWriter(directory, OBS_SPACE, ACTION_SPACE, rows_per_part=10) as writer:
        writer.write(rows)
    with pytest.raises(DatasetError, match="already holds a dataset"):
        DatasetWriter(directory, OBS_SPACE, ACTION_SPACE)
    dataset = Dataset(directory)
    other = {**ACTION_SPACE, "move": CategoricalActionSpace(["up", "down"])}
    with pytest.raises(DatasetError, match="action 'move'"):
        dataset.check_spaces(OBS_SPACE, other, "MyGame")
    part = dataset.paths[0]
    with open(part, "rb") as f:
        data = f.read()
    with open(part, "wb") as f:
        f.write(data[: len(data) // 2])  # truncated
    with pytest.raises(DatasetError, match="part-00000.parquet: truncated"):
        list(Dataset(directory))
    import pyarrow.parquet as pq

    table = pq.read_table(Dataset(directory).paths[-1]) if len(dataset.paths) > 1 else None
    if table is not None:  # a part without a column, its description entry made to match (a crafted dataset)
        pq.write_table(table.drop_columns(["reward"]), part)
        _describe_part_as_it_is(directory, part)
        with pytest.raises(DatasetError, match="part-00000.parquet: no column 'reward'"):
            Dataset(directory).read_part(part)
    description = json.loads(open(os.path.join(directory, "dataset.json")).read())
    description["format"] = "entmachin-dataset/99"
    with open(os.path.join(directory, "dataset.json"), "w") as f:
        json.dump(description, f)
    with pytest.raises(DatasetError, match="dataset.json: format 'entmachin-dataset/99'"):
        Dataset(directory)
    with pytest.raises(DatasetError, match="no dataset description"):
        Dataset(str(tmp_path))


def _describe_part_as_it_is(directory, part):
    """Rewrites the description's entry of ``part`` to the file as it now is (rows, bytes, SHA-256)."""
    import hashlib

    import pyarrow.parquet as pq

    path = os.path.join(directory, "dataset.json")
    description = json.loads(open(path).read())
    data = open(part, "rb").read()
    for entry in description["parts"]:
        if entry["file"] == os.path.basename(part):
            entry.update(rows=pq.read_metadata(part).num_rows, bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    with open(path, "w") as f:
        json.dump(description, f)


def test_ids_of_other_kinds_are_refused(tmp_path):
    rows = random_rows(np.random.default_rng(2), 1, id_kind="int")
    rows.ids["Unit"] = [[("Unit", 1)] * len(r) if r else r for r in rows.ids["Unit"]]
    if not any(rows.ids["Unit"]):
        pytest.skip("no units drawn")
    with pytest.raises(DatasetError, match="ids of 'Unit'.*ints or all strings"):
        with DatasetWriter(str(tmp_path), OBS_SPACE, ACTION_SPACE) as writer:
            writer.write(rows)


# ---------------------------------------------------------------------------- continuous actions

CONT_OBS = ObsSpace(global_features=["t"], entities={"Boat": Entity(["x", "y"]), "Buoy": Entity([])})
MIXED = {"steer": ContinuousActionSpace(low=[-1.0, 0.0], high=[1.0, 3.0e38], names=["turn", "speed"]),
         "wind": GlobalContinuousActionSpace(0.0, 1.0),
         "flag": CategoricalActionSpace(["red", "blue", "green"])}
CONTINUOUS_ONLY = {"steer": MIXED["steer"]}
# Values whose bits a float64 detour or a text round trip would change: -0.0, the smallest subnormal,
# the float32 neighbours of 1, the largest finite float32.
EDGES = np.array([0.0, -0.0, 1e-45, -1e-45, np.nextafter(np.float32(1), np.float32(0)),
                  np.nextafter(np.float32(1), np.float32(2)), np.finfo(np.float32).max, -1.0], np.float32)


def continuous_rows(rng, n_episodes, action_space, probs=False, first_episode=0):
    """Whole episodes of random rows of ``CONT_OBS`` and ``action_space`` (continuous actions' values:
    random bits among ``EDGES`` and uniform draws; final rows: no actions)."""
    ep, step, final, counts, glob_rows = [], [], [], {t: [] for t in CONT_OBS.entities}, []
    cols = {a: {"actors": [], "n": [], "low": [], "high": [], "mask": [], "action": [], "n_action": [], "probs": [],
                "widths": []} for a in action_space}
    for e in range(first_episode, first_episode + n_episodes):
        length = int(rng.integers(1, 5))
        for s in range(length + 1):
            ep.append(e), step.append(s), final.append(s == length)
            n = {t: int(rng.integers(0, 4)) for t in CONT_OBS.entities}
            for t in CONT_OBS.entities:
                counts[t].append(n[t])
            glob_rows.append(rng.normal(size=(1, 1)).astype(np.float32))
            n_total = sum(n.values())
            for a, space in action_space.items():
                c = cols[a]
                if isinstance(space, GlobalContinuousActionSpace):
                    actors = np.array([n_total] if rng.random() < 0.8 else [], np.int64)
                else:
                    actors = np.flatnonzero(rng.random(n["Boat"]) < 0.7)  # boats come first in the step's entities
                k = len(actors)
                c["actors"].append(actors), c["n"].append(k)
                acting = k if s < length else 0
                if isinstance(space, CONTINUOUS_SPACES):
                    width = len(space)
                    low = rng.uniform(-2, 0, (k, width)).astype(np.float32)
                    c["low"].append(low), c["high"].append(low + rng.uniform(0, 3, (k, width)).astype(np.float32))
                    values = np.where(rng.random((acting, width)) < 0.5, rng.choice(EDGES, (acting, width)),
                                      rng.normal(size=(acting, width))).astype(np.float32)
                    c["action"].append(values)
                else:
                    c["mask"].append(rng.random((k, len(space))) < 0.7)
                    c["action"].append(rng.integers(0, len(space), (acting, 1)))
                    for _ in range(acting):
                        c["probs"].append(rng.random((len(space), 1)).astype(np.float32))
                        c["widths"].append(len(space))
                c["n_action"].append(acting)
    n_rows = len(ep)
    entities = {t: ragged_from_arrays(rng.normal(size=(sum(counts[t]), len(e.features))).astype(np.float32),
                                      counts[t], np.float32) for t, e in CONT_OBS.entities.items()}
    entities[GLOBAL_ENTITY] = ragged_from_arrays(np.concatenate(glob_rows), np.ones(n_rows, np.int64), np.float32)
    visible = {t: ragged_from_arrays(rng.random((sum(counts[t]), 1)) < 0.8, counts[t], np.bool_)
               for t in CONT_OBS.entities}
    masks, action, prob = {}, {}, {}
    for a, space in action_space.items():
        c = cols[a]
        actors = ragged_from_arrays(np.concatenate(c["actors"]).reshape(-1, 1), c["n"], np.int64)
        if isinstance(space, CONTINUOUS_SPACES):
            width = len(space)
            masks[a] = {"actors": actors,
                        "low": ragged_from_arrays(np.concatenate(c["low"]).reshape(-1, width), c["n"], np.float32),
                        "high": ragged_from_arrays(np.concatenate(c["high"]).reshape(-1, width), c["n"], np.float32)}
            action[a] = ragged_from_arrays(np.concatenate(c["action"]).reshape(-1, width), c["n_action"], np.float32)
            continue
        masks[a] = {"actors": actors, "mask": ragged_from_arrays(np.concatenate(c["mask"]).reshape(-1, len(space)),
                                                                 c["n"], np.bool_)}
        action[a] = ragged_from_arrays(np.concatenate(c["action"]).reshape(-1, 1), c["n_action"], np.int64)
        if probs:
            flat = np.concatenate(c["probs"]) if c["probs"] else np.zeros((0, 1), np.float32)
            prob[a] = (ragged_from_arrays(flat, c["widths"], np.float32), ~np.array(final))
    terminal = np.array(final) & (rng.random(n_rows) < 0.5)
    return Rows(np.array(ep, np.int64), np.array(step, np.int64), np.array(final), entities, visible, masks, action,
                rng.normal(size=n_rows).astype(np.float32), terminal, np.array(final) & ~terminal, probs=prob)


def assert_bits_equal(a, b):
    """Every float of the continuous actions' values and bounds has the same bits."""
    for name in a.action:
        arrays = [(a.action[name], b.action[name])] + [(a.masks[name][k], b.masks[name][k])
                                                       for k in ("low", "high") if k in a.masks[name]]
        for x, y in arrays:
            x, y = x.as_array(), y.as_array()
            assert x.dtype == y.dtype and x.shape == y.shape, name
            if x.dtype == np.float32:
                assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), name


@pytest.mark.parametrize("space", ["mixed", "continuous only"])
@pytest.mark.parametrize("probs", [False, True])
def test_continuous_actions_written_read_back_bit_exact(tmp_path, space, probs):
    action_space = MIXED if space == "mixed" else CONTINUOUS_ONLY
    rng = np.random.default_rng(7)
    written = [continuous_rows(rng, 1, action_space, probs and space == "mixed", first_episode=k) for k in range(6)]
    with DatasetWriter(str(tmp_path), CONT_OBS, action_space, probs=probs, rows_per_part=7) as writer:
        for rows in written:
            writer.write(rows)
    dataset = Dataset(str(tmp_path))
    assert len(dataset.paths) > 1 and dataset.probs == (probs and space == "mixed")  # no table: no probs
    from entmachin.data import concat_rows

    expected = concat_rows(written)
    read = dataset.read()
    assert_rows_equal(read, expected)
    assert_bits_equal(read, expected)
    assert read.action["steer"].as_array().dtype == np.float32 and read.action["steer"].size2() == 2
    assert (read.action["steer"].size1()[read.final] == 0).all()
    assert set(read.probs) == ({"flag"} if dataset.probs else set())
    # take / concat keep continuous values (and the probabilities of the discrete actors beside them)
    index = np.random.default_rng(0).permutation(len(expected))
    again = concat_rows([expected.take(index[:10]), expected.take(index[10:])])
    assert_rows_equal(again, expected.take(index))
    assert_bits_equal(again, expected.take(index))


def test_continuous_columns_are_fixed_size_float_lists_without_probs(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with DatasetWriter(str(tmp_path), CONT_OBS, MIXED, probs=True) as writer:
        writer.write(continuous_rows(np.random.default_rng(1), 3, MIXED, probs=True))
    found = pq.read_schema(Dataset(str(tmp_path)).paths[0])
    values = {"steer": pa.list_(pa.list_(pa.float32(), 2)), "wind": pa.list_(pa.list_(pa.float32(), 1))}
    for name, typ in values.items():
        for kind in ("low", "high", "action"):
            assert found.field(f"{kind}/{name}").type.equals(typ), (kind, name)
        assert found.field(f"actors/{name}").type.equals(pa.list_(pa.int64()))
        assert f"probs/{name}" not in found.names and f"mask/{name}" not in found.names
    assert found.field("action/flag").type.equals(pa.list_(pa.int64())) and "probs/flag" in found.names
    table = pq.read_table(Dataset(str(tmp_path)).paths[0])  # what pandas / DuckDB see: rows of floats per actor
    steer = table.column("action/steer").to_pylist()
    assert all(len(per_actor) == 2 for row in steer for per_actor in row)


def test_a_part_whose_continuous_columns_differ_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    directory = str(tmp_path / "d")
    with DatasetWriter(directory, CONT_OBS, MIXED, probs=True) as writer:
        writer.write(continuous_rows(rng, 2, MIXED, probs=True))
    part = Dataset(directory).paths[0]
    original = pq.read_table(part)
    wider = {**MIXED, "steer": ContinuousActionSpace(low=-1.0, high=1.0, names=["a", "b", "c"])}
    other = str(tmp_path / "wider")
    with DatasetWriter(other, CONT_OBS, wider, probs=True) as writer:
        writer.write(continuous_rows(rng, 2, wider, probs=True))
    pq.write_table(pq.read_table(Dataset(other).paths[0]), part)  # 3 values a row where the dataset has 2
    _describe_part_as_it_is(directory, part)
    with pytest.raises(DatasetError, match=r"part-00000.parquet: column 'low/steer' is .*the dataset's spaces"):
        Dataset(directory).read_part(part)
    categorical = {**MIXED, "steer": CategoricalActionSpace(["left", "right"])}
    other = str(tmp_path / "categorical")
    with DatasetWriter(other, CONT_OBS, categorical) as writer:
        writer.write(continuous_rows(rng, 2, categorical))
    table = pq.read_table(Dataset(other).paths[0])
    pq.write_table(table, part)  # the action recorded as choices
    _describe_part_as_it_is(directory, part)
    with pytest.raises(DatasetError, match="no column 'low/steer'"):
        Dataset(directory).read_part(part)
    n_actors = [len(row) for row in original.column("actors/steer").to_pylist()]
    extra = pa.array([[[0.5]] * n for n in n_actors], pa.list_(pa.list_(pa.float32())))
    pq.write_table(original.append_column("probs/steer", extra), part)  # a continuous action has no probabilities
    _describe_part_as_it_is(directory, part)
    with pytest.raises(DatasetError, match="unexpected column 'probs/steer'"):
        Dataset(directory).read_part(part)


def test_a_recorder_ends_episodes_with_empty_float_actions_and_refuses_continuous_probs(tmp_path):
    from entmachin.data.recorder import Recorder
    from entmachin.env import EnvList, random_actions

    from test.model._zoo import Fleet

    envs = EnvList(Fleet, 3, seed=0)
    obs_space, action_space = envs.obs_space(), envs.action_space()
    writer = DatasetWriter(str(tmp_path), obs_space, action_space, probs=True)
    recorder = Recorder(writer, 3, episodes=4)
    rng = np.random.default_rng(0)
    obs = envs.reset()
    n_flags = obs.action_masks["flag"].actors.items()
    flag = {"flag": ragged_from_arrays(np.full((2 * n_flags, 1), 0.5, np.float32), np.full(n_flags, 2), np.float32)}
    actions = random_actions(obs, action_space, rng)
    with pytest.raises(ValueError, match=r"probs\['steer'\].*continuous"):
        recorder.step(obs, actions, envs.act(actions), {**flag, "steer": flag["flag"]})
    recorder = Recorder(DatasetWriter(str(tmp_path / "again"), obs_space, action_space), 3, episodes=4)
    obs = envs.reset()
    while not recorder.done:
        actions = random_actions(obs, action_space, rng)
        nxt = envs.act(actions)
        recorder.step(obs, actions, nxt)
        obs = nxt
    recorder.close()
    rows = Dataset(str(tmp_path / "again")).read()
    assert len(np.unique(rows.episode)) == 4 and rows.final.sum() == 4
    for name, width in (("steer", 2), ("wind", 1)):
        values = rows.action[name]
        assert values.as_array().dtype == np.float32 and values.size2() == width
        assert (values.size1()[rows.final] == 0).all() and (values.size1()[~rows.final] > 0).all()
        acting = rows.take(np.flatnonzero(~rows.final))
        low, high = acting.masks[name]["low"].as_array(), acting.masks[name]["high"].as_array()
        assert ((acting.action[name].as_array() >= low) & (acting.action[name].as_array() <= high)).all()
