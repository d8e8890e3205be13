"""Change exercises (issues 50, 67): changes a newcomer makes, each one file (under
``tests/exercises/``, or the package's own second source format) plus one row of a table, shown
working end to end. If one of them starts
needing a second file, a seam has stopped keeping its promise (``docs/ARCHITECTURE.md``)."""

from __future__ import annotations

import uuid

import fsspec
import pytest
import torch

from lerobot_shards import PackedDataset, RetryPolicy, SourceError, pack_dataset
from lerobot_shards.core.errors import AccessDeniedError, StorageError
from lerobot_shards.core.storage import BACKENDS, Storage
from tests.exercises.busy_storage import BUSY, BusyFileSystem
from tests.packed_fixtures import *
from tests.packed_fixtures import PACK_WINDOWS, SHARD_SIZE_MB
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

FAST = RetryPolicy(max_attempts=3, base_s=0.0, cap_s=0.0)
DELTA = {"action": [0.0, 1 / 30], "observation.images.top": [-1 / 30, 0.0]}


def _tree(url: str) -> dict[str, bytes]:
    storage = Storage(url, retry=FAST)
    return {rel: storage.read_bytes(rel) for rel in storage.list()}


def _local_tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def busy_store(monkeypatch):
    fsspec.register_implementation("busy", BusyFileSystem, clobber=True)
    monkeypatch.setattr(BusyFileSystem, "busy_answers", 0)
    return f"busy://exercise-{uuid.uuid4().hex}"


def test_a_storage_system_with_its_own_errors_is_one_file_and_one_row(busy_store, sample_source, packed_copy, monkeypatch):
    """Without its row, the store's busy answers are unknown errors: permanent, at once. With
    it (``BACKENDS["busy"] = BUSY``), a pack to the store and a read from it retry every busy
    answer, the pack's bytes equal a local pack's, its samples equal the local pack's, and a
    client without credentials is told the store's own fix."""
    with pytest.raises(StorageError, match=r"write failed: ServiceBusy: .*busy") as refused:
        Storage(busy_store, retry=FAST).write_bytes("probe.txt", b"x")
    assert refused.value.attempts == 1  # not retried: no row says it is transient

    monkeypatch.setitem(BACKENDS, "busy", BUSY)  # the one row
    dst = f"{busy_store}/pack"
    report = pack_dataset(str(sample_source), dst, video="copy", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, retry=FAST)
    assert report.finalized and BusyFileSystem.busy_answers > 10
    packed = _tree(dst)
    assert packed == _local_tree(packed_copy)

    answered = BusyFileSystem.busy_answers
    remote = list(torch.utils.data.DataLoader(PackedDataset(dst, delta_timestamps=DELTA, seed=3, retry=FAST), batch_size=8))
    local = list(torch.utils.data.DataLoader(PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=3), batch_size=8))
    assert BusyFileSystem.busy_answers > answered and len(remote) == len(local)
    for a, b in zip(remote, local):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]) if isinstance(a[key], torch.Tensor) else a[key] == b[key], key

    with pytest.raises(AccessDeniedError, match=r"no credentials \(read\): run `busy login`"):
        Storage(dst, {"signed_in": False}, retry=FAST).read_bytes("manifest.json")


def _parquet_codecs(root) -> dict[str, set[str]]:
    import pyarrow.parquet as pq

    codecs = {}
    for path in sorted(root.rglob("*.parquet")):
        if "meta" in path.relative_to(root).parts:
            continue  # the source's own tables, copied as they are
        metadata = pq.read_metadata(path)
        codecs[path.relative_to(root).as_posix()] = {
            metadata.row_group(g).column(c).compression
            for g in range(metadata.num_row_groups)
            for c in range(metadata.num_columns)
        }
    return codecs


def test_a_pack_output_option_is_one_file_and_one_row(sample_source, packed_copy, tmp_path, monkeypatch):
    """With the row, ``parquet_compression="gzip"`` packs every parquet file of the pack (each
    shard's, both indexes) with gzip, verifies, reads the same samples as the default pack and
    records the option (so its repair command names it); the CLI flag takes the new choice; the
    default pack's plan does not name the option at all, so packs made before it existed keep
    their plan digests (``test_plans_of_default_options_keep_their_digests``)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from lerobot_shards import verify
    from lerobot_shards.core.format import PARQUET_COMPRESSIONS
    from lerobot_shards.packer.errors import OptionsError
    from lerobot_shards.packer.options import PackOptions, options_as_flags
    from tests.exercises import gzip_output

    with pytest.raises(OptionsError, match=r"parquet_compression must be one of 'zstd', 'lz4', got 'gzip'"):
        pack_dataset(str(sample_source), str(tmp_path / "refused"), parquet_compression="gzip")
    monkeypatch.setitem(PARQUET_COMPRESSIONS, "gzip", gzip_output.GZIP)  # the one row

    dst = tmp_path / "gzip"
    report = pack_dataset(
        str(sample_source), str(dst), video="copy", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, parquet_compression="gzip"
    )
    assert report.finalized and verify(str(dst)).ok
    codecs = _parquet_codecs(dst)
    assert "index/samples.parquet" in codecs and any(k.startswith("shards/") for k in codecs)
    assert all(found == {"GZIP"} for found in codecs.values()), codecs
    assert all(found == {"ZSTD"} for found in _parquet_codecs(packed_copy).values())
    plan = json.loads((dst / "pack-plan.json").read_text())
    assert plan["options"]["parquet_compression"] == "gzip"
    flags, _ = options_as_flags(PackOptions.from_recorded(plan["options"]))
    assert flags[-2:] == ["--parquet-compression", "gzip"]  # what its repair command says
    default_flags, _ = options_as_flags(
        PackOptions.from_recorded(json.loads((packed_copy / "pack-plan.json").read_text())["options"])
    )
    assert "--parquet-compression" not in default_flags and "--shard-size-mb" in default_flags
    assert "parquet_compression" not in json.loads((packed_copy / "pack-plan.json").read_text())["options"]
    for a, b in zip(
        torch.utils.data.DataLoader(PackedDataset(str(dst), delta_timestamps=DELTA, seed=5), batch_size=8),
        torch.utils.data.DataLoader(PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=5), batch_size=8),
        strict=True,
    ):
        assert a.keys() == b.keys() and all(
            torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a
        )

    # The CLI, in a process where the row is in the table when it starts (as after the edit).
    cli_dst = tmp_path / "gzip-cli"
    script = (
        "import sys; from tests.exercises import gzip_output; gzip_output.register(); "
        "from lerobot_shards.cli import main; main(sys.argv[1:])"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script, "pack", str(sample_source), str(cli_dst), "--parquet-compression", "gzip"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr
    assert all(found == {"GZIP"} for found in _parquet_codecs(cli_dst).values())


def test_plans_of_default_options_keep_their_digests():
    """The digests of plans made before any option was added after plan version 2 (pinned from
    the tree of issue 49): adding an option must leave them, and so resumes, as they were."""
    from lerobot_shards.packer.options import PackOptions
    from lerobot_shards.packer.plan import make_pack_plan

    source = {"uri": "ds", "codebase_version": "v3.0", "fingerprint": "f" * 64}
    sizes = [10 << 20, 20 << 20, 5 << 20, 1 << 20]
    assert make_pack_plan([0, 1, 2, 3], sizes, PackOptions(), source).sha256 == (
        "b64ae619af7931d517b138d1b16bd7a938f5adc9d7de4eda5de8ffdef2304fbf"
    )
    options = PackOptions(
        video="hevc",
        gop=4,
        crf=30,
        resize=(64, 64),
        windows={"a": {"action": [0.0, 0.1]}},
        episodes=[0, 1, 2, 3],
        shard_size_mb=16,
    )
    assert make_pack_plan([0, 1, 2, 3], sizes, options, source).sha256 == (
        "7ee81d06a75d99aa4101c25f6b003bd1db93dcd5e2fb0de7121d2218c6cc140c"
    )


def test_a_decoder_is_one_file_and_one_row(packed_copy, packed_hevc, monkeypatch):
    """Without its row, ``decoder="whole"`` is refused with the choices listed. With it
    (``BACKENDS[("whole", "cpu")] = WholeMemberBackend``), the name is a ``decoder=`` choice: the
    workers' decoders (real DataLoader workers) and a ``DecodeStage`` decode every member through
    it, and the samples equal PyAV's, bit for bit, on a copy pack (AV1) and an hevc pack."""
    from lerobot_shards import DecodeStage
    from lerobot_shards.core.errors import ArgumentError
    from lerobot_shards.reader.decode import collate
    from lerobot_shards.reader.decode.backends import BACKENDS as DECODE_BACKENDS
    from tests.exercises.whole_member_decoder import WholeMemberBackend, WholeMemberDecoder

    with pytest.raises(ArgumentError, match=r"decoder must be one of 'auto', 'pyav', 'torchcodec', got 'whole'"):
        PackedDataset(str(packed_copy), delta_timestamps=DELTA, decoder="whole")
    monkeypatch.setitem(DECODE_BACKENDS, ("whole", "cpu"), WholeMemberBackend)  # the one row
    monkeypatch.setattr(WholeMemberDecoder, "decoded_members", 0)

    def samples(root, decoder, workers):
        dataset = PackedDataset(str(root), delta_timestamps=DELTA, seed=6, decoder=decoder, return_uint8=True)
        return list(torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=workers))

    def equal(got, expected):
        assert len(got) == len(expected) > 0
        for a, b in zip(got, expected):
            assert a.keys() == b.keys()
            for key in a:
                assert torch.equal(a[key], b[key]) if isinstance(a[key], torch.Tensor) else a[key] == b[key], key

    for root in (packed_copy, packed_hevc):
        equal(samples(root, "whole", 0), samples(root, "pyav", 0))
        equal(samples(root, "whole", 2), samples(root, "pyav", 2))
    assert WholeMemberDecoder.decoded_members > 0  # in this process (num_workers=0): it did the decoding

    staged = PackedDataset(str(packed_hevc), delta_timestamps=DELTA, seed=3, return_uint8=True, decode_device="cpu")
    batches = list(torch.utils.data.DataLoader(staged, batch_size=8, num_workers=0, collate_fn=collate))
    before = WholeMemberDecoder.decoded_members
    whole, plain = DecodeStage("cpu", backend="whole"), DecodeStage("cpu", backend="pyav")
    assert whole.backend == "whole"
    got, expected = [whole(batch) for batch in batches], [plain(batch) for batch in batches]
    assert WholeMemberDecoder.decoded_members - before == whole.stats()["members_opened"] > 0
    for a, b in zip(got, expected, strict=True):
        for key in DELTA:
            if key.startswith("observation.images"):
                assert torch.equal(a[key], b[key]), key


def test_a_source_format_is_its_module_and_one_row_staged_from_a_bucket_and_the_hub(
    sample_source, s3_bucket, tmp_path, monkeypatch
):
    """LeRobot v2.1 is a source format: ``packer/source/lerobot_v21.py`` (with its metadata module)
    and the row ``LEROBOT_V21`` of ``SOURCE_FORMATS``; staging asks the row which metadata files
    to fetch (``detect_listing``, ``metadata_bound``) and the source which data and video files,
    so the same dataset in a bucket and on the Hub packs to the bytes a local one does. Without
    the row, the root reads as LeRobot v3 and is refused by name."""
    import s3fs

    from lerobot_shards.packer.source import SOURCE_FORMATS, base
    from lerobot_shards.testing import to_v21
    from tests.hub_server import HubServer
    from tests.packer.test_hub_http import _pack

    v21 = tmp_path / "v21"
    to_v21(sample_source, v21)
    (v21 / "meta" / "README.md").write_text("not a file v2.1 has: left out, and not fetched")
    local = pack_dataset(str(v21), str(tmp_path / "local"), shard_size_mb=SHARD_SIZE_MB)
    assert local.finalized and local.metadata_left_out == ["meta/README.md"]

    def packed(root) -> dict[str, bytes]:
        """What a reader reads (the manifest, plan and receipts name where the source was)."""
        tree = _local_tree(root)
        return {
            rel: data for rel, data in tree.items() if rel.startswith(("index/", "meta/")) or rel.endswith((".tar", ".parquet"))
        }

    url, options = s3_bucket
    s3fs.S3FileSystem(**options).put(str(v21), f"{url.removeprefix('s3://')}/v21", recursive=True)
    pack_dataset(
        f"{url}/v21",
        str(tmp_path / "bucket"),
        shard_size_mb=SHARD_SIZE_MB,
        src_storage_options=options,
        cache_dir=str(tmp_path / "cache"),
    )
    assert packed(tmp_path / "bucket") == packed(tmp_path / "local")
    staged = list((tmp_path / "cache").rglob("README.md"))
    assert not staged  # the format does not read it: not fetched

    hub = HubServer().start()
    try:
        hub.repo("org/v21").add_commit(v21, "main")
        [result] = _pack(hub, tmp_path, [{"repo": "org/v21", "dst": str(tmp_path / "hub"), "shard_size_mb": SHARD_SIZE_MB}])
    finally:
        hub.stop()
    assert "error" not in result, result
    assert packed(tmp_path / "hub") == packed(tmp_path / "local")

    monkeypatch.setattr(base, "SOURCE_FORMATS", tuple(f for f in SOURCE_FORMATS if f.name != "LeRobot v2.1"))
    with pytest.raises(SourceError, match=r"codebase_version 'v2.1' is not supported.*meta/episodes.jsonl"):
        pack_dataset(str(v21), str(tmp_path / "without-the-row"))
