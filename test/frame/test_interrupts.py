"""Ctrl-C during update(): InterruptGuard, whole minibatch steps, a frame left usable, a real SIGINT."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from entmachin.frame.a2c import A2C
from entmachin.frame.stepping import InterruptGuard
from entmachin.frame.ppo import PPO
from test.frame._frames import dense_episode, dense_frame

SIGINT = signal.SIGINT


@pytest.fixture(autouse=True)
def python_handles_sigint():
    """Python's own Ctrl-C handler, as in a terminal: a suite started in the background of a
    non-interactive shell inherits SIGINT ignored, and the guard rightly leaves that alone."""
    previous = signal.signal(SIGINT, signal.default_int_handler)
    yield
    signal.signal(SIGINT, previous)


def interrupt():
    """What Ctrl-C does: the signal, handled by the current Python handler before this returns."""
    signal.raise_signal(SIGINT)


# --------------------------------------------------------------------------- the guard


def test_sigint_in_a_step_is_raised_right_after_it_and_outside_at_once():
    original = signal.getsignal(SIGINT)
    done = []
    with InterruptGuard() as guard:
        assert guard.installed and signal.getsignal(SIGINT) != original
        with pytest.raises(KeyboardInterrupt):
            with guard.step:
                interrupt()
                done.append("rest of the step")
        assert done == ["rest of the step"]
        with pytest.raises(KeyboardInterrupt):
            interrupt()  # outside a step: at once
        with guard.step:  # nothing pending any more
            done.append("next step")
    assert signal.getsignal(SIGINT) is original and not guard.installed


def test_nested_steps_deliver_at_the_outermost_end():
    with InterruptGuard() as guard:
        with pytest.raises(KeyboardInterrupt):
            with guard.step:
                with guard.step:
                    interrupt()
                inner_done = True
    assert inner_done


def test_a_python_handler_is_deferred_and_restored():
    calls = []
    previous = signal.signal(SIGINT, lambda signum, frame: calls.append(signum))
    try:
        with InterruptGuard() as guard:
            with guard.step:
                interrupt()
                assert calls == []
            assert calls == [SIGINT]
            interrupt()
            assert calls == [SIGINT, SIGINT]
        assert signal.getsignal(SIGINT) is not guard._handle and calls == [SIGINT, SIGINT]
        interrupt()
        assert len(calls) == 3
    finally:
        signal.signal(SIGINT, previous)


def test_the_handler_is_restored_when_the_block_raises():
    original = signal.getsignal(SIGINT)
    with pytest.raises(ValueError):
        with InterruptGuard() as guard:
            with guard.step:
                raise ValueError("boom")
    assert signal.getsignal(SIGINT) is original


def test_ignored_sigint_is_left_alone():
    previous = signal.signal(SIGINT, signal.SIG_IGN)
    try:
        with InterruptGuard() as guard:
            assert not guard.installed and signal.getsignal(SIGINT) == signal.SIG_IGN
            with guard.step:
                interrupt()  # ignored, as without the guard
    finally:
        signal.signal(SIGINT, previous)


def test_other_threads_install_nothing():
    seen = []

    def run():
        with InterruptGuard() as guard:
            with guard.step:
                seen.append(guard.installed)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [False]


# ------------------------------------------------------------------- update() stages

N_MINIBATCHES = 4


def filled(cls=PPO, **kwargs):
    kwargs = {"actor_update_times": N_MINIBATCHES, "critic_update_times": N_MINIBATCHES, "batch_size": 8, **kwargs}
    frame = dense_frame(cls, **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(3):
        frame.store_episode(dense_episode(rng, 10))
    return frame


def snapshot(frame):
    """Parameters and every tensor of both optimizers' states, copied."""
    params = [p.detach().clone() for p in [*frame.actor.parameters(), *frame.critic.parameters()]]
    states = [t.clone() for opt in frame.optimizers for state in opt.state.values() for t in state.values()]
    return params, states


def same(a, b):
    return len(a[0]) == len(b[0]) and len(a[1]) == len(b[1]) and \
        all(torch.equal(x, y) for x, y in zip(a[0] + a[1], b[0] + b[1]))


def reference(cls):
    """Snapshots of an uninterrupted update: ``[before, after minibatch 1, ..., after the last]``."""
    frame = filled(cls)
    snaps = [snapshot(frame)]
    frame.critic_optim.register_step_post_hook(lambda *_: snaps.append(snapshot(frame)))
    frame.update()
    assert len(snaps) == N_MINIBATCHES + 1
    return snaps


def inject(frame, stage, minibatch):
    """Sends SIGINT once, at ``stage`` of minibatch ``minibatch`` (0-based) of the next update."""
    calls = []

    def fire(*_):
        calls.append(1)
        if len(calls) == minibatch + 1:
            interrupt()

    if stage == "before backward":  # the critic's forward pass of that minibatch
        frame.critic.register_forward_hook(lambda module, *_: fire() if module.training else None)
    elif stage == "between the optimizers":
        frame.actor_optim.register_step_post_hook(fire)
    else:  # "after the step"
        frame.critic_optim.register_step_post_hook(fire)


STAGES = [("before backward", 0), ("before backward", 2), ("between the optimizers", 0),
          ("between the optimizers", 3), ("after the step", 1), ("after the step", 3)]


@pytest.mark.parametrize("cls", [A2C, PPO])
def test_interrupted_update_leaves_whole_minibatch_steps_and_the_rows(cls):
    snaps = reference(cls)
    original = signal.getsignal(SIGINT)
    for stage, minibatch in STAGES:
        frame = filled(cls)
        inject(frame, stage, minibatch)
        lrs = [g["lr"] for opt in frame.optimizers for g in opt.param_groups]
        with pytest.raises(KeyboardInterrupt):
            frame.update()
        done = minibatch if stage == "before backward" else minibatch + 1
        assert same(snapshot(frame), snaps[done]), (stage, minibatch)
        assert frame.replay_buffer.size() == 30 and frame.n_updates == 0 and frame.last_update is None
        assert not frame.actor.training and not frame.critic.training
        assert [g["lr"] for opt in frame.optimizers for g in opt.param_groups] == lrs
        assert signal.getsignal(SIGINT) is original
        frame.update()  # again, on the same rows
        assert frame.n_updates == 1 and frame.replay_buffer.size() == 0
        assert int(next(iter(frame.actor_optim.state.values()))["step"]) == done + N_MINIBATCHES


def test_interrupted_update_does_not_advance_the_annealing():
    frame = filled(n_anneal_updates=4, actor_learning_rate=0.4, critic_learning_rate=0.8)
    frame.update()
    frame.store_episode(dense_episode(np.random.default_rng(1), 10))
    inject(frame, "between the optimizers", 1)
    with pytest.raises(KeyboardInterrupt):
        frame.update()
    assert [o.param_groups[0]["lr"] for o in frame.optimizers] == [0.4, 0.8] and frame.n_updates == 1
    frame.update()
    assert [o.param_groups[0]["lr"] for o in frame.optimizers] == pytest.approx([0.3, 0.6])


def test_other_errors_also_leave_the_rows_and_counters():
    frame = filled(n_anneal_updates=4)
    frame.update()
    frame.store_episode(dense_episode(np.random.default_rng(1), 10))
    lrs = [o.param_groups[0]["lr"] for o in frame.optimizers]

    def fail(module, *_):
        if module.training:
            raise RuntimeError("model failure")

    handle = frame.critic.register_forward_hook(fail)
    with pytest.raises(RuntimeError, match="model failure"):
        frame.update()
    assert frame.replay_buffer.size() == 10 and frame.n_updates == 1 and not frame.critic.training
    assert [o.param_groups[0]["lr"] for o in frame.optimizers] == lrs
    handle.remove()
    frame.update()
    assert frame.n_updates == 2


# ------------------------------------------------------------------- a real SIGINT

CHILD = r"""
import json, signal
import numpy as np, torch
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, however the suite was started
torch.set_num_threads(1)
from test.frame._frames import dense_episode, dense_frame
frame = dense_frame(actor_update_times=40, critic_update_times=40, batch_size=4, seed=0,
                    optimizer_factory=lambda params, lr: torch.optim.Adam(params, lr=lr, foreach=False))
episode = dense_episode(np.random.default_rng(0), 16)
completed, inside, message = 0, False, None
while True:
    try:
        if frame.replay_buffer.size() == 0:
            frame.store_episode(episode)
        if completed and message:
            print(message, flush=True)  # the parent's SIGINT lands in this update or a later one
            message = None
        inside = True
        frame.update()
        inside = False
        completed += 1
        message = message if completed > 1 else "started"
    except KeyboardInterrupt:
        if inside and not (frame.n_updates == completed + 1 and frame.replay_buffer.size() == 0):
            break
        # it landed between two updates (or just after one returned): count it and ask again
        completed, inside, message = frame.n_updates, False, "again"
steps = [int(s["step"]) for opt in frame.optimizers for s in opt.state.values()]
report = {
    "finite": all(bool(torch.isfinite(p).all()) for m in (frame.actor, frame.critic) for p in m.parameters()),
    "steps_agree": len(set(steps)) == 1,
    "rows": frame.replay_buffer.size(),
    "counted": frame.n_updates == completed,
    "eval": not frame.actor.training and not frame.critic.training,
}
frame.update()
report["again"] = frame.n_updates == completed + 1 and frame.replay_buffer.size() == 0
print(json.dumps(report), flush=True)
"""


def test_a_real_sigint_in_a_loop_of_updates_leaves_a_usable_frame():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=root, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, child.kill)  # a hung child fails the test instead of blocking readline
    watchdog.start()
    try:
        for _ in range(10):  # until the signal lands inside update(), not between two
            line = child.stdout.readline().strip()
            if line not in ("started", "again"):
                break
            time.sleep(random.uniform(0.005, 0.05))  # past the child's print, somewhere in the update
            child.send_signal(SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        watchdog.cancel()
        child.kill()
    assert child.returncode == 0 and line.startswith("{"), err
    assert json.loads(line) == {"finite": True, "steps_agree": True, "rows": 16, "counted": True, "eval": True,
                                "again": True}
