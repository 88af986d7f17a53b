"""guides/memory.md: the Recall run trained with a state, refused overlapped collection by name, and its export
played two games at once with a state each; the Conveyor export carries its entities' states."""
import numpy as np

PAGE = "guides/memory.md"


def test_the_recall_run_kept_a_state_in_its_checkpoints_and_export(page):
    ns = page(PAGE)
    assert (ns["__directory__"] / "runs" / "recall" / "policy.onnx").is_file()
    assert ns["policy"].memory_size == 32 and ns["policy"].metadata["memory"]["kind"] == "gru"


def test_overlapped_collection_is_refused_naming_the_setting(page):
    refused = page(PAGE)["refused"]
    assert refused.startswith("rollout.overlap: true") and "memory" in refused
    assert not (page(PAGE)["__directory__"] / "runs" / "refused").exists()  # refused before the run directory


def test_the_exported_policy_played_both_games_to_their_end(page):
    ns = page(PAGE)
    assert set(ns["rewards"]) == {"a", "b"} and all(o.done for o in ns["obs"].values())
    assert all(r in (0.0, 1.0) for r in ns["rewards"].values())


def test_the_conveyor_export_keeps_a_state_per_entity(page):
    conveyor = page(PAGE)["conveyor"]
    assert conveyor.entity_memory_size and np.isfinite(conveyor.evaluate(page(PAGE)["Conveyor"], 4, seed=2).mean)
