"""Buffer.save / Buffer.load: full round trips, and clear errors for bad files."""

import json
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
    loaded = Buffer.load(path)
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
    loaded = PrioritizedBuffer.load(str(tmp_path / "p"))
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
        Buffer.load(rewrite(lambda h: h.update(version=99), "v"))
    with pytest.raises(ValueError, match=r"array 0 holds \d+ bytes, expected"):
        Buffer.load(rewrite(lambda h: h["arrays"][0].update(shape=[3, 3]), "shape"))
    with pytest.raises(ValueError, match=r"holds \d+ rows, expected 6"):
        Buffer.load(rewrite(lambda h: h.update(size=6), "size"))
    with pytest.raises(ValueError, match="unknown dtype 'float99'"):
        Buffer.load(rewrite(lambda h: h["arrays"][0].update(dtype="float99"), "dtype"))
    with zipfile.ZipFile(path) as archive:  # array 1: the lengths of the first ragged leaf
        zero_lengths = bytes(len(archive.read("arrays/1.bin")))
    with pytest.raises(ValueError, match=r"state\['entities'\]\['Robot'\]: saved lengths do not describe"):
        Buffer.load(rewrite(lambda h: None, "lengths", {"arrays/1.bin": zero_lengths}))
    with pytest.raises(ValueError, match="header is inconsistent"):
        Buffer.load(rewrite(lambda h: h.pop("n_written"), "missing"))
