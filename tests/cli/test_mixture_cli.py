"""`lerobot-shards mixture create/report` and the sources file: which datasets enter
mixture.json, how the others are reported (failed, incomplete, missing, invalid), --name,
--sources, --where, --strict, a bucket root, and the packer never importing torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from lerobot_shards import MixtureError, SourcesError, create_mixture, pack_dataset, parse_sources
from lerobot_shards.cli import main as cli
from lerobot_shards.core.format import MixtureSpec
from lerobot_shards.packer import dataset_name, failure_path
from lerobot_shards.testing import SampleSpec, write_sample_dataset
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

SPECS = {"alpha": SampleSpec(episodes=2, lengths=(4, 6)), "beta": SampleSpec(episodes=3, lengths=(3, 5, 2), fps=15, state_dim=4)}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """{name: packed root} for two small datasets, packed once."""
    base = tmp_path_factory.mktemp("packed")
    out = {}
    for name, spec in SPECS.items():
        write_sample_dataset(base / "src" / name, spec)
        pack_dataset(str(base / "src" / name), str(base / name))
        out[name] = base / name
    return out


@pytest.fixture
def root(packed, tmp_path):
    """A mixture root: alpha and beta packed, one failed (record), one incomplete (no manifest)."""
    dst = tmp_path / "mix"
    for name, path in packed.items():
        shutil.copytree(path, dst / name)
    (dst / "gamma" / "shards").mkdir(parents=True)  # a pack killed before its manifest
    (dst / "_failures").mkdir()
    (dst / "_failures" / "delta.json").write_text(
        json.dumps({"source": "org/delta", "error": "SourceError: meta/info.json: missing"})
    )
    return dst


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_create_writes_the_complete_datasets_and_lists_the_rest(root):
    # Datasets left out: exit 1, nothing written, each listed (issue 42: it exited 0).
    refused = _invoke("mixture", "create", root)
    assert refused.exit_code == 1 and not (root / "mixture.json").exists()
    assert "2 datasets would be left out of the mixture: gamma (incomplete), delta (failed)" in refused.output, refused.output
    assert "FAILED delta: SourceError: meta/info.json: missing" in refused.output
    result = _invoke("mixture", "create", root, "--allow-partial")
    assert result.exit_code == 0, result.output
    assert "2 dataset(s) left out (--allow-partial)" in result.output
    assert "mixture.json: 2 datasets, 20 anchors" in result.output  # 4+6 + 3+5+2 frames
    assert "2 dataset(s) not in the mixture:" in result.output
    assert "FAILED delta: SourceError: meta/info.json: missing" in result.output
    assert "INCOMPLETE gamma: no manifest.json: the pack did not finish" in result.output
    spec = MixtureSpec.from_json((root / "mixture.json").read_text())
    assert spec.names == ["alpha", "beta"] and spec.default_weights == "anchors"
    beta = spec.entry("beta")
    assert (beta.path, beta.anchors, beta.episodes, beta.fps, beta.weight) == ("beta", 10, 3, 15, 10.0)
    assert beta.features["observation.state"].shape == (4,) and beta.video_keys == (
        "observation.images.top",
        "observation.images.wrist",
    )
    assert beta.features["observation.images.top"].dtype == "video"
    strict = _invoke("mixture", "create", root, "--strict")  # the default now: kept for scripts that pass it
    assert strict.exit_code == 1 and "2 datasets would be left out" in strict.output


def test_the_reader_streams_the_written_mixture(root):
    from lerobot_shards import MixtureDataset

    _invoke("mixture", "create", root, "--allow-partial")
    dataset = MixtureDataset(str(root / "mixture.json"), return_uint8=True)
    assert dataset.names == ["alpha", "beta"] and len(dataset) == 20
    assert len({(int(s["dataset_index"]), int(s["index"])) for s in dataset}) == 20


def test_report_lists_every_dataset_with_its_status(root):
    result = _invoke("mixture", "report", root)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].split() == ["dataset", "status", "anchors", "error", "or", "what", "the", "pack", "left", "out"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:-1]}
    assert rows == {"alpha": "ok", "beta": "ok", "gamma": "incomplete", "delta": "failed"}
    assert lines[-1] == "2 ok, 2 not ok"
    assert not (root / "mixture.json").exists()  # report writes nothing
    shutil.rmtree(root / "gamma")
    (root / "_failures" / "delta.json").unlink()
    assert _invoke("mixture", "report", root).exit_code == 0


def test_sources_file_orders_the_mixture_and_reports_tasks_that_never_ran(root, tmp_path):
    sources = tmp_path / "sources.txt"
    sources.write_text("# in training order\n/data/beta\norg/never_ran@v1\n/data/alpha  # trailing comment\n/data/delta\n")
    result = _invoke("mixture", "create", root, "--sources", sources, "--allow-partial")
    assert result.exit_code == 0, result.output
    assert [d["name"] for d in json.loads((root / "mixture.json").read_text())["datasets"]] == ["beta", "alpha"]
    assert "MISSING org--never_ran: nothing at" in result.output and "its pack never ran" in result.output
    assert "FAILED delta: SourceError" in result.output
    assert "gamma" not in result.output  # not in the sources file
    sources.write_text("/p/x\nb/y x\n")
    bad = _invoke("mixture", "create", root, "--sources", sources)
    assert bad.exit_code == 2 and "sources.txt:2: name 'x' (from 'b/y') is already used on line 1" in bad.output


def test_names_pick_datasets_anywhere(packed, tmp_path):
    dst = tmp_path / "only"
    dst.mkdir()
    result = _invoke("mixture", "create", dst, "--name", f"a={packed['alpha']}", "--name", f"b={packed['beta']}")
    assert result.exit_code == 0, result.output
    spec = MixtureSpec.from_json((dst / "mixture.json").read_text())
    assert [(d.name, d.path) for d in spec.datasets] == [("a", str(packed["alpha"])), ("b", str(packed["beta"]))]
    assert _invoke("mixture", "create", dst, "--name", "a").exit_code == 2
    assert "expected NAME=PATH, got 'a'" in _invoke("mixture", "create", dst, "--name", "a").output


def test_where_counts_matching_anchors_and_is_recorded(root):
    result = _invoke("mixture", "create", root, "--where", "frame_index >= 2", "--allow-partial")
    assert result.exit_code == 0, result.output
    spec = MixtureSpec.from_json((root / "mixture.json").read_text())
    assert [d.anchors for d in spec.datasets] == [(4 - 2) + (6 - 2), (3 - 2) + (5 - 2) + 0]
    assert all(d.where == "frame_index >= 2" for d in spec.datasets)
    bad = _invoke("mixture", "create", root, "--where", "no_such_column = 1")
    # Said once (issue 42: every pack INVALID, then "no complete packed dataset"), DuckDB's lines kept.
    assert bad.exit_code == 1 and "INVALID" not in bad.output, bad.output
    assert (
        "2 dataset(s) opened and the where predicate applies to none of them; alpha: where='no_such_column = 1' is not a "
        'valid predicate over index/samples.parquet: Binder Error: Referenced column "no_such_column" not found' in bad.output
    )
    assert "\\x0a" not in bad.output and "\nLINE 1:" in bad.output


def test_invalid_manifest_and_nothing_complete(root, tmp_path):
    (root / "beta" / "manifest.json").write_text('{"format": "something-else"}')
    result = _invoke("mixture", "create", root)
    assert "INVALID beta: FormatError:" in result.output and "expected format 'lerobot-shards'" in result.output
    empty = tmp_path / "empty"
    (empty / "gamma").mkdir(parents=True)
    with pytest.raises(
        MixtureError, match=r"no complete packed dataset under .*empty \(1 dataset\(s\) found\); mixture.json not written"
    ):
        create_mixture(str(empty))
    assert not (empty / "mixture.json").exists()
    assert _invoke("mixture", "create", empty).exit_code == 1


def test_create_on_a_bucket(packed, s3_bucket):
    url, options = s3_bucket
    from lerobot_shards.core.storage import Storage

    for name, path in packed.items():
        bucket = Storage(f"{url}/mix/{name}", options)
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            bucket.write_bytes(str(file.relative_to(path)), file.read_bytes())
    Storage(f"{url}/mix", options).write_bytes(failure_path("broken"), json.dumps({"error": "boom"}).encode())
    with pytest.raises(MixtureError, match=r"1 dataset would be left out of the mixture: broken \(failed\)"):
        create_mixture(f"{url}/mix", storage_options=options)
    report = create_mixture(f"{url}/mix", storage_options=options, allow_partial=True)
    assert [d["name"] for d in report.datasets] == ["alpha", "beta"] and report.failures == {"broken": "boom"}
    spec = MixtureSpec.from_json(Storage(f"{url}/mix", options).read_bytes("mixture.json"))
    assert spec.total_anchors == 20


# -- the sources file ---------------------------------------------------------------------


def test_sources_file_lines_names_and_revisions():
    sources = parse_sources(
        "# comment\n\nlerobot/pusht\nlerobot/aloha@3f2a9c1d  aloha\ns3://bucket/raw/ds_a/\n/data/my_ds+1\n./rel/ds_b # x\n"
    )
    assert [(s.name, s.line, s.repo_id, s.revision) for s in sources] == [
        ("lerobot--pusht", 3, "lerobot/pusht", None),
        ("aloha", 4, "lerobot/aloha", "3f2a9c1d"),
        ("ds_a", 5, None, None),
        ("my_ds_1", 6, None, None),
        ("ds_b", 7, None, None),
    ]
    assert sources[1].pack_args("DST/aloha") == ["--repo-id", "lerobot/aloha", "--revision", "3f2a9c1d", "DST/aloha"]
    assert sources[2].pack_args("DST/ds_a") == ["s3://bucket/raw/ds_a/", "DST/ds_a"]
    assert dataset_name("org/name@main") == "org--name" and dataset_name("file:///x/y") == "y"


@pytest.mark.parametrize(
    "text,message",
    [
        ("a/b c d\n", r"src:1: expected 'SOURCE \[NAME\] \[OLD=NEW \.\.\.\]', got 3 fields"),
        ("a/b\nc/b b\n\nx/b\n", None),
        ("/data/x\ns3://bucket/x\n", r"src:2: name 'x' \(from 's3://bucket/x'\) is already used on line 1; give one"),
        ("/data/_private\n", r"src:1: name '_private' \(from '/data/_private'\) is empty or starts with '_' or '.'"),
        ("a/b c/d\n", r"src:1: name 'c/d' may only use \[A-Za-z0-9_.-\]"),
    ],
)
def test_sources_file_errors_name_the_line(text, message):
    if message is None:
        assert [s.name for s in parse_sources(text, where="src")] == ["a--b", "b", "x--b"]
        return
    with pytest.raises(SourcesError, match=message):
        parse_sources(text, where="src")


def test_sources_module_validates_and_counts(tmp_path):
    (tmp_path / "s.txt").write_text("a/b\n# c\n/x/y\n")
    ok = subprocess.run(
        [sys.executable, "-m", "lerobot_shards.cli", "mixture", "sources", str(tmp_path / "s.txt")],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and ok.stdout == f"{tmp_path / 's.txt'}: 2 dataset(s) (1 from the Hub, 1 paths or URLs); valid\n"
    count = subprocess.run(
        [sys.executable, "-m", "lerobot_shards.cli", "mixture", "sources", "--count", str(tmp_path / "s.txt")],
        capture_output=True,
        text=True,
    )
    assert count.returncode == 0 and count.stdout == "2\n"  # what submit_mixture.sh reads
    listing = subprocess.run(
        [sys.executable, "-m", "lerobot_shards.cli", "mixture", "sources", "--list", str(tmp_path / "s.txt")],
        capture_output=True,
        text=True,
    )
    assert listing.stdout == "0\ta--b\ta/b\n1\ty\t/x/y\n"
    (tmp_path / "s.txt").write_text("a/b\nc/b b\nb\n")
    bad = subprocess.run(
        [sys.executable, "-m", "lerobot_shards.cli", "mixture", "sources", str(tmp_path / "s.txt")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "s.txt:3: name 'b'" in bad.stderr


def test_packer_modules_do_not_import_torch():
    # Packing nodes are CPU nodes: torch is seconds of start-up per process for nothing.
    code = (
        "import sys, lerobot_shards, lerobot_shards.cli; from lerobot_shards import pack_dataset, finalize, verify, summarize, create_mixture, read_sources; "
        "import lerobot_shards.packer.mixture.task, lerobot_shards.cli.mixture, lerobot_shards.core.format, lerobot_shards.core.storage; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_scanning_in_processes_reports_what_one_process_does(root):
    """Many packs are opened in processes (issue 31); the report and entries, statuses and
    order included, are the same as one process's, and so is the compiled mixture."""
    from lerobot_shards.packer.mixture import create_mixture, scan_datasets

    shutil.copytree(root / "alpha", root / "alpha-again")  # a duplicate
    (root / "Bad Name").mkdir()  # an invalid name
    one = scan_datasets(str(root), processes=1)
    many = scan_datasets(str(root), processes=3)
    assert [vars(r) for r in one[0].rows] == [vars(r) for r in many[0].rows]
    assert one[1] == many[1]
    assert {r.status for r in many[0].rows} == {"ok", "duplicate", "invalid", "incomplete", "failed"}
    shutil.rmtree(root / "Bad Name")
    create_mixture(str(root), processes=1, allow_partial=True)
    single = {p.name: p.read_bytes() for p in (root / "_mixture").iterdir()} | {
        "mixture.json": (root / "mixture.json").read_bytes()
    }
    create_mixture(str(root), processes=3, allow_partial=True)
    assert {p.name: p.read_bytes() for p in (root / "_mixture").iterdir()} | {
        "mixture.json": (root / "mixture.json").read_bytes()
    } == single
