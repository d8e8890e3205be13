"""The packer's source seam (issue 33): ``run/`` and ``shard/`` see a ``Source``; a format is a
row of ``SOURCE_FORMATS`` (detect, open). A new row is all a new format needs: here a format
that keeps a LeRobot dataset one folder down packs to the same bytes as the dataset itself."""

from __future__ import annotations

from pathlib import Path

from lerobot_shards import pack_dataset
from lerobot_shards.packer.source import SOURCE_FORMATS, LeRobotSource, Source, SourceFormat, base, open_dataset_source
from tests.packed_fixtures import *
from tests.packed_fixtures import assert_same_tree, copy_source


def test_lerobot_source_has_every_member_of_the_interface(sample_source):
    source = open_dataset_source(sample_source)
    assert isinstance(source, LeRobotSource)
    members = [name for name in dir(Source) if not name.startswith("_")] + list(Source.__annotations__)
    missing = [name for name in members if not hasattr(source, name)]
    assert not missing, missing
    files = {rel: (path, bound) for rel, path, bound in source.metadata_files()}
    assert (
        "meta/info.json" in files
        and files["meta/info.json"][0].read_bytes() == (Path(sample_source) / "meta" / "info.json").read_bytes()
    )


def test_a_new_format_is_a_row(sample_source, tmp_path, monkeypatch):
    nested = tmp_path / "nested"
    copy_source(sample_source, nested)  # nested/<name>: the dataset one folder down
    inner = next(p for p in nested.iterdir() if p.is_dir())
    (nested / "NESTED").write_text(inner.name)
    opened = []

    def detect(root: Path) -> bool:
        return (root / "NESTED").is_file()

    def open_nested(root: Path, *, follow_symlinks: bool = False) -> Source:
        opened.append(root)
        return LeRobotSource(root / (root / "NESTED").read_text(), follow_symlinks=follow_symlinks)

    monkeypatch.setattr(base, "SOURCE_FORMATS", (SourceFormat("nested LeRobot", detect, open_nested), *SOURCE_FORMATS))
    pack_dataset(str(nested), str(tmp_path / "via-row"))
    pack_dataset(str(inner), str(tmp_path / "direct"))
    assert opened  # planning and shard building both went through the row
    # The same members, rows and indexes (receipts and the manifest name the source path given).
    for rel in ("index", "meta"):
        assert_same_tree(tmp_path / "via-row" / rel, tmp_path / "direct" / rel)
    shards = sorted(p.name for p in (tmp_path / "direct" / "shards").iterdir() if p.suffix in (".tar", ".parquet"))
    assert shards
    for name in shards:
        assert (tmp_path / "via-row" / "shards" / name).read_bytes() == (tmp_path / "direct" / "shards" / name).read_bytes()
