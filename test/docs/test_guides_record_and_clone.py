"""guides/record-and-clone.md: the recording wrote whole episodes with their final rows, the dataset reads back
as described, a second recording into it is refused, the clone trained as a BC run, and relabel wrote the same
rows with the function's rewards."""
import json

import numpy as np
import pytest

PAGE = "guides/record-and-clone.md"


def test_the_recording_holds_whole_episodes_each_with_one_final_row(page):
    ns = page(PAGE)
    rows = ns["rows"]
    assert ns["recorded"].episodes == 20 and len(rows) == ns["recorded"].rows
    finals = np.bincount(rows.episode[rows.final])
    assert (finals[np.unique(rows.episode)] == 1).all()
    assert ns["returns"].mean() > 0.9  # the scripted expert brings the spaceship near the origin


def test_the_description_lists_each_part_with_its_checksum(page):
    directory = page(PAGE)["__directory__"] / "data" / "mto"
    description = json.loads((directory / "dataset.json").read_text())
    assert description["format"] == "entmachin-dataset/1"
    assert set(description) >= {"spaces", "seats", "recorded", "parts"}
    names = [p.name for p in sorted(directory.glob("part-*.parquet"))]
    assert names and names[0] == "part-00000.parquet"


def test_the_parquet_columns_are_the_pages(page):
    names = page(PAGE)["table"].schema.names
    for column in ("episode", "step", "seat", "final", "features/Spaceship", "mask/horizontal_thruster",
                   "action/horizontal_thruster", "reward", "terminal", "truncated", "result"):
        assert column in names, column


def test_recording_into_a_dataset_is_refused(page):
    from entmachin.run.logs import RunError
    from entmachin.run.record import record

    directory = page(PAGE)["__directory__"] / "data" / "mto"
    with pytest.raises(RunError, match="already holds a dataset"):
        record("MoveToOrigin", "scripted", 1, str(directory), progress=False)


def test_the_clone_trained_and_evaluated_on_the_environment(page):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = page(PAGE)["__directory__"] / "runs" / "clone"
    assert json.loads((run / "eval.json").read_text())[-1]["final"]
    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    assert {"bc/validation_loss", "bc/validation_accuracy"} <= set(events.Tags()["scalars"])


def test_relabel_wrote_the_same_rows_with_new_rewards(page):
    ns = page(PAGE)
    rows, shaped = ns["rows"], ns["shaped"]
    assert len(shaped) == len(rows) and np.array_equal(shaped.episode, rows.episode)
    assert (shaped.reward[shaped.final] == 0).all() and (shaped.reward[~shaped.final] <= 0).all()
    assert not np.allclose(shaped.reward, rows.reward)
