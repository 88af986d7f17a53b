"""The runner's training does not depend on its logging: evaluations leave torch's generator alone."""
import glob
import os

import torch

from entmachin.run.config import config_from_dict
from entmachin.run.runner import Runner


def final_actor(run_dir):
    manifest = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "checkpoint_*.json")))[-1]
    import json

    name = json.load(open(manifest))["files"]["actor"]["file"]
    return torch.load(os.path.join(run_dir, "checkpoints", name), weights_only=True)


def test_evaluations_do_not_change_what_is_learnt(tmp_path):
    weights = []
    for eval_interval in (32, 10_000):
        config = config_from_dict({
            "env": {"name": "Count"}, "rollout": {"num_envs": 4, "n_steps": 4}, "frame": {"batch_size": 16},
            "model": {"d_model": 8, "d_qk": 8}, "train": {"total_steps": 96},
            "log": {"eval_interval": eval_interval, "checkpoint_interval": 10_000, "eval_episodes": 3},
        })
        Runner(config, str(tmp_path / str(eval_interval)), progress=False).train()
        weights.append(final_actor(str(tmp_path / str(eval_interval))))
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_translation_naming_what_the_environment_lacks_stops_the_run_before_its_directory(tmp_path):
    """``model.translation`` naming an entity type or a feature MineSweeper lacks: an error naming it and the
    entity types with their features, raised before the run directory is written."""
    import pytest

    from entmachin.run.config import ConfigError

    run_dir = tmp_path / "run"
    for translation, names in (({"reference_entity": "Nope", "position_features": ["x", "y"]},
                                r"model\.translation\.reference_entity: 'Nope'.*Mine: \['x', 'y'\].*Robot"),
                               ({"reference_entity": "Robot", "position_features": ["x", "z"]},
                                r"model\.translation\.position_features: 'z'.*'Robot'.*Mine: \['x', 'y'\]"),
                               ({"reference_entity": "Robot", "position_features": ["x", "y"],
                                 "rotation_angle_feature": "heading"},
                                r"model\.translation\.rotation_angle_feature: 'heading'.*Orbital Cannon")):
        config = config_from_dict({"env": {"name": "MineSweeper"}, "model": {"translation": translation},
                                   "train": {"total_steps": 1024}})
        with pytest.raises(ConfigError, match=names):
            Runner(config, str(run_dir), progress=False)
        assert not run_dir.exists()
