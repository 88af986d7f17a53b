"""``rollout.overlap`` in a run: what ``auto`` chooses and why, ``true`` refused where it cannot
work (naming the fix), and a run that overlaps says so in its log and its config.yaml."""
import logging
import os
import re

import pytest

from entmachin.run.build import AUTO_OVERLAP_MIN_ENVS, decide_overlap
from entmachin.run.config import ConfigError, config_from_dict
from entmachin.run.runner import Runner


def config(**rollout):
    n_envs = rollout.setdefault("num_envs", 128)
    return config_from_dict({"rollout": rollout, "frame": {"batch_size": min(256, n_envs * 16)},
                             "train": {"total_steps": n_envs * 16}})


@pytest.mark.parametrize("rollout,n_cores,chosen,why", [
    ({"processes": 2}, 4, True, r"^rollout.overlap: auto chose overlapped: the policy acts on one half of the 2 worker "
                                r"processes while the other half steps \(4 cores\)$"),
    ({"processes": 4}, 8, True, "auto chose overlapped"),
    ({"processes": 0}, 8, False, r"^rollout.overlap: auto chose sequential: rollout.processes is 0; halves need two or "
                                 r"more worker processes$"),
    ({"processes": 1}, 8, False, "rollout.processes is 1"),
    ({"processes": 2}, 2, False, r"auto chose sequential: 2 cores for 2 worker processes leave the policy no core of "
                                 r"its own .*; set rollout.overlap: true to overlap anyway$"),
    ({"processes": 2, "num_envs": AUTO_OVERLAP_MIN_ENVS - 1}, 8, False,
     r"63 environments are too few \(halves under 32 cost the policy more in acting than they hide; auto overlaps "
     r"from 64\)"),
    ({"processes": 2, "workers": "auto"}, 8, False, r"Ray workers \(rollout.workers\) step every row at once$"),
    ({"processes": 2, "overlap": False}, 8, False, r"^rollout.overlap: false: every row steps at once$"),
    ({"processes": 2, "overlap": True}, 2, True, r"^rollout.overlap: true: the policy acts on one half of the 2 worker"),
    ({"processes": 2, "overlap": True, "num_envs": 4}, 2, True, "true"),
])
def test_auto_decides_and_says_why(rollout, n_cores, chosen, why):
    overlap, note = decide_overlap(config(**rollout), n_cores=n_cores)
    assert overlap is chosen
    assert re.search(why, note), note


def test_auto_is_the_default_and_self_play_and_cloning_collect_sequentially():
    assert config().rollout.overlap == "auto"
    selfplay = config_from_dict({"env": {"name": "RockPaperScissorsDuel"}, "selfplay": {"seats": "random"},
                                 "rollout": {"num_envs": 128, "processes": 2}, "frame": {"batch_size": 256}})
    assert decide_overlap(selfplay, n_cores=8) == (False, "rollout.overlap: auto chose sequential: self-play's "
                                                          "opponents act on the same steps as the learner")
    cloning = config_from_dict({"frame": {"name": "BC", "batch_size": 256}, "rollout": {"processes": 2}})
    assert decide_overlap(cloning, n_cores=8)[1].endswith("behaviour cloning collects no rollouts")


@pytest.mark.parametrize("data,message", [
    ({"rollout": {"overlap": True, "processes": 0}}, r"^rollout.overlap: true, but rollout.processes is 0; halves need two or more "
                                     r"worker processes; set rollout.overlap: auto \(or false\)$"),
    ({"rollout": {"overlap": True, "processes": 1}}, r"^rollout.overlap: true, but rollout.processes is 1"),
    ({"rollout": {"overlap": True, "processes": 2, "workers": "auto"}},
     r"^rollout.overlap: true, but Ray workers \(rollout.workers\) step every row at once; set rollout.overlap: auto"),
    ({"rollout": {"overlap": True, "processes": 2}, "selfplay": {"seats": "random"}},
     r"^rollout.overlap: true, but self-play's opponents act on the same steps as the learner; set rollout.overlap"),
    ({"rollout": {"overlap": True, "processes": 2}, "frame": {"name": "BC"}},
     r"^rollout.overlap: true, but behaviour cloning collects no rollouts; set rollout.overlap: auto \(or false\)$"),
    ({"rollout": {"overlap": "yes"}}, r"^rollout.overlap: expected true or false or one of 'auto', got 'yes'"),
])
def test_true_is_refused_where_it_cannot_work(data, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


@pytest.mark.slow
def test_an_overlapped_run_trains_and_its_log_and_config_say_so(tmp_path, caplog):
    run_dir = str(tmp_path / "run")
    data = {"env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4, "processes": 2, "overlap": True},
            "frame": {"batch_size": 16}, "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": 64},
            "log": {"eval_interval": 100_000, "checkpoint_interval": 32, "eval_episodes": 2}}
    runner = Runner(config_from_dict(data), run_dir, progress=False)
    with caplog.at_level(logging.INFO, logger="entmachin.run.runner"):
        result = runner.train()
    assert runner.collector.overlap and result.env_steps == 64
    note = "rollout.overlap: true: the policy acts on one half of the 2 worker processes while the other half steps"
    assert note in caplog.text
    with open(os.path.join(run_dir, "config.yaml")) as f:
        header = f.read().split("\nenv:")[0]
    assert f"# {note}." in header
