"""info and sql: DuckDB views over a local pack agree with the source and the index."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards import InspectError, run_sql, summarize
from lerobot_shards.cli import main as cli
from tests.packed_fixtures import *
from tests.packed_fixtures import source_episodes


def test_views_cover_episodes_samples_and_every_frame(sample_source, packed_copy):
    episodes = source_episodes(sample_source)
    _, rows = run_sql(str(packed_copy), "SELECT episode_index, length, shard FROM episodes ORDER BY episode_index")
    assert [(e, n) for e, n, _ in rows] == [(e, episodes[e]["length"]) for e in sorted(episodes)]
    source = pa.concat_tables([pq.read_table(p) for p in sorted((sample_source / "data").glob("*/*.parquet"))])
    _, rows = run_sql(str(packed_copy), 'SELECT count(*), sum("index"), count(DISTINCT episode_index) FROM frames')
    assert rows == [(source.num_rows, sum(source["index"].to_pylist()), 9)]
    # The sample index joins the frames through (shard, row), the way a reader addresses rows.
    _, rows = run_sql(
        str(packed_copy),
        "WITH f AS (SELECT * FROM read_parquet("
        f"'{packed_copy}/shards/*.parquet', filename = true, file_row_number = true)) "
        'SELECT count(*), count(*) FILTER (WHERE f."index" = s."index" AND f.timestamp = s.timestamp) '
        "FROM samples s JOIN f ON f.filename LIKE '%shard-' || lpad(s.shard::VARCHAR, 6, '0') || '.parquet' "
        "AND f.file_row_number = s.row",
    )
    assert rows == [(source.num_rows, source.num_rows)]


def test_filter_anchors_by_window_padding(packed_copy):
    columns, rows = run_sql(
        str(packed_copy),
        "SELECT episode_index, count(*) AS full_chunks FROM samples WHERE chunk_action_pad_after = 0 GROUP BY 1 ORDER BY 1",
    )
    assert columns == ["episode_index", "full_chunks"]
    lengths = dict(run_sql(str(packed_copy), "SELECT episode_index, length FROM episodes")[1])
    # An 8-step chunk is complete for frames 0..length-8.
    assert dict(rows) == {e: n - 7 for e, n in lengths.items() if n >= 8}


def test_info_summarizes_the_manifest(packed_copy):
    rows = dict(summarize(str(packed_copy)).rows())
    assert rows["episodes / frames"] == "9 / 141"
    assert rows["windows"] == (
        "chunk: action 8 frames (0.27 s); full window on 91 of 141 anchors (65%); "
        "obs: observation.images.top 2 frames (0.07 s), observation.state 3 frames (0.10 s); "
        "full window on 124 of 141 anchors (88%)"
    )
    assert rows["cameras"].startswith("copy: observation.images.top 48x64 av1")
    result = CliRunner().invoke(cli, ["info", str(packed_copy)])
    assert result.exit_code == 0 and "9 / 141" in result.output


def test_errors_name_the_problem(packed_copy, tmp_path):
    with pytest.raises(InspectError, match="no manifest.json; not a .*packed dataset"):
        run_sql(str(tmp_path), "SELECT 1")
    with pytest.raises(InspectError, match="SQL failed: .*nope"):
        run_sql(str(packed_copy), "SELECT nope FROM samples")
