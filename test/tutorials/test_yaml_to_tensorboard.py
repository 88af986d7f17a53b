"""Tutorial 5 (YAML to tensorboard): every entmachin command it shows runs, and the curves read back."""
import os
import re

import pytest
import torch

from test.tutorials._load import load_tutorial


@pytest.fixture(scope="module")
def tutorial():
    return load_tutorial("05_yaml_to_tensorboard.py")


def test_smoke_run_trains_reads_curves_resumes_evaluates_and_inits(tutorial, tmp_path, capsys):
    threads = torch.get_num_threads()
    run_dir = tmp_path / "runs" / "count"
    curves = tutorial["main"](["--smoke", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert torch.get_num_threads() == threads

    # 1. train: the command's own summary, with the random policy's return beside it
    assert re.search(r"mean evaluation return \d\.\d{3} over 8 episodes after 128 environment steps "
                     r"\(a random policy: \d\.\d{3}\)", out), out
    # 2. the run directory
    assert "config.yaml: env.name=Count, train.total_steps=128, rollout.num_envs=8, frame.batch_size=16" in out
    assert "checkpoints/: versions ['checkpoint_128.json', 'checkpoint_64.json']" in out
    assert re.search(r"eval.json: \[\{'env_steps': 64, 'mean': [\d.]+, .*'env_steps': 128, .*'final': True\}\]", out)
    # 3. the curves by group, and a few with their steps
    assert "entities/*   Bean, Player" in out
    assert re.search(r"losses/\*\s+approx_kl, clipfrac, entropy, explained_variance, policy_loss, value_loss", out)
    assert re.search(r"eval/mean_return\s+2 points  64: \d\.\d{3}, 128: \d\.\d{3}\n", out), out
    # 4. resume: the curves go on to 256 without repeating a step
    assert "$ entmachin train --resume " in out and "--set train.total_steps=256" in out
    assert "losses/policy_loss now has 8 points, steps 32 to 256; every step once: True" in out
    assert [step for step, _ in curves["losses/policy_loss"]] == list(range(32, 257, 32))
    assert [step for step, _ in curves["eval/mean_return"]] == [64, 128, 192, 256]
    # 5. eval, sampled and deterministic
    evals = re.findall(r"episodes 8  return mean \d\.\d{3}  min \d\.\d{3}  max \d\.\d{3}  length mean 1\.0", out)
    assert len(evals) == 2, out
    # 6. init writes a config that loads; curve.png is where it says
    assert "it loads as a config: frame.name=A2C, env.name=Count" in out
    assert (tmp_path / "runs" / "my_count.yaml").read_text().startswith("# entmachin run config for Count (A2C)")
    assert f"{run_dir / 'curve.png'}, " in out and (run_dir / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(os.listdir(run_dir))[:4] == ["checkpoints", "config.yaml", "curve.png", "eval.json"]
