"""--workers: a process pool over shards gives the same bytes as one process, reports progress
per episode from the workers, and a failing shard surfaces its error naming the episode."""

from __future__ import annotations

import pytest

from lerobot_shards import FrameMismatchError, pack_dataset
from tests.packed_fixtures import *
from tests.packed_fixtures import (
    CAMERAS,
    PACK_WINDOWS,
    SHARD_SIZE_MB,
    assert_same_tree,
    copy_source,
    edit_episodes_metadata,
)


@pytest.fixture
def progress_events():
    """Record the progress ``pack_dataset`` reports: the increments of episodes done and source
    bytes read between calls (one call per episode, from the worker processes, and per shard)."""
    events, last = [], {"done": None, "read": 0}

    def progress(state):
        done = state.episodes_before if last["done"] is None else last["done"]
        if state.episodes_done > done:
            events.append((state.episodes_done - done, state.bytes_in - last["read"]))
        last["done"], last["read"] = state.episodes_done, state.bytes_in

    progress.events = events
    return progress


def test_two_workers_write_the_same_bytes_as_one_process(sample_source, packed_copy, tmp_path, progress_events):
    dst = tmp_path / "pool"
    report = pack_dataset(
        str(sample_source), str(dst), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, workers=2, progress=progress_events
    )
    assert report.shards_written == report.shards > 1 and report.finalized
    assert_same_tree(packed_copy, dst)
    assert len(progress_events.events) == 9, "one progress event per episode, from the worker processes"
    assert sum(b for _, b in progress_events.events) == report.bytes_in > 0


def test_one_process_reports_progress_per_episode(sample_source, tmp_path, progress_events):
    report = pack_dataset(str(sample_source), str(tmp_path / "one"), episodes=[0, 2, 5], progress=progress_events)
    assert [n for n, _ in progress_events.events] == [1, 1, 1]
    assert report.mb_per_s > 0 and report.bytes_out > 0


def test_a_failing_shard_in_the_pool_names_its_episode(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)

    def short(row):
        if row["episode_index"] == 5:
            row[f"videos/{CAMERAS[1]}/to_timestamp"] -= 2 / 30

    edit_episodes_metadata(root, short)
    with pytest.raises(
        FrameMismatchError, match=f"episode 5, camera {CAMERAS[1]}: video has 23 frames but the episode has 25 rows"
    ):
        pack_dataset(str(root), str(tmp_path / "out"), shard_size_mb=0.001, workers=2)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_part_that_finds_the_plan_written_after_it_looked_joins_it(sample_source, packed_copy, tmp_path, monkeypatch):
    """SLURM starts --part tasks together: part 1 looked for pack-plan.json, part 0 then wrote
    it and meta/, and part 1's listing of the destination found them. That listing is a plan
    (read and compared), not foreign content: part 1 packs its shards and the finalized pack
    equals one run. Before the fix part 1 failed with "is not empty" and the finalize job
    waited forever on its dependency."""
    from lerobot_shards import finalize
    from lerobot_shards.core.format import PLAN_PATH
    from lerobot_shards.core.storage import Storage

    dst = tmp_path / "parts"
    options = dict(video="copy", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    pack_dataset(str(sample_source), str(dst), part=(0, 2), **options)
    real_exists, lied = Storage.exists, []

    def exists_too_early(self, rel):
        if rel == PLAN_PATH and not lied:
            lied.append(rel)
            return False  # the look happened before part 0 wrote the plan
        return real_exists(self, rel)

    monkeypatch.setattr(Storage, "exists", exists_too_early)
    pack_dataset(str(sample_source), str(dst), part=(1, 2), **options)
    monkeypatch.undo()
    assert lied == [PLAN_PATH]
    finalize(str(dst))
    assert_same_tree(packed_copy, dst)
