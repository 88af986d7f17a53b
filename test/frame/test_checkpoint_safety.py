"""Checkpoints survive kills at any instant, loads are all-or-nothing, bad files say what they are."""
import hashlib
import json
import mmap
import os
import pickle
import random
import re
import signal
import time

import numpy as np
import pytest
import torch
from torch import nn

from entmachin.frame import checkpoint_files
from entmachin.frame.a2c import A2C
from entmachin.frame.checkpoint import CheckpointError, read_frame_checkpoint, save_frame
from entmachin.model import MLPActor
from entmachin.frame.ppo import PPO
from test.frame._frames import D_STATE, LinearCritic, dense_episode, dense_frame

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the kill tests fork")


def stamped(frame, k):
    """Marks every parameter, the optimizer step counts and the update count with ``k``."""
    with torch.no_grad():
        for module in (frame.actor, frame.critic):
            for p in module.parameters():
                p.fill_(float(k))
    frame._n_updates = k
    return frame


def stamp_of(directory):
    """Loads ``directory`` into a fresh frame; the one stamp every part of it carries."""
    frame = dense_frame()
    frame.load(directory)
    values = {float(p.detach().flatten()[0]) for m in (frame.actor, frame.critic) for p in m.parameters()}
    assert values == {float(frame.n_updates)}, f"a version mixing saves: {values}, n_updates {frame.n_updates}"
    return frame.n_updates


def frame_snapshot(frame):
    return (
        {k: v.clone() for k, v in frame.actor.state_dict().items()},
        {k: v.clone() for k, v in frame.critic.state_dict().items()},
        pickle.dumps([o.state_dict() for o in frame.optimizers]),
        pickle.dumps([s.state_dict() for s in frame.lr_schedulers]),
        frame.n_updates,
        frame._rng.bit_generator.state,
        torch.get_rng_state().clone(),
    )


def assert_same(a, b):
    for x, y in zip(a[:2], b[:2]):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    assert a[2:6] == b[2:6] and torch.equal(a[6], b[6])


def boundaries(directory):
    """The labels of every file-operation boundary of a save that replaces an earlier one."""
    stamped(dense_frame(), 1).save(directory)
    labels = []
    checkpoint_files._fault_hook = labels.append
    try:
        stamped(dense_frame(), 2).save(directory)
    finally:
        checkpoint_files._fault_hook = None
    return labels


def reap(pid, timeout=60.0):
    """The child's wait status; a child still running after ``timeout`` seconds is SIGKILLed first
    (then the status says so), so that a stuck child fails a test instead of hanging it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def test_a_save_stopped_at_any_file_operation_leaves_a_loadable_version(tmp_path):
    directory = str(tmp_path / "run")
    stamped(dense_frame(), 1).save(directory)
    labels = boundaries(str(tmp_path / "probe"))
    kinds = {label.split()[0] + " " + label.split()[1] for label in labels}
    assert {"before write", "after write", "after fsync", "before rename", "after rename",
            "before delete", "after delete"} <= kinds
    seen = set()
    frames = [dense_frame(), dense_frame()]  # built before forking: a forked child must not start BLAS
    for i, label in enumerate(labels):
        pid = os.fork()
        if pid == 0:  # the saving process, stopped dead at boundary i
            count = [0]

            def hook(_label):
                if count[0] == i:
                    os._exit(17)
                count[0] += 1
            checkpoint_files._fault_hook = hook
            try:
                stamped(frames[i % 2], 2 + i % 2).save(directory)
            finally:
                os._exit(0)
        assert os.waitstatus_to_exitcode(reap(pid)) == 17, label
        seen.add(stamp_of(directory))  # loads, and is one complete version
    assert seen == {1, 2, 3}  # early stops keep the old version, late ones publish the new one
    stamped(dense_frame(), 5).save(directory)  # the next save sweeps what the stopped ones left
    files = sorted(os.listdir(directory))
    assert len(files) == 4 and stamp_of(directory) == 5, files


def test_an_exception_at_any_point_of_a_save_leaves_a_loadable_version_and_no_stray_files(tmp_path):
    directory = str(tmp_path / "run")
    stamped(dense_frame(), 1).save(directory)
    before = sorted(os.listdir(directory))
    labels = boundaries(str(tmp_path / "probe"))
    rename = next(i for i, label in enumerate(labels) if label.startswith("before rename"))
    for i in range(len(labels)):

        def hook(label, count=[0], stop=i):
            if count[0] == stop:
                raise KeyboardInterrupt
            count[0] += 1
        checkpoint_files._fault_hook = hook
        try:
            with pytest.raises(KeyboardInterrupt):
                stamped(dense_frame(), 2).save(directory)
        finally:
            checkpoint_files._fault_hook = None
        if i <= rename:  # not published: the previous version, and nothing else
            assert sorted(os.listdir(directory)) == before and stamp_of(directory) == 1
        else:  # published: the new version stays whole
            assert stamp_of(directory) == 2 and not any(n.endswith(".tmp") for n in os.listdir(directory))
            stamped(dense_frame(), 1).save(directory)
            before = sorted(os.listdir(directory))


def test_kills_at_random_moments_of_a_saving_loop(tmp_path):
    directory = str(tmp_path)
    rng = random.Random(0)
    inside = 0
    frame = dense_frame()  # built before forking: a forked child must not start BLAS
    for kill in range(20):
        flags = mmap.mmap(-1, 16)  # shared with the child: [in a save, saves done]
        pid = os.fork()
        if pid == 0:
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                k = 1000 * (kill + 1)
                while True:
                    k += 1
                    stamped(frame, k)
                    flags[0] = 1
                    frame.save(directory)
                    flags[0] = 0
                    flags[1] = min(flags[1] + 1, 255)
            finally:
                os._exit(0)
        deadline = time.monotonic() + 30
        while flags[1] < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.02))
        os.kill(pid, signal.SIGKILL if kill % 2 else signal.SIGINT)
        # Python drops a KeyboardInterrupt raised inside a finaliser ("Exception ignored in"),
        # and the child then saves on: such a child is SIGKILLed after 10 s, a kill like the others.
        reap(pid, timeout=10.0)
        inside += flags[0]
        assert stamp_of(directory) > 1000 * (kill + 1)
    print(f"{inside} of 20 kills landed inside a save")
    assert inside >= 11, f"only {inside} of 20 kills landed inside a save"


def trained(cls=None, **kwargs):
    frame = dense_frame(**kwargs) if cls is None else dense_frame(cls, **kwargs)
    frame.store_episode(dense_episode(np.random.default_rng(0), 8))
    frame.update()
    return frame


def test_a_load_that_fails_changes_nothing(tmp_path):
    trained().save(str(tmp_path))
    other = trained(lr_scheduler=torch.optim.lr_scheduler.StepLR, lr_scheduler_args=((1,), (1,)))
    wide = PPO(MLPActor(D_STATE, 2, d_hidden=(9,)), LinearCritic(), torch.optim.Adam, nn.MSELoss(), seed=0)
    for frame, pattern in [(other, r"holds 2 optimizer\(s\) and 0 scheduler\(s\); this frame has 2 and 2"),
                           (wide, r"actor_0\.[0-9a-f]{12}\.pt': the actor's 'hidden.0.weight' has shape \(8, 3\) "
                                  r"in the file and \(9, 3\) in this frame's actor")]:
        before = frame_snapshot(frame)
        with pytest.raises(CheckpointError, match=pattern):
            frame.load(str(tmp_path))
        assert_same(before, frame_snapshot(frame))


def test_a_failure_while_assigning_restores_everything(tmp_path, monkeypatch):
    trained().save(str(tmp_path))
    frame = dense_frame(seed=3)
    torch.manual_seed(77)
    before = frame_snapshot(frame)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(frame.critic_optim, "load_state_dict", broken)  # after both models are assigned
    with pytest.raises(RuntimeError, match="disk on fire"):
        frame.load(str(tmp_path))
    monkeypatch.undo()
    assert_same(before, frame_snapshot(frame))


def test_optimizer_state_of_another_shape_is_refused_before_anything_changes(tmp_path):
    frame = trained()
    state = frame.actor_optim.state_dict()
    state["state"][0]["exp_avg"] = torch.zeros(5)
    frame.actor_optim.load_state_dict(state)
    save_frame(frame, str(tmp_path), None, 0)
    fresh = trained()
    before = frame_snapshot(fresh)
    with pytest.raises(CheckpointError, match=r"optimizer 0 \(Adam\): state 'exp_avg' of parameter 0 has shape "
                                              r"\(5,\); the parameter has shape \(8, 3\)"):
        fresh.load(str(tmp_path))
    assert_same(before, frame_snapshot(fresh))


def manifest(tmp_path):
    return json.loads((tmp_path / "checkpoint_0.json").read_text())


def blob(tmp_path, key):
    return tmp_path / manifest(tmp_path)["files"][key]["file"]


def test_files_that_are_not_checkpoints_say_so(tmp_path):
    frame = trained()
    directory = str(tmp_path)
    frame.save(directory)
    path = blob(tmp_path, "actor")
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match=rf"PPO.load: '.*{path.name}' is truncated or damaged: '.*checkpoint_0"
                                              rf".json' expects {len(good)} bytes, found {len(good) // 2}"):
        frame.load(directory)
    path.write_bytes(bytes(reversed(good)))
    with pytest.raises(CheckpointError, match=r"is damaged: its SHA-256 differs from the one .* records"):
        frame.load(directory)
    path.write_bytes(good)
    manifest_path = tmp_path / "checkpoint_0.json"
    text = manifest_path.read_text()
    manifest_path.write_bytes(os.urandom(64))
    with pytest.raises(CheckpointError, match=r"checkpoint_0.json' is not a checkpoint manifest: expected JSON, "
                                              r"found 64 bytes starting with b"):
        frame.load(directory)
    manifest_path.write_text(json.dumps({"format": "entmachin-checkpoint", "format_version": 9}))
    with pytest.raises(CheckpointError, match=r"has manifest format_version 9; this entmachin reads format_version 1"):
        frame.load(directory)
    manifest_path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CheckpointError, match=r"expected format 'entmachin-checkpoint', found 'something-else'"):
        frame.load(directory)
    manifest_path.write_text(text)
    frame.load(directory)


@pytest.mark.parametrize("content, found", [
    (b"", "an empty file"),
    (b"\x00\x01garbage" * 10, r"90 bytes starting with b'\\x00\\x01garbage"),
    (pickle.dumps([1, 2, 3]), r"\d+ bytes starting with"),
    ("truncated", r"\d+ bytes starting with b'PK"),
])
def test_blobs_that_are_not_torch_files_say_what_they_hold(tmp_path, content, found):
    frame = trained()
    frame.save(str(tmp_path))
    path = blob(tmp_path, "frame_state")
    if content == "truncated":
        torch.save({"format": 1}, path)
        content = path.read_bytes()[:-40]
    path.write_bytes(content)
    document = manifest(tmp_path)  # the manifest vouches for the new bytes: only decoding them can tell
    document["files"]["frame_state"].update(bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
    (tmp_path / "checkpoint_0.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError) as info:
        frame.load(str(tmp_path))
    message = str(info.value)
    assert re.search(rf"frame_state_0\.[0-9a-f]{{12}}\.pt' is not a checkpoint file: expected a file written by "
                     rf"torch.save, found {found}", message), message
    assert "weights_only=False" not in message and "Unpickling" not in message


class Payload:
    def __reduce__(self):
        return (os.system, ("echo should never run",))


def test_loading_never_runs_code_from_a_file(tmp_path):
    frame = trained()
    frame.save(str(tmp_path))
    path = blob(tmp_path, "frame_state")
    torch.save({"format": 1, "evil": Payload()}, path)
    data = path.read_bytes()
    document = manifest(tmp_path)
    document["files"]["frame_state"].update(bytes=len(data), sha256=__import__("hashlib").sha256(data).hexdigest())
    (tmp_path / "checkpoint_0.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=r"frame_state_0\.[0-9a-f]{12}\.pt' holds Python objects other than "
                                              r"tensors and plain containers; entmachin loads checkpoints with "
                                              r"weights_only=True and never runs code from a file") as info:
        frame.load(str(tmp_path))
    assert "weights_only=False" not in str(info.value).replace("weights_only=True", "")


def test_frame_class_and_network_names_are_checked(tmp_path):
    trained().save(str(tmp_path), network_map={"actor": "policy"})
    with pytest.raises(CheckpointError, match=r"A2C.load: .* holds a 'PPO' save; expected a 'A2C' save"):
        dense_frame(A2C).load(str(tmp_path), network_map={"actor": "policy"})
    with pytest.raises(CheckpointError, match=r"was saved with network names \{'actor': 'policy', 'critic': 'critic'\};"
                                              r" this load asks for \{'actor': 'actor', 'critic': 'critic'\}"):
        dense_frame().load(str(tmp_path))
    with pytest.raises(ValueError, match=r"network_map names must be non-empty and use only letters, digits, '_' and "
                                         r"'-', got '../x'"):
        dense_frame().save(str(tmp_path), network_map={"actor": "../x"})


def test_extras_are_published_with_the_frame(tmp_path):
    frame = trained()
    save_frame(frame, str(tmp_path), None, 2, extras={"runner": b"runner state"})
    loaded = read_frame_checkpoint(dense_frame(), str(tmp_path))
    assert loaded.version == 2 and loaded.extras == {"runner": b"runner state"}
    with pytest.raises(ValueError, match=r"extras keys must be lower-case names other than actor, critic and "
                                         r"frame_state, got \['actor'\]"):
        save_frame(frame, str(tmp_path), None, 2, extras={"actor": b""})
