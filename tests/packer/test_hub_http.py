"""Packing from the Hub over real HTTP (issue 22): the real ``huggingface_hub`` client, reached
with ``HF_ENDPOINT``, against a Hub-compatible server on loopback (tests/hub_server.py) that
counts every request and answers 429 past a budget and 503 at random.

Contracts: a whole-repo dataset costs one revision lookup, one listing and one GET per file;
nothing already on disk is requested again; SHA, tag and branch revisions work (a SHA needs no
request at all once staged); 429/503 are retried (``Retry-After`` honoured) and a 20-dataset
mixture completes within a budget the client's per-file path (``snapshot_download``) exceeds;
bad repos, revisions and files fail naming them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[2]
CAMERA = (CameraSpec("observation.images.top", 24, 32),)

PACK = """
import json, sys
from lerobot_shards import pack_dataset
from lerobot_shards.core.errors import LeRobotShardsError
jobs = json.loads(sys.argv[1])
for job in jobs:
    try:
        report = pack_dataset(None, job["dst"], repo_id=job["repo"], revision=job.get("revision"), episodes=job.get("episodes"),
                              cache_dir=job["cache"], shard_size_mb=job.get("shard_size_mb", 512))
        print("RESULT", json.dumps({"repo": job["repo"], "written": report.shards_written, "kept": report.shards_skipped}))
    except LeRobotShardsError as err:
        print("RESULT", json.dumps({"repo": job["repo"], "error": type(err).__name__ + ": " + str(err)}))
"""


def _files(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


@pytest.fixture
def hub():
    server = HubServer().start()
    yield server
    server.stop()


def _pack(hub: HubServer, tmp_path: Path, jobs: list[dict]) -> list[dict]:
    """Run ``pack_dataset`` for each job in one child process talking to ``hub``."""
    for job in jobs:
        job.setdefault("cache", str(tmp_path / "cache"))
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("HF_TOKEN", None)
    child = subprocess.run([sys.executable, "-c", PACK, json.dumps(jobs)], env=env, capture_output=True, text=True, timeout=900)
    results = [json.loads(line[7:]) for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    assert child.returncode == 0 and len(results) == len(jobs), child.stderr[-3000:]
    return results


def _dataset(root: Path, seed: int = 0, **spec) -> Path:
    write_sample_dataset(
        root,
        SampleSpec(episodes=spec.pop("episodes", 3), lengths=spec.pop("lengths", (4, 5, 6)), cameras=CAMERA, seed=seed, **spec),
    )
    return root


def test_a_whole_repo_costs_one_listing_and_one_get_per_file_and_nothing_again(hub, tmp_path):
    source = _dataset(tmp_path / "ds")
    hub.repo("org/ds").add_commit(source, "main")
    [result] = _pack(hub, tmp_path, [{"repo": "org/ds", "dst": str(tmp_path / "out")}])
    assert "error" not in result, result
    assert dict(hub.counts) == {"revision": 1, "tree": 1, "get": _files(source)}, hub.log
    # The staged files are the repo's, byte for byte, and the pack is a normal pack.
    staged = next(p for p in (tmp_path / "cache" / "hub").iterdir() if p.is_dir() and not p.name.endswith(".partial"))
    assert all((staged / p.relative_to(source)).read_bytes() == p.read_bytes() for p in source.rglob("*") if p.is_file())
    assert (tmp_path / "out" / "manifest.json").exists()

    hub.reset_counts()
    [result] = _pack(hub, tmp_path, [{"repo": "org/ds", "dst": str(tmp_path / "out")}])
    assert result["written"] == 0 and dict(hub.counts) == {"revision": 1}, hub.log  # a branch may move: resolved again


def test_sha_tag_and_branch_revisions(hub, tmp_path):
    old, new = _dataset(tmp_path / "v1", seed=1), _dataset(tmp_path / "v2", seed=2)
    repo = hub.repo("org/ds")
    sha_old = repo.add_commit(old, "v1.0")
    repo.add_commit(new, "main")
    results = _pack(
        hub,
        tmp_path,
        [
            {"repo": "org/ds", "revision": "v1.0", "dst": str(tmp_path / "tag")},
            {"repo": "org/ds", "dst": str(tmp_path / "branch")},
            {"repo": "org/ds", "revision": sha_old, "dst": str(tmp_path / "sha")},
        ],
    )
    assert all("error" not in r for r in results), results
    manifests = {name: json.loads((tmp_path / name / "manifest.json").read_text()) for name in ("tag", "branch", "sha")}
    assert manifests["sha"]["source"]["revision"] == sha_old and manifests["tag"]["source"]["revision"] == "v1.0"
    shards = {name: (tmp_path / name / "shards" / "shard-000000.parquet").read_bytes() for name in manifests}
    assert shards["tag"] == shards["sha"] != shards["branch"]
    # The SHA's commit was staged by the tag: packing it again needs no request at all.
    hub.reset_counts()
    _pack(hub, tmp_path, [{"repo": "org/ds", "revision": sha_old, "dst": str(tmp_path / "sha2")}])
    assert dict(hub.counts) == {}, hub.log


def test_an_episode_subset_fetches_only_its_files_once(hub, tmp_path):
    # Small data and video files roll over: each episode lives in its own files.
    source = _dataset(tmp_path / "ds", episodes=6, lengths=(20,) * 6, data_files_size_in_mb=0.002, video_files_size_in_mb=0.002)
    hub.repo("org/ds").add_commit(source, "main")
    [result] = _pack(hub, tmp_path, [{"repo": "org/ds", "episodes": [2], "dst": str(tmp_path / "out")}])
    assert "error" not in result, result
    fetched = [path for kind, path in hub.log if kind == "get"]
    meta = [p for p in fetched if "/meta/" in p]
    assert len(fetched) - len(meta) < _files(source / "data") + _files(source / "videos"), fetched
    assert len(fetched) == len(set(fetched))
    hub.reset_counts()
    _pack(hub, tmp_path, [{"repo": "org/ds", "episodes": [2], "dst": str(tmp_path / "out")}])
    assert "get" not in hub.counts and "tree" not in hub.counts, hub.log


def test_bad_repos_revisions_and_files_fail_naming_them(hub, tmp_path):
    source = _dataset(tmp_path / "ds")
    hub.repo("org/ds").add_commit(source, "main")
    (tmp_path / "tampered").mkdir()
    results = _pack(
        hub,
        tmp_path,
        [
            {"repo": "org/missing", "dst": str(tmp_path / "a")},
            {"repo": "org/ds", "revision": "no-such-branch", "dst": str(tmp_path / "b")},
        ],
    )
    assert "org/missing" in results[0]["error"] and "SourceError" in results[0]["error"], results[0]
    assert "no-such-branch" in results[1]["error"], results[1]
    # A file whose bytes change on the server after it was listed: refused, not staged.
    hub.reset_counts()
    repo = hub.repo("org/other")
    other = _dataset(tmp_path / "other", seed=4)
    repo.add_commit(other, "main")
    hub._blob_ids[other / "meta" / "info.json"] = "0" * 40  # the listing now promises other bytes
    [result] = _pack(hub, tmp_path, [{"repo": "org/other", "dst": str(tmp_path / "c")}])
    assert "meta/info.json: the download does not match the listing" in result["error"], result


def test_a_20_dataset_mixture_completes_under_a_request_budget_with_429s_and_503s(tmp_path):
    """Our path: 2 + files requests per dataset. The client's per-file path
    (``snapshot_download``: a HEAD and a GET per file) is counted on the same repos."""
    sources = [_dataset(tmp_path / "src" / f"ds{i:02d}", seed=i) for i in range(20)]
    files = sum(_files(s) for s in sources)
    server = HubServer(budget=(8, 1.0), error_rate=0.05, seed=7).start()
    try:
        for i, source in enumerate(sources):
            server.repo(f"org/ds{i:02d}").add_commit(source, "main")
        results = _pack(
            server, tmp_path, [{"repo": f"org/ds{i:02d}", "dst": str(tmp_path / "mix" / f"ds{i:02d}")} for i in range(20)]
        )
        assert all("error" not in r for r in results), [r for r in results if "error" in r]
        served = {k: v for k, v in server.counts.items() if k not in ("429", "503")}
        refused = server.counts["429"] + server.counts["503"]
        ours = sum(served.values()) - refused
        assert server.counts["503"] > 0 and server.counts["429"] > 0, dict(server.counts)  # both were met and retried
        assert ours == 2 * 20 + files, dict(server.counts)
        assert "head" not in served
    finally:
        server.stop()
    # The client's own whole-repo path on the same 20 repos, no budget: a HEAD per file too.
    naive = HubServer().start()
    try:
        for i, source in enumerate(sources):
            naive.repo(f"org/ds{i:02d}").add_commit(source, "main")
        env = {**os.environ, "HF_ENDPOINT": naive.url, "HF_HOME": str(tmp_path / "hf-naive"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        code = (
            "import sys\nfrom huggingface_hub import snapshot_download\n"
            "for i in range(20): snapshot_download(f'org/ds{i:02d}', repo_type='dataset', local_dir=f'{sys.argv[1]}/{i}')"
        )
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "naive")], env=env, check=True, capture_output=True, timeout=600
        )
        naive_requests = sum(naive.counts.values())
    finally:
        naive.stop()
    print(
        f"20 datasets, {files} files: ours {ours} requests (+{refused} answered 429/503 and retried); "
        f"snapshot_download {naive_requests} ({dict(naive.counts)})"
    )
    assert naive_requests >= ours + files  # at least one more request per file


def test_a_hub_that_keeps_failing_fails_the_pack_naming_what_and_how_often(tmp_path):
    server = HubServer(error_rate=1.0).start()
    try:
        server.repo("org/ds").add_commit(_dataset(tmp_path / "ds"), "main")
        [result] = _pack(server, tmp_path, [{"repo": "org/ds", "dst": str(tmp_path / "out")}])
    finally:
        server.stop()
    assert result["error"].startswith("SourceError: Hub download of org/ds@main failed after 8 attempt(s)"), result
    assert server.counts["503"] == 8  # bounded, each after the server's Retry-After


def test_a_repo_cannot_plant_what_the_stager_relies_on(hub, tmp_path):
    """Issue 30, finding 1: the listing cache once lived at a path a repo file can have
    (``.lerobot-shards/listing.json``), so a repo could ship its own listing and have an
    absolute path written on the next staging. Now the cache and partial downloads live beside
    the staged tree, every cached entry is checked again, and every write must resolve inside."""
    source = _dataset(tmp_path / "ds")
    outside = tmp_path / "outside"
    entry = {"size": 5, "blob_id": "1" * 40, "lfs_sha256": None}
    planted = {str(outside / "planted.txt"): entry, "../escape.txt": entry}
    (source / ".lerobot-shards" / "partial").mkdir(parents=True)
    (source / ".lerobot-shards" / "listing.json").write_text(json.dumps(planted))
    (source / ".lerobot-shards" / "partial" / "download-x").write_text("not ours")
    hub.repo("org/ds").add_commit(source, "main")
    for _ in range(2):  # the second staging is the one the planted listing used to steer
        [result] = _pack(hub, tmp_path, [{"repo": "org/ds", "dst": str(tmp_path / "out")}])
        assert "error" not in result, result
    assert not outside.exists() and not (tmp_path / "escape.txt").exists()
    assert dict(hub.counts)["tree"] == 1  # the second staging used the stager's own cache
    staged = next(p for p in (tmp_path / "cache" / "hub").iterdir() if p.is_dir() and not p.name.endswith(".partial"))
    assert json.loads((staged / ".lerobot-shards" / "listing.json").read_text()) == planted  # just a repo file, staged
    # The stager's own cache, altered: its entries are checked like the server's, so it is listed again.
    cache = staged.with_name(staged.name + ".listing.json")
    listing = json.loads(cache.read_text())
    listing[str(outside / "again.txt")] = entry
    cache.write_text(json.dumps(listing))
    hub.reset_counts()
    [result] = _pack(hub, tmp_path, [{"repo": "org/ds", "dst": str(tmp_path / "out2")}])
    assert "error" not in result and hub.counts["tree"] == 1, (result, hub.log)
    assert not outside.exists()
    # A staged folder replaced by a link out of the tree: the write is refused, not followed.
    target = tmp_path / "elsewhere"
    target.mkdir()
    shutil.rmtree(staged / "videos")
    (staged / "videos").symlink_to(target, target_is_directory=True)
    [result] = _pack(hub, tmp_path, [{"repo": "org/ds", "dst": str(tmp_path / "out3")}])
    assert "outside the staged tree" in result["error"] and not any(target.iterdir()), result


def test_a_pack_on_the_hub_reads_the_same_samples_and_is_never_written_file_by_file(hub, tmp_path, monkeypatch):
    """hf:// is one row of the storage table (lerobot_shards.core.storage.backends.HUB): a pack uploaded to a
    dataset repo streams through huggingface_hub's HfFileSystem with every byte checked against
    the pinned manifest; writing a pack there is refused before the source is read."""
    import torch

    from lerobot_shards import PackedDataset, pack_dataset
    from lerobot_shards.core.errors import StorageError
    from lerobot_shards.core.format import manifest_sha256
    from lerobot_shards.core.storage import Storage

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    pack = tmp_path / "pack"
    pack_dataset(str(_dataset(tmp_path / "ds")), str(pack), video="h264")
    hub.repo("org/pack").add_commit(pack, "main")
    pin = manifest_sha256((pack / "manifest.json").read_bytes())
    remote = PackedDataset("hf://datasets/org/pack", storage_options={"endpoint": hub.url}, manifest_sha256=pin, shuffle=False)
    local = PackedDataset(str(pack), shuffle=False)
    pairs = list(zip(remote, local, strict=True))
    assert len(pairs) == 15
    for a, b in pairs:
        assert a["index"] == b["index"] and torch.equal(a["observation.images.top"], b["observation.images.top"])
    assert set(hub.counts) <= {"revision", "tree", "get", "head"} and hub.counts["get"] > 0

    hub.reset_counts()
    with pytest.raises(
        StorageError,
        match=r"hf://datasets/org/other: not written to \(the Hugging Face Hub\): every write .* `"
        r"hf upload-large-folder",
    ):
        pack_dataset(str(tmp_path / "no-such-source"), "hf://datasets/org/other", storage_options={"endpoint": hub.url})
    with pytest.raises(StorageError, match="not written to"):
        Storage("hf://datasets/org/pack", {"endpoint": hub.url}).write_bytes("x.json", b"{}")
    assert not hub.counts, "nothing is sent for a refused write"


def test_a_missing_repo_says_which_repo_not_a_probe_of_mixture_json(hub, tmp_path, monkeypatch):
    """Issue 41 finding 5: a missing Hub repository was reported as ``.../mixture.json: not found
    (exists)``, a probe the user never asked for. It now names the repo (and a token for a
    private one), for a pack and for a mixture file."""
    from lerobot_shards import MixtureDataset, PackedDataset
    from lerobot_shards.core.errors import FormatError, MixtureSpecError

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    options = {"endpoint": hub.url}
    with pytest.raises(
        FormatError,
        match=r"hf://datasets/user/nothing: no dataset repo 'user/nothing' on http://127\.0\.0\.1:\d+ "
        r"\(or a private one: give a token",
    ):
        PackedDataset("hf://datasets/user/nothing", storage_options=options)
    with pytest.raises(MixtureSpecError, match=r"mixture.json: no dataset repo 'user/nothing'"):
        MixtureDataset("hf://datasets/user/nothing/mixture.json", storage_options=options)
