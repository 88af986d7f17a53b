"""Resume runs no code from a run directory: the environments' state is unpickled only when this
user's key signed it, or when the user says ``--trust-checkpoint``."""
import glob
import hashlib
import json
import logging
import os
import pickle
import shutil
import stat
import subprocess
import sys

import pytest

from entmachin.run import signing
from entmachin.run.config import config_from_dict
from entmachin.run.logs import RunError
from entmachin.run.runner import Runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def config(total_steps):
    return config_from_dict({
        "env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4}, "frame": {"batch_size": 16},
        "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": total_steps},
        "log": {"checkpoint_interval": 16, "eval_interval": 1000, "eval_episodes": 2},
    })


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("trained") / "run")
    Runner(config(32), run_dir, progress=False).train()
    return run_dir


@pytest.fixture
def run_dir(trained, tmp_path):
    target = str(tmp_path / "run")
    shutil.copytree(trained, target)
    return target


def files(directory):
    return {p: open(p, "rb").read() for p in sorted(glob.glob(os.path.join(directory, "**"), recursive=True))
            if os.path.isfile(p)}


def latest_manifest(run_dir):
    return max(glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_*.json")),
               key=lambda p: int(os.path.basename(p)[11:-5]))


def replace_blob(run_dir, key, data):
    """Replaces a blob of the latest checkpoint and recomputes the manifest's size and sha256, as an
    attacker would (a checksum is not a signature)."""
    path = latest_manifest(run_dir)
    manifest = json.loads(open(path).read())
    entry = manifest["files"][key]
    with open(os.path.join(run_dir, "checkpoints", entry["file"]), "wb") as f:
        f.write(data)
    entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    with open(path, "w") as f:
        json.dump(manifest, f)
    return os.path.join(run_dir, "checkpoints", entry["file"])


class Payload:
    """A pickle that, when unpickled, writes a file: the crafted environment state."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def resume(run_dir, caplog, total=48, **kwargs):
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        return Runner(config(total), run_dir, resume=True, progress=False, **kwargs).train()


@pytest.mark.parametrize("sign_with", [None, "another key"])
def test_a_crafted_environment_state_is_never_unpickled(run_dir, tmp_path, caplog, monkeypatch, sign_with):
    marker = str(tmp_path / "ran")
    blob = pickle.dumps(Payload(marker))
    if sign_with is not None:  # signed, but by someone else's key
        monkeypatch.setenv(signing.KEY_ENV, str(tmp_path / "theirs.key"))
        blob = signing.sign(blob, "envs")
        monkeypatch.undo()
    path = replace_blob(run_dir, "envs", blob)
    result = resume(run_dir, caplog)
    assert not os.path.exists(marker)
    assert result.env_steps == 48  # resumed with fresh episodes
    reason = "not signed" if sign_with is None else "does not match this user's key"
    assert os.path.basename(path) in caplog.text and reason in caplog.text and "--trust-checkpoint" in caplog.text


def test_trust_checkpoint_restores_what_the_user_accepts(run_dir, tmp_path, caplog):
    marker = str(tmp_path / "ran")
    replace_blob(run_dir, "envs", pickle.dumps(Payload(marker)))
    resume(run_dir, caplog, trust_checkpoint=True)
    assert os.path.exists(marker)  # the user said so: the pickle was unpickled
    assert "--trust-checkpoint: unpickling" in caplog.text


def test_a_changed_signed_state_is_refused_and_the_own_one_restored(run_dir, caplog):
    manifest = json.loads(open(latest_manifest(run_dir)).read())
    own = open(os.path.join(run_dir, "checkpoints", manifest["files"]["envs"]["file"]), "rb").read()
    assert signing.is_signed(own)
    resume(run_dir, caplog)  # its own state: restored, nothing said
    assert "not restored" not in caplog.text and "restart" not in caplog.text
    flipped = bytearray(own)
    flipped[-5] ^= 0x01
    replace_blob(run_dir, "envs", bytes(flipped))
    resume(run_dir, caplog, total=64)
    assert "does not match this user's key" in caplog.text


def test_a_damaged_checkpoint_refuses_resume_and_changes_nothing(run_dir):
    manifest = json.loads(open(latest_manifest(run_dir)).read())
    actor = os.path.join(run_dir, "checkpoints", manifest["files"]["actor"]["file"])
    data = bytearray(open(actor, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(actor, "wb").write(bytes(data))
    before = files(run_dir)
    with pytest.raises(RunError, match=r"actor_32\..*damaged"):
        Runner(config(48), run_dir, resume=True, progress=False).train()
    assert files(run_dir) == before


def test_trust_checkpoint_needs_resume(tmp_path):
    process = subprocess.run([sys.executable, "-m", "entmachin", "train", "Count", "--trust-checkpoint",
                              "--run-dir", str(tmp_path / "r")], cwd=REPO, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": REPO})
    assert process.returncode == 2 and "--trust-checkpoint goes with --resume" in process.stderr
    assert not os.path.exists(tmp_path / "r")


# ---------------------------------------------------------------------------- the key


def test_the_key_is_made_owner_only_and_kept(tmp_path, monkeypatch):
    path = tmp_path / "conf" / "entmachin" / "checkpoint.key"
    monkeypatch.delenv(signing.KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    assert signing.key_path() == str(path)
    with pytest.raises(signing.SignatureError, match="no signing key"):
        signing.verify(signing.MAGIC + bytes(32) + b"x", "envs")
    blob = signing.sign(b"payload", "envs")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert signing.verify(blob, "envs") == b"payload" and signing.sign(b"payload", "envs") == blob
    with pytest.raises(signing.SignatureError, match="does not match"):
        signing.verify(blob, "other purpose")
    os.chmod(path, 0o644)
    with pytest.raises(signing.SignatureError, match=r"can be read by others.*chmod 600"):
        signing.verify(blob, "envs")
    os.chmod(path, 0o600)
    path.write_text("not hex\n")
    with pytest.raises(signing.SignatureError, match="checkpoint.key is damaged"):
        signing.sign(b"payload", "envs")


def test_a_key_that_cannot_be_used_keeps_the_run_going_without_environment_state(tmp_path, caplog, monkeypatch):
    key = tmp_path / "open.key"
    key.write_text("00" * 32 + "\n")
    os.chmod(key, 0o644)
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    with caplog.at_level(logging.WARNING):
        result = Runner(config(32), str(tmp_path / "run"), progress=False).train()
    assert result.env_steps == 32 and "cannot be signed" in caplog.text and "can be read by others" in caplog.text


def test_a_runs_files_get_the_permissions_the_umask_gives(tmp_path):
    previous = os.umask(0o022)
    try:
        Runner(config(16), str(tmp_path / "run"), progress=False).train()
    finally:
        os.umask(previous)
    written = [p for p in files(str(tmp_path / "run")) if "events.out" not in p]
    assert any(p.endswith("eval.json") for p in written) and any(p.endswith("config.yaml") for p in written)
    assert {p: stat.S_IMODE(os.stat(p).st_mode) for p in written} == {p: 0o644 for p in written}


def add_blob(run_dir, key, data):
    """Adds a blob to the latest checkpoint's manifest, with its size and sha256."""
    path = latest_manifest(run_dir)
    manifest = json.loads(open(path).read())
    name = f"{key}_32.000000000000.pt"
    with open(os.path.join(run_dir, "checkpoints", name), "wb") as f:
        f.write(data)
    manifest["files"][key] = {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    with open(path, "w") as f:
        json.dump(manifest, f)


def test_a_crafted_ranks_state_is_never_unpickled(run_dir, tmp_path, caplog):
    marker = str(tmp_path / "ran")
    add_blob(run_dir, "ranks", pickle.dumps([{"envs": None, "torch_rng": b"", "shuffle_rng": Payload(marker)}]))
    result = resume(run_dir, caplog)
    assert not os.path.exists(marker) and result.env_steps == 48
    assert "ranks_32." in caplog.text and "not the JSON this entmachin writes" in caplog.text


def test_a_crafted_network_file_refuses_resume_and_changes_nothing(run_dir, tmp_path):
    import io

    import torch

    marker = str(tmp_path / "ran")
    buffer = io.BytesIO()
    torch.save({"w": Payload(marker)}, buffer)
    replace_blob(run_dir, "actor", buffer.getvalue())
    before = files(run_dir)
    with pytest.raises(RunError, match=r"actor_32\..*weights_only=True and never runs code"):
        Runner(config(48), run_dir, resume=True, progress=False).train()
    assert not os.path.exists(marker) and files(run_dir) == before
