"""A dataset detects damage: each part's size, rows and SHA-256 in the description, Parquet's page
checksums, one writer per directory, and readers that see only complete parts."""
import hashlib
import json
import logging
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from entmachin.data import Dataset, DatasetError, DatasetWriter  # noqa: E402
from test.data.test_dataset import ACTION_SPACE, OBS_SPACE, assert_rows_equal, random_rows  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_dataset(directory, n_parts=2, seed=0):
    rng = np.random.default_rng(seed)
    with DatasetWriter(str(directory), OBS_SPACE, ACTION_SPACE, rows_per_part=1) as writer:
        for _ in range(n_parts):
            writer.write(random_rows(rng, 2))
    return str(directory)


def description(directory):
    return json.loads(open(os.path.join(directory, "dataset.json")).read())


def rewrite_description(directory, document):
    with open(os.path.join(directory, "dataset.json"), "w") as f:
        json.dump(document, f)


def test_the_description_lists_each_part_with_its_size_rows_and_sha256(tmp_path):
    directory = write_dataset(tmp_path / "d")
    parts = description(directory)["parts"]
    assert [p["file"] for p in parts] == ["part-00000.parquet", "part-00001.parquet"]
    for entry in parts:
        data = open(os.path.join(directory, entry["file"]), "rb").read()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["rows"] == pq.read_metadata(os.path.join(directory, entry["file"])).num_rows
        column = pq.ParquetFile(os.path.join(directory, entry["file"])).metadata.row_group(0).column(0)
        assert column.total_compressed_size > 0
    assert Dataset(directory).checked and sorted(os.listdir(directory)) == ["dataset.json", "part-00000.parquet",
                                                                            "part-00001.parquet"]


def _page_end(path):
    """The offset of the last byte of the first column chunk's data (inside a data page)."""
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    return start + column.total_compressed_size - 1


def flip_page_byte(part):
    """Flips one bit inside ``part``'s first data page; returns the file's new bytes."""
    data = bytearray(open(part, "rb").read())
    data[_page_end(part)] ^= 0x01
    open(part, "wb").write(bytes(data))
    return bytes(data)


def test_a_flipped_byte_in_a_data_page_is_named(tmp_path):
    directory = write_dataset(tmp_path / "d")
    flip_page_byte(os.path.join(directory, "part-00001.parquet"))
    dataset = Dataset(directory)
    dataset.read_part(dataset.paths[0])  # the other part reads
    with pytest.raises(DatasetError, match="part-00001.parquet: damaged: its SHA-256 differs"):
        dataset.read()


def test_parquets_page_checksums_catch_what_a_rewritten_description_hides(tmp_path):
    directory = write_dataset(tmp_path / "d")
    data = flip_page_byte(os.path.join(directory, "part-00000.parquet"))
    document = description(directory)  # the checksum made to match, as someone would who edits both
    document["parts"][0]["sha256"] = hashlib.sha256(data).hexdigest()
    rewrite_description(directory, document)
    with pytest.raises(DatasetError, match=r"part-00000.parquet: damaged part .*(CRC|checksum)"):
        Dataset(directory).read()


def test_rows_missing_parts_and_a_damaged_list_are_named(tmp_path):
    directory = write_dataset(tmp_path / "d")
    document = description(directory)
    document["parts"][1]["rows"] += 1
    rewrite_description(directory, document)
    with pytest.raises(DatasetError, match=r"part-00001.parquet: holds \d+ rows; dataset.json records"):
        Dataset(directory).read()
    document["parts"][1]["rows"] -= 1
    document["parts"].append({**document["parts"][1], "file": "part-00002.parquet"})
    rewrite_description(directory, document)
    with pytest.raises(DatasetError, match=r"part-00002.parquet: missing; .*dataset.json lists 3 parts"):
        Dataset(directory)
    document["parts"][2] = {"file": "../elsewhere.parquet", "rows": 1, "bytes": 1, "sha256": "0"}
    rewrite_description(directory, document)
    with pytest.raises(DatasetError, match="'parts' is damaged"):
        Dataset(directory)


def test_a_part_the_description_does_not_list_is_never_read(tmp_path):
    directory = write_dataset(tmp_path / "d")
    expected = Dataset(directory).read()
    os.link(os.path.join(directory, "part-00000.parquet"), os.path.join(directory, "part-00002.parquet"))
    dataset = Dataset(directory)
    assert [os.path.basename(p) for p in dataset.paths] == ["part-00000.parquet", "part-00001.parquet"]
    assert_rows_equal(dataset.read(), expected)


def test_a_reader_sees_only_the_parts_written_when_it_opened(tmp_path):
    rng = np.random.default_rng(3)
    directory = str(tmp_path / "d")
    with DatasetWriter(directory, OBS_SPACE, ACTION_SPACE, rows_per_part=10 ** 6) as writer:
        writer.write(random_rows(rng, 2))
        writer.flush()
        early = Dataset(directory)
        writer.write(random_rows(rng, 2))
        writer.flush()
        assert len(early.paths) == 1 and len(Dataset(directory).paths) == 2
        early.read()


def test_a_second_writer_in_the_same_directory_is_refused(tmp_path):
    directory = str(tmp_path / "d")
    other = ("from entmachin.data import DatasetError, DatasetWriter\n"
             "from test.data.test_dataset import ACTION_SPACE, OBS_SPACE\n"
             f"try:\n    DatasetWriter({directory!r}, OBS_SPACE, ACTION_SPACE)\n"
             "except DatasetError as e:\n    print(e)\n")
    with DatasetWriter(directory, OBS_SPACE, ACTION_SPACE) as writer:
        writer.write(random_rows(np.random.default_rng(0), 1))
        found = subprocess.run([sys.executable, "-c", other], cwd=REPO, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": REPO})
    assert "another writer holds" in found.stdout and ".writer.lock" in found.stdout, found.stderr
    assert len(Dataset(directory).read()) > 0 and not os.path.exists(os.path.join(directory, ".writer.lock"))
    with pytest.raises(DatasetError, match="already holds a dataset"):
        DatasetWriter(directory, OBS_SPACE, ACTION_SPACE)


def test_a_dataset_from_before_part_checksums_reads_with_a_warning(tmp_path, caplog):
    directory = write_dataset(tmp_path / "d")
    expected = Dataset(directory).read()
    document = description(directory)
    del document["parts"]
    rewrite_description(directory, document)
    with caplog.at_level(logging.WARNING):
        dataset = Dataset(directory)
    assert not dataset.checked
    assert "written before datasets recorded their parts' checksums" in caplog.text
    assert_rows_equal(dataset.read(), expected)


def test_datasets_get_the_permissions_the_umask_gives(tmp_path):
    previous = os.umask(0o022)
    try:
        directory = write_dataset(tmp_path / "d")
    finally:
        os.umask(previous)
    written = [os.path.join(directory, name) for name in os.listdir(directory)]
    assert {p: stat.S_IMODE(os.stat(p).st_mode) for p in written} == {p: 0o644 for p in written}
