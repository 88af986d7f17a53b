"""Buffer.save / Buffer.load: full round trips, and clear errors for bad files."""

import json
import os
import re
import pickle
import zipfile

import numpy as np
import pytest
import torch

from entmachin.buffer import Buffer, PrioritizedBuffer, Transition
from entmachin.ragged import ragged_from_arrays, ragged_tensor_equal


def _entity_step(rng, i, n_rows):
    counts = rng.integers(0, 4, n_rows)
    flat = rng.standard_normal((int(counts.sum()), 2)).astype(np.float32)
    actors = rng.integers(0, 3, n_rows)
    return Transition(
        {"entities": {"Robot": ragged_from_arrays(flat, counts)}, "global": np.full((n_rows, 1), i, np.float32)},
        {"action": {"move": ragged_from_arrays(np.arange(actors.sum(), dtype=np.int64)[:, None], actors)}},
        {"entities": {"Robot": ragged_from_arrays(flat + 1, counts)}, "global": np.full((n_rows, 1), i + 1, np.float32)},
        np.full(n_rows, float(i), np.float32),
        np.zeros(n_rows, np.bool_),
        info={"step": i, "tags": [i, "x"]},
    )


def _filled(cls=Buffer, n_steps=9, **kwargs):
    rng = np.random.default_rng(0)
    buffer = cls(7, seed=3, **kwargs)
    for i in range(n_steps):
        buffer.append(_entity_step(rng, i, int(rng.integers(1, 3))))
    return buffer


def _assert_same_samples(a, b):
    assert a[0] == b[0]
    for x, y in zip(a[1], b[1]):
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for key in x:
                _assert_same_samples((0, (x[key],)), (0, (y[key],)))
        elif isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
        elif hasattr(x, "lengths"):
            assert ragged_tensor_equal(x, y)
        else:
            assert x == y


def test_round_trip_keeps_rows_ring_position_ids_and_random_state(tmp_path):
    buffer = _filled()
    path = str(tmp_path / "buffer.entbuf")
    buffer.save(path)
    loaded = Buffer.load(path, allow_pickle=True)
    assert type(loaded) is Buffer and loaded.size() == buffer.size() == 7
    for field in ("pos", "size", "n_written"):
        assert getattr(loaded._storage, field) == getattr(buffer._storage, field)
    assert loaded.schema == buffer.schema
    _assert_same_samples(buffer.sample_batch(0, sample_method="all"), loaded.sample_batch(0, sample_method="all"))
    _assert_same_samples(buffer.sample_batch(4), loaded.sample_batch(4))  # same rows drawn next
    rng = np.random.default_rng(5)
    for i in range(4):  # both keep working the same way after the load, through a wrap-around
        step = _entity_step(rng, 100 + i, 2)
        buffer.append(step)
        loaded.append(step)
    _assert_same_samples(buffer.sample_batch(0, sample_method="all"), loaded.sample_batch(0, sample_method="all"))


def test_round_trip_of_dense_fast_path_buffers_and_empty_ones(tmp_path):
    buffer = Buffer(4)
    for i in range(6):
        buffer.append({"state": {"s": torch.full((1, 2), float(i))}, "action": {"a": torch.zeros(1, 1)},
                       "next_state": {"s": torch.zeros(1, 2)}, "reward": float(i), "terminal": i == 5})
    buffer.save(str(tmp_path / "dense"))
    loaded = Buffer.load(str(tmp_path / "dense"))
    _assert_same_samples(buffer.sample_batch(0, sample_method="all"), loaded.sample_batch(0, sample_method="all"))
    assert loaded._fast is not None
    Buffer(3).save(str(tmp_path / "empty"))
    empty = Buffer.load(str(tmp_path / "empty"))
    assert empty.size() == 0 and empty.schema is None and empty.buffer_size == 3
    buffer.clear()
    buffer.save(str(tmp_path / "cleared"))
    cleared = Buffer.load(str(tmp_path / "cleared"), buffer_device="cpu")
    assert cleared.size() == 0 and cleared.schema == buffer.schema


def test_prioritized_round_trip(tmp_path):
    buffer = _filled(PrioritizedBuffer, alpha=0.5, beta=0.3)
    _, _, index, _ = buffer.sample_batch(3)
    buffer.update_priority([5.0, 0.0, 2.0], index)
    buffer.save(str(tmp_path / "p"))
    loaded = PrioritizedBuffer.load(str(tmp_path / "p"), allow_pickle=True)
    assert (loaded.alpha, loaded.beta, loaded.curr_beta, loaded.epsilon) == (0.5, 0.3, buffer.curr_beta, buffer.epsilon)
    np.testing.assert_array_equal(loaded._tree.leaves, buffer._tree.leaves)
    a, b = buffer.sample_batch(5), loaded.sample_batch(5)
    _assert_same_samples(a[:2], b[:2])
    np.testing.assert_array_equal(a[2], b[2])
    np.testing.assert_array_equal(a[3], b[3])
    with pytest.raises(ValueError, match="holds a PrioritizedBuffer; load it with PrioritizedBuffer.load"):
        Buffer.load(str(tmp_path / "p"))


def test_arrays_are_stored_without_pickle(tmp_path):
    path = str(tmp_path / "b")
    _filled().save(path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        header = json.loads(archive.read("header.json"))
    assert header["format"] == "entmachin-buffer" and "custom.dill" in names
    assert all(name.endswith(".bin") for name in names if name.startswith("arrays/"))


def test_truncated_and_foreign_files_raise(tmp_path):
    path = tmp_path / "b"
    _filled().save(str(path))
    data = path.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 30):
        (tmp_path / "cut").write_bytes(data[:cut])
        with pytest.raises(ValueError, match="truncated, corrupt or not an entmachin buffer file"):
            Buffer.load(str(tmp_path / "cut"))
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # inside the stored arrays: the zip checksum catches it
    (tmp_path / "flipped").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="truncated, corrupt or not an entmachin buffer file"):
        Buffer.load(str(tmp_path / "flipped"))
    (tmp_path / "pickle").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="not an entmachin buffer file"):
        Buffer.load(str(tmp_path / "pickle"))
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match=r"a zip archive but not an entmachin buffer file \(no header.json\)"):
        Buffer.load(str(tmp_path / "other.zip"))
    with pytest.raises(FileNotFoundError):
        Buffer.load(str(tmp_path / "missing"))


def test_inconsistent_headers_raise(tmp_path):
    path = tmp_path / "b"
    _filled().save(str(path))

    def rewrite(edit, name, blobs=None):
        with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp_path / name, "w") as target:
            for item in source.namelist():
                data = (blobs or {}).get(item, source.read(item))
                if item == "header.json":
                    header = json.loads(data)
                    edit(header)
                    data = json.dumps(header)
                target.writestr(item, data)
        return str(tmp_path / name)

    with pytest.raises(ValueError, match="unsupported buffer file version 99"):
        Buffer.load(rewrite(lambda h: h.update(version=99), "v"), allow_pickle=True)
    with pytest.raises(ValueError, match=r"array 0 holds \d+ bytes, expected"):
        Buffer.load(rewrite(lambda h: h["arrays"][0].update(shape=[3, 3]), "shape"), allow_pickle=True)
    with pytest.raises(ValueError, match=r"custom attribute 'info' holds 7 values, expected 6"):
        Buffer.load(rewrite(lambda h: h.update(size=6), "size"), allow_pickle=True)
    with pytest.raises(ValueError, match="unknown dtype 'float99'"):
        Buffer.load(rewrite(lambda h: h["arrays"][0].update(dtype="float99"), "dtype"), allow_pickle=True)
    with zipfile.ZipFile(path) as archive:  # array 1: the lengths of the first ragged leaf
        zero_lengths = bytes(len(archive.read("arrays/1.bin")))
    with pytest.raises(ValueError, match=r"state\['entities'\]\['Robot'\]: the file's lengths \(int64 \(7,\)\) do not describe 7 rows of the \d+ saved items"):
        Buffer.load(rewrite(lambda h: None, "lengths", {"arrays/1.bin": zero_lengths}), allow_pickle=True)
    with pytest.raises(ValueError, match="the header has no 'n_written'; expected an int >= 0"):
        Buffer.load(rewrite(lambda h: h.pop("n_written"), "missing"), allow_pickle=True)


def _rewrite(path, target, edit=None, blobs=None, drop=()):
    """Copies the buffer file ``path`` to ``target``, editing its header and replacing or dropping members."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(target, "w") as out:
        for item in source.namelist():
            if item in drop:
                continue
            data = (blobs or {}).get(item, source.read(item))
            if item == "header.json" and edit is not None:
                header = json.loads(data)
                edit(header)
                data = json.dumps(header)
            out.writestr(item, data)
    return str(target)


# a pickle whose loading runs code (it would raise RuntimeError if ever unpickled)
_PAYLOAD = b"cbuiltins\nexec\n(S'raise RuntimeError(\"the pickled part ran\")'\ntR."


def test_load_refuses_a_pickled_part_unless_allowed(tmp_path):
    path = str(tmp_path / "b")
    buffer = _filled()
    buffer.save(path)
    with pytest.raises(ValueError, match=rf"{re.escape(path)}.*custom attribute\(s\) \['info'\].*allow_pickle=True"):
        Buffer.load(path)
    loaded = Buffer.load(path, allow_pickle=True)
    _assert_same_samples(buffer.sample_batch(0, sample_method="all"), loaded.sample_batch(0, sample_method="all"))
    hostile = _rewrite(path, tmp_path / "hostile", blobs={"custom.dill": _PAYLOAD})
    with pytest.raises(ValueError, match="allow_pickle=True"):  # refused before anything is unpickled
        Buffer.load(hostile)
    plain = Buffer(4)
    plain.append({"state": {"s": torch.zeros(1, 2)}, "action": {"a": torch.zeros(1, 1)}, "next_state": {"s": torch.zeros(1, 2)},
                  "reward": 1.0, "terminal": False})
    plain.save(str(tmp_path / "plain"))
    with zipfile.ZipFile(tmp_path / "plain") as archive:
        assert "custom.dill" not in archive.namelist()  # no pickled part at all
    assert Buffer.load(str(tmp_path / "plain")).size() == 1
    buffer.clear()  # custom attributes, but no rows: nothing pickled either
    buffer.save(str(tmp_path / "cleared"))
    assert Buffer.load(str(tmp_path / "cleared")).schema == buffer.schema


def test_files_of_version_1_without_custom_attributes_load_as_before(tmp_path):
    plain = Buffer(4)
    plain.append({"state": {"s": torch.zeros(1, 2)}, "action": {"a": torch.zeros(1, 1)}, "next_state": {"s": torch.zeros(1, 2)},
                  "reward": np.full(1, 2.0, np.float32), "terminal": False})
    path = str(tmp_path / "plain")
    plain.save(path)

    def as_version_1(header):  # version 1: always a custom.dill part, sub attributes as given ([n] for a [B] value)
        header.update(version=1)
        del header["allow_nonfinite"]
        reward = next(leaf for leaf in header["schema"]["leaves"] if leaf["attr"] == "reward")
        reward["shape"] = []
        header["arrays"][3]["shape"] = [1]

    old = _rewrite(path, tmp_path / "v1", as_version_1)
    with zipfile.ZipFile(old, "a") as archive:
        archive.writestr("custom.dill", _PAYLOAD)  # never unpickled: the schema has no custom attribute
    loaded = Buffer.load(old)
    _, (reward,) = loaded.sample_batch(0, sample_method="all", sample_attrs=["reward"])
    assert reward.tolist() == [[2.0]] and not loaded.allow_nonfinite


def test_every_load_error_names_the_file_and_what_it_expected(tmp_path):
    path = str(tmp_path / "b")
    _filled().save(path)
    data = open(path, "rb").read()

    def fails(target, match):
        with pytest.raises(ValueError, match=re.escape(str(target)) + ".*" + match):
            Buffer.load(str(target), allow_pickle=True)

    (tmp_path / "random").write_bytes(np.random.default_rng(0).bytes(4096))
    fails(tmp_path / "random", "not an entmachin buffer file")
    (tmp_path / "random_zip").write_bytes(b"PK\x03\x04" + np.random.default_rng(1).bytes(4096))
    fails(tmp_path / "random_zip", "truncated, corrupt or not an entmachin buffer file")
    for cut in (0, 3, 100, len(data) // 3, len(data) - 1):
        (tmp_path / f"cut{cut}").write_bytes(data[:cut])
        fails(tmp_path / f"cut{cut}", "truncated, corrupt or not an entmachin buffer file")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "torch_file")
    fails(tmp_path / "torch_file", r"not an entmachin buffer file \(no header.json\)")

    def leaf(header, name):
        return next(item for item in header["schema"]["leaves"] if item["attr"] == "state" and item["path"][-1] == name)

    fails(_rewrite(path, tmp_path / "width", lambda h: leaf(h, "Robot").update(shape=[3])),
          r"state\['entities'\]\['Robot'\]: the file holds float32 items of shape \(2,\), but its header's schema says float32 items of shape \(3,\)")
    fails(_rewrite(path, tmp_path / "kind", lambda h: h["arrays"][0].update(dtype="int32")),
          r"state\['entities'\]\['Robot'\]: the file holds int32 items of shape \(2,\), but its header's schema says float32")
    fails(_rewrite(path, tmp_path / "rows", lambda h: h["arrays"][2].update(shape=[1, 7])),
          r"state\['global'\]: the file holds float32 rows of shape \(7,\) for 1 rows, but its header's schema says float32 rows of shape \(1,\) for 7 rows")
    fails(_rewrite(path, tmp_path / "few", lambda h: h["arrays"].pop()), r"the header lists \d+ arrays, but the schema needs \d+")
    fails(_rewrite(path, tmp_path / "missing", drop=("arrays/3.bin",)), r"arrays/3.bin is missing")
    fails(_rewrite(path, tmp_path / "size", lambda h: h.update(buffer_size="seven")), r"'buffer_size' is 'seven'; expected an int >= 1")
    fails(_rewrite(path, tmp_path / "pos", lambda h: h.update(pos=7)), r"ring position 7 / size 7 do not fit buffer_size 7")
    fails(_rewrite(path, tmp_path / "neg", lambda h: h.update(pos=-1)), r"the header's 'pos' is -1; expected an int >= 0")
    fails(_rewrite(path, tmp_path / "rng", lambda h: h.update(rng_state={"state": 3})), r"'rng_state'")
    fails(_rewrite(path, tmp_path / "schema", lambda h: h["schema"].update(templates={})), r"'schema'")
    fails(_rewrite(path, tmp_path / "dill", blobs={"custom.dill": b"\x80\x04garbage"}),
          r"the pickled part \(custom attribute\(s\) \['info'\]\) cannot be read")
    fails(_rewrite(path, tmp_path / "customs", blobs={"custom.dill": pickle.dumps([[1, 2]])}),
          r"custom attribute 'info' holds 2 values, expected 7")
    (tmp_path / "header").write_bytes(data)
    fails(_rewrite(path, tmp_path / "json", blobs={"header.json": b"{not json"}), "truncated, corrupt or not an entmachin buffer file")
    prioritized = _filled(PrioritizedBuffer)
    prioritized.save(str(tmp_path / "p"))
    with zipfile.ZipFile(tmp_path / "p") as archive:
        last = len(json.loads(archive.read("header.json"))["arrays"]) - 1
        negative = np.frombuffer(archive.read(f"arrays/{last}.bin"), np.float64) * -1
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "q")) + r".*priorities must be finite and >= 0"):
        PrioritizedBuffer.load(_rewrite(str(tmp_path / "p"), tmp_path / "q", blobs={f"arrays/{last}.bin": negative.tobytes()}), allow_pickle=True)


def _schema_leaf(header, name):
    return next(item for item in header["schema"]["leaves"] if item["path"] and item["path"][-1] == name)


@pytest.mark.parametrize(
    "edit, blobs, drop, match",
    [
        (lambda h: _schema_leaf(h, "Robot").update(kind="sparse"), None, (), r"unknown leaf kind 'sparse'"),
        (lambda h: h["schema"]["templates"]["state"].update(extra=99), None, (), r"'schema' templates do not number"),
        (lambda h: h["schema"]["templates"]["state"].update(Robot=1.0), None, (), r"'schema' is malformed .*expected a leaf index"),
        (lambda h: h.update(schema=None), None, (), r"the header has rows but no 'schema'"),
        (lambda h: h.pop("format"), None, (), r"not an entmachin buffer file \(its header.json names no format"),
        (lambda h: h.update(buffer_device="abacus"), None, (), r"the header's settings are invalid"),
        (None, None, ("custom.dill",), r"custom.dill \(custom attribute\(s\) \['info'\]\) is missing"),
        (None, {"custom.dill": pickle.dumps({"info": []})}, (), r"the pickled part holds dict a dict, expected one list per custom attribute \['info'\]"),
    ],
)
def test_more_damaged_headers_name_the_file(tmp_path, edit, blobs, drop, match):
    path = str(tmp_path / "b")
    _filled().save(path)
    target = _rewrite(path, tmp_path / "edited", edit, blobs, drop)
    with pytest.raises(ValueError, match=re.escape(target) + ".*" + match):
        Buffer.load(target, allow_pickle=True)


def test_damaged_prioritized_state_names_the_file(tmp_path):
    path = str(tmp_path / "p")
    _filled(PrioritizedBuffer).save(path)
    with zipfile.ZipFile(path) as archive:
        last = len(json.loads(archive.read("header.json"))["arrays"]) - 1
        priorities = archive.read(f"arrays/{last}.bin")

    def as_float32(header):
        header["arrays"][-1]["dtype"] = "float32"
        header["arrays"][-1]["shape"] = [len(priorities) // 4]

    cases = [
        (_rewrite(path, tmp_path / "f32", as_float32), r"the file holds priorities torch.float32 \(14,\), expected float64 \(7,\)"),
        (_rewrite(path, tmp_path / "beta", lambda h: h["prioritized"].update(curr_beta=2.0)), r"the header's curr_beta is 2.0; expected a number in \[0, 1\]"),
    ]
    for target, match in cases:
        with pytest.raises(ValueError, match=re.escape(target) + ".*" + match):
            PrioritizedBuffer.load(target, allow_pickle=True)


def test_a_saved_buffer_gets_the_permissions_the_umask_gives(tmp_path):
    import stat

    buffer = Buffer(4)
    buffer.append({"state": {"s": torch.zeros(1, 2)}, "action": {"a": torch.zeros(1, 1)},
                   "next_state": {"s": torch.zeros(1, 2)}, "reward": 0.0, "terminal": False})
    previous = os.umask(0o022)
    try:
        buffer.save(str(tmp_path / "b"))
    finally:
        os.umask(previous)
    assert [(name, stat.S_IMODE(os.stat(tmp_path / name).st_mode)) for name in os.listdir(tmp_path)] == [("b", 0o644)]
