"""An exported policy carries the checksum of its graph, weights and metadata, and ``OnnxPolicy``
refuses a file that differs from it, naming what differs."""
import json
import logging
import os
import stat

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from entmachin import export_checksum  # noqa: E402
from entmachin.deploy import OnnxPolicy, PolicyFileError  # noqa: E402
from entmachin.env.examples import MineSweeper  # noqa: E402
from entmachin.model import MLPActor, RogueNet  # noqa: E402
from entmachin.run.export import export_policy  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    env = MineSweeper()
    path = str(tmp_path_factory.mktemp("export") / "policy.onnx")
    export_policy(RogueNet(env.obs_space(), env.action_space()), path)
    return path


def write(tmp_path, data, name="changed.onnx"):
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_the_checksum_names_the_graph_every_weight_and_the_metadata(exported):
    model = onnx.load(exported)
    entry = {p.key: p.value for p in model.metadata_props}[export_checksum.KEY]
    saved = json.loads(entry)
    assert saved["algorithm"] == "sha256" and len(saved["graph"]) == len(saved["metadata"]) == 64
    assert set(saved["weights"]) == {t.name for t in model.graph.initializer}
    assert export_checksum.differences(open(exported, "rb").read(), entry) == []


def test_a_flipped_byte_inside_a_weight_is_named(exported, tmp_path):
    model = onnx.load(exported)
    data = bytearray(open(exported, "rb").read())
    weight = max(model.graph.initializer, key=lambda t: len(t.raw_data))  # a float weight, stored raw
    at = bytes(data).index(weight.raw_data) + len(weight.raw_data) // 2
    data[at] ^= 0x40  # one bit of one float: the file still loads and runs
    with pytest.raises(PolicyFileError, match=rf"changed.onnx: damaged.*weight '{weight.name}' differs"):
        OnnxPolicy(write(tmp_path, bytes(data)))


def test_a_changed_graph_or_metadata_is_named(exported, tmp_path):
    model = onnx.load(exported)
    model.graph.node[0].name = "renamed"  # re-saved by onnx: the graph's bytes change, the weights do not
    with pytest.raises(PolicyFileError, match=r"the graph \(its operations, inputs or outputs\) differs") as info:
        OnnxPolicy(write(tmp_path, model.SerializeToString()))
    assert "weight" not in str(info.value)
    model = onnx.load(exported)
    for p in model.metadata_props:
        if p.key == "entmachin.spaces":  # the action names a deployed policy acts by
            p.value = p.value.replace("Move", "Mvoe")
    with pytest.raises(PolicyFileError, match="the entmachin.\\* metadata differs"):
        OnnxPolicy(write(tmp_path, model.SerializeToString()))


def test_a_damaged_checksum_entry_is_named(exported, tmp_path):
    model = onnx.load(exported)
    for p in model.metadata_props:
        if p.key == export_checksum.KEY:
            p.value = "{"
    with pytest.raises(PolicyFileError, match="entmachin.checksum entry is not a checksum"):
        OnnxPolicy(write(tmp_path, model.SerializeToString()))


def test_an_export_from_before_checksums_loads_with_a_warning(exported, tmp_path, caplog):
    model = onnx.load(exported)
    kept = [p for p in model.metadata_props if p.key != export_checksum.KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    path = write(tmp_path, model.SerializeToString(), "old.onnx")
    with caplog.at_level(logging.WARNING):
        policy = OnnxPolicy(path)
    assert "old.onnx: exported before exports carried a checksum" in caplog.text
    obs = MineSweeper().reset()
    assert policy.act(obs)  # and it runs


def test_a_dense_export_is_checked_too(tmp_path):
    net = MLPActor(4, 2)
    path = str(tmp_path / "mlp.onnx")
    export_policy(net, path)
    OnnxPolicy(path)
    data = bytearray(open(path, "rb").read())
    model = onnx.load(path)
    weight = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    data[bytes(data).index(weight.raw_data)] ^= 0x01
    with pytest.raises(PolicyFileError, match="weight .* differs"):
        OnnxPolicy(write(tmp_path, bytes(data)))


def test_what_is_not_protobuf_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(export_checksum.ChecksumError, match="runs past"):
        export_checksum.checksum(b"\x3a\xff\xff")  # field 7, a length past the end
    with pytest.raises(export_checksum.ChecksumError, match="wire type 3"):
        export_checksum.checksum(b"\x3b")
    with pytest.raises(PolicyFileError, match="missing.onnx: cannot be read"):
        OnnxPolicy(str(tmp_path / "missing.onnx"))


def test_exports_get_the_permissions_the_umask_gives(exported, tmp_path):
    previous = os.umask(0o022)
    try:
        env = MineSweeper()
        path = str(tmp_path / "deployed.onnx")
        export_policy(RogueNet(env.obs_space(), env.action_space()), path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert np.array_equal(sorted(os.listdir(tmp_path)), ["deployed.onnx"])  # no temporary file left
