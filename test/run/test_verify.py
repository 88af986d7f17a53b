"""``entmachin verify``: what it checks in a run directory, a checkpoint, an export and a dataset, the
damaged and crafted files it fails, and that it unpickles nothing."""
import json
import os
import pickle
import shutil

import dill
import numpy as np
import pytest

from entmachin.run.cli import main
from entmachin.run.verify import verify
from test.run.test_trust import Payload, config, latest_manifest, replace_blob

pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from entmachin.run.export import export_run
    from entmachin.run.runner import Runner

    run_dir = str(tmp_path_factory.mktemp("verify") / "run")
    Runner(config(32), run_dir, progress=False).train()
    export_run(run_dir)
    return run_dir


@pytest.fixture
def run_dir(trained, tmp_path, monkeypatch):
    target = str(tmp_path / "run")
    shutil.copytree(trained, target)
    for module in (pickle, dill):  # verify reads pickles' opcodes; it never unpickles one
        monkeypatch.setattr(module, "loads", lambda *a, **k: pytest.fail("verify unpickled something"))
    return target


def statuses(path):
    return {(os.path.basename(f.path), f.status) for f in verify(path)}


def test_a_whole_run_verifies(run_dir, capsys):
    assert main(["verify", run_dir]) == 0
    out = capsys.readouterr().out
    assert "config.yaml: a run config" in out and "policy.onnx: its graph" in out
    assert "signed with your key" in out and "files match their sizes and SHA-256" in out
    assert "0 failed" in out and "FAILED" not in out


def test_a_damaged_file_fails_naming_it(run_dir, capsys):
    manifest = json.loads(open(latest_manifest(run_dir)).read())
    actor = os.path.join(run_dir, "checkpoints", manifest["files"]["actor"]["file"])
    data = bytearray(open(actor, "rb").read())
    data[100] ^= 0xFF
    open(actor, "wb").write(bytes(data))
    assert main(["verify", run_dir]) == 1
    out = capsys.readouterr().out
    assert f"FAILED  {actor}: the file is damaged: its SHA-256 differs" in out and "1 failed" in out


def test_crafted_pickles_fail_naming_what_they_call(run_dir, tmp_path):
    envs = replace_blob(run_dir, "envs", pickle.dumps(Payload(str(tmp_path / "ran"))))
    [found] = [f for f in verify(run_dir) if f.path == envs]
    assert found.status == "FAILED" and "not signed" in found.what
    assert "posix.system" in found.what or "os.system" in found.what
    critic = replace_blob(run_dir, "critic", _torch_file_calling_system(str(tmp_path / "ran")))
    [critic] = [f for f in verify(run_dir) if f.path == critic]
    assert critic.status == "FAILED" and "torch.load(weights_only=True) refuses" in critic.what
    assert not os.path.exists(tmp_path / "ran")


def _torch_file_calling_system(marker):
    import io

    import torch

    buffer = io.BytesIO()
    torch.save({"w": Payload(marker)}, buffer)
    return buffer.getvalue()


def test_a_foreign_but_harmless_state_is_a_warning(run_dir, tmp_path, monkeypatch):
    from entmachin.run import signing

    manifest = json.loads(open(latest_manifest(run_dir)).read())
    own = open(os.path.join(run_dir, "checkpoints", manifest["files"]["envs"]["file"]), "rb").read()
    monkeypatch.setenv(signing.KEY_ENV, str(tmp_path / "theirs.key"))
    theirs = signing.sign(signing.payload(own), "envs")
    monkeypatch.undo()
    envs = replace_blob(run_dir, "envs", theirs)
    [found] = [f for f in verify(run_dir) if f.path == envs]
    assert found.status == "warning" and "does not match this user's key" in found.what
    assert "would import from" in found.what and "entmachin" in found.what


def test_exports_are_checked(run_dir, tmp_path):
    import onnx

    path = os.path.join(run_dir, "policy.onnx")
    assert statuses(path) == {("policy.onnx", "ok")}
    model = onnx.load(path)
    weight = max(model.graph.initializer, key=lambda t: len(t.raw_data))
    data = bytearray(open(path, "rb").read())
    data[bytes(data).index(weight.raw_data) + 3] ^= 0x01
    open(path, "wb").write(bytes(data))
    [finding] = verify(path)
    assert finding.status == "FAILED" and f"weight '{weight.name}' differs" in finding.what
    text = tmp_path / "notes.onnx"
    text.write_text("hello")
    assert verify(str(text))[0].status == "FAILED"


def test_datasets_are_checked(tmp_path):
    pytest.importorskip("pyarrow")
    from test.data.test_dataset_integrity import flip_page_byte, write_dataset

    directory = write_dataset(tmp_path / "d")
    assert statuses(directory) == {("part-00000.parquet", "ok"), ("part-00001.parquet", "ok")}
    os.link(os.path.join(directory, "part-00000.parquet"), os.path.join(directory, "part-00009.parquet"))
    flip_page_byte(os.path.join(directory, "part-00001.parquet"))
    assert statuses(directory) == {("part-00000.parquet", "ok"), ("part-00001.parquet", "FAILED"),
                                   ("part-00009.parquet", "warning")}


def test_what_is_not_entmachins_is_named(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nowhere"), str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "nowhere: does not exist" in out and "is not a run directory, a checkpoint directory or a dataset" in out
    assert np.all([line.startswith("FAILED") for line in out.splitlines()[:2]])
