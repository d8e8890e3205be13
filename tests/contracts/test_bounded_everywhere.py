"""Bounded in every environment, one error boundary, nothing left behind (issue 55), each row
as the user or the hostile neighbour met it. Numbers are the issue's rows.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lerobot_shards import pack_dataset, verify
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
TOP = "observation.images.top"


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny") / "src"
    write_sample_dataset(root, SampleSpec(episodes=2, lengths=(5, 6), cameras=(CameraSpec(TOP, 32, 32),)))
    return root


@pytest.fixture
def private_temp(tmp_path, monkeypatch) -> Path:
    """The system temp folder, for this test alone (the staging sweep looks there)."""
    temp = tmp_path / "systemp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return temp


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- 5. the staging sweep trusts no name it finds ---------------------------------------------------
def test_5_the_sweep_parses_names_strictly_never_follows_links_and_tags_the_resolved_destination(
    tiny_source, tmp_path, private_temp, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    # The tag (docs in packer/run/staging.py): 12 hex digits of SHA-256 of the real absolute path.
    tag = hashlib.sha256(os.path.realpath(tmp_path / "out").encode()).hexdigest()[:12]
    dead = private_temp / f"lerobot-shards-{tag}-{_dead_pid()}-shard-abc"
    dead.mkdir()
    (dead / "shard.tar").write_bytes(b"half a shard")
    planted = {
        "huge": private_temp / f"lerobot-shards-{tag}-{10**30}-shard-x",  # past a C long: os.kill overflowed
        "superscript": private_temp / f"lerobot-shards-{tag}-\u00b2-shard-x",  # isdigit() but int() refuses
        "arabic": private_temp / f"lerobot-shards-{tag}-\u0661\u0662-shard-x",  # non-ASCII digits
        "zero": private_temp / f"lerobot-shards-{tag}-0-shard-x",  # os.kill(0) signals our own group
    }
    for path in planted.values():
        path.mkdir()
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    link = private_temp / f"lerobot-shards-{tag}-{_dead_pid()}-shard-link"
    link.symlink_to(outside, target_is_directory=True)

    report = pack_dataset(str(tiny_source), "out")  # relative: the tag comes from the resolved path
    assert report.shards_written >= 1 and verify(str(tmp_path / "out")).ok
    assert not dead.exists(), "a dead run's staging under the resolved destination's tag is swept"
    assert all(p.exists() for p in planted.values()), "names that are not ours are left as found"
    assert not link.is_symlink() and (outside / "keep.txt").read_text() == "mine", "the link goes, not its target"


# -- 9. nothing left in the temp folder by a test session --------------------------------------------
def test_9_the_session_end_check_fails_a_session_that_leaves_something(tmp_path):
    test = tmp_path / "test_leaves.py"
    # stray.tar is judged; so is a probe-like name with other bytes; Python's own gettempdir()
    # probe (8 letters, b"blat"), left by a process killed in its first milliseconds, is not.
    test.write_text(
        "import tempfile, os\n\ndef test_leaves():\n"
        "    folder = tempfile.gettempdir()\n"
        "    open(os.path.join(folder, 'stray.tar'), 'w').close()\n"
        "    open(os.path.join(folder, 'q1w2e3r4'), 'wb').write(b'blah')\n"
        "    open(os.path.join(folder, '205yztiz'), 'wb').write(b'blat')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEROBOT_SHARDS_TEST_TEMP", "PYTEST_XDIST"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest", "-q", str(test)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = re.search(r"left 2 item\(s\) in its temp folder (\S+): \['q1w2e3r4', 'stray.tar'\]", result.stdout)
    try:
        assert result.returncode == 1 and found, result.stdout[-2000:]
        assert "1 passed" in result.stdout  # the test itself passed; the session failed
    finally:
        if found:
            shutil.rmtree(found.group(1).rstrip(":"), ignore_errors=True)


def test_5_a_deep_temp_folder_does_not_stop_a_pool_of_workers(tiny_source, tmp_path, private_temp, monkeypatch):
    """Progress once crossed processes through a manager listening on a Unix socket under
    $TMPDIR: past AF_UNIX's 108 bytes (a SLURM job's or a test's TMPDIR) `--workers 2` failed."""
    deep = private_temp / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    seen = []
    report = pack_dataset(str(tiny_source), str(tmp_path / "out"), workers=2, shard_size_mb=0.001, progress=seen.append)
    assert report.shards_written == 2 and verify(str(tmp_path / "out")).ok
    assert seen, "progress still reaches the caller from the workers"


# -- 4. one error boundary: every command, every bad input, one line --------------------------------
def _absent_backend() -> str:
    """A storage scheme fsspec knows whose package is not installed here (gs:// without gcsfs)."""
    import importlib.util

    from fsspec.registry import known_implementations

    for scheme in ("gs", "az", "oci", "dropbox", "box"):
        package = known_implementations.get(scheme, {}).get("class", "").split(".")[0]
        if package and importlib.util.find_spec(package) is None:
            return scheme
    pytest.skip("every optional storage backend is installed here")


@pytest.fixture(scope="module")
def read_only(tmp_path_factory):
    """A read-only folder (root writes through permission bits: a read-only mount is the test)."""
    mount = tmp_path_factory.mktemp("ro")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (needs root with CAP_SYS_ADMIN)")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture(scope="module")
def malformed(tmp_path_factory, tiny_source) -> dict[str, Path]:
    """A source, a pack and a mixture folder, each with one JSON file that does not parse."""
    root = tmp_path_factory.mktemp("malformed")
    source = root / "source"
    shutil.copytree(tiny_source, source)
    (source / "meta" / "info.json").write_text('{"codebase_version": "v3.0", ')
    pack = root / "pack"
    pack_dataset(str(tiny_source), str(pack))
    (pack / "manifest.json").write_text("{not json")
    shards = root / "unfinished"
    pack_dataset(str(tiny_source), str(shards), part=(0, 2), shard_size_mb=0.001)  # part 1 of 2: unfinished
    for receipt in (shards / "shards").glob("*.json"):
        receipt.write_text("[")
    mixture = root / "mixture"
    pack_dataset(str(tiny_source), str(mixture / "a"))
    (mixture / "mixture.json").write_text("{")
    sources = root / "sources.txt"
    sources.write_bytes(b"\xff\xfe not text\n")
    return {"good": tiny_source, "source": source, "pack": pack, "unfinished": shards, "mixture": mixture, "sources": sources}


def _bad_inputs(malformed, read_only, tmp_path) -> list[tuple[str, list[str]]]:
    absent = _absent_backend()
    missing = str(tmp_path / "no" / "such")
    rows = []
    for what, place in (
        ("unknown scheme", "nosuchproto://bucket/x"),
        (f"{absent}:// without its package", f"{absent}://bucket/x"),
    ):
        rows += [
            (f"pack from {what}", ["pack", place, str(tmp_path / "out")]),
            (f"pack into {what}", ["pack", str(malformed["good"]), place]),
            (f"check {what}", ["check", place]),
            (f"finalize {what}", ["finalize", place]),
            (f"verify {what}", ["verify", place]),
            (f"info {what}", ["info", place]),
            (f"sql {what}", ["sql", place, "SELECT 1"]),
            (f"preview {what}", ["preview", place, "-o", str(tmp_path / "p.html")]),
            (f"mixture create {what}", ["mixture", "create", place]),
            (f"mixture report {what}", ["mixture", "report", place]),
            (f"make-sample into {what}", ["make-sample", place, "--episodes", "1"]),
        ]
    rows += [
        ("pack from a missing folder", ["pack", missing, str(tmp_path / "out")]),
        ("check a missing folder", ["check", missing]),
        ("finalize a missing folder", ["finalize", missing]),
        ("info of a missing folder", ["info", missing]),
        ("sql of a missing folder", ["sql", missing, "SELECT 1"]),
        ("preview of a missing folder", ["preview", missing, "-o", str(tmp_path / "p.html")]),
        ("mixture report of a missing folder", ["mixture", "report", missing]),
        ("mixture sources of a missing file", ["mixture", "sources", missing]),
        ("pack a malformed info.json", ["pack", str(malformed["source"]), str(tmp_path / "out2")]),
        ("check a malformed info.json", ["check", str(malformed["source"])]),
        ("finalize malformed receipts", ["finalize", str(malformed["unfinished"])]),
        ("info of a malformed manifest", ["info", str(malformed["pack"])]),
        ("sql of a malformed manifest", ["sql", str(malformed["pack"]), "SELECT 1"]),
        ("preview of a malformed manifest", ["preview", str(malformed["pack"]), "-o", str(tmp_path / "p.html")]),
        ("mixture report of a malformed mixture.json", ["mixture", "report", str(malformed["mixture"])]),
        ("mixture sources of a file that is not text", ["mixture", "sources", str(malformed["sources"])]),
        ("pack into a read-only folder", ["pack", str(malformed["good"]), str(read_only / "out")]),
        ("make-sample into a read-only folder", ["make-sample", str(read_only / "sample"), "--episodes", "1"]),
        ("preview into a read-only folder", ["preview", str(malformed["pack"]), "-o", str(read_only / "p.html")]),
        ("mixture create in a read-only folder", ["mixture", "create", str(read_only)]),
    ]
    return rows


def test_4_every_command_says_one_line_for_every_bad_input(malformed, read_only, tmp_path, tiny_source, monkeypatch):
    from click.testing import CliRunner

    from lerobot_shards.cli import main as cli

    monkeypatch.chdir(tmp_path)  # nothing a command would make of a URL lands in the checkout
    failures = []
    for what, args in _bad_inputs(malformed, read_only, tmp_path):
        result = CliRunner().invoke(cli, args)
        errors = [line for line in result.output.splitlines() if line.startswith("Error")]
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or "Traceback" in result.output or result.exit_code in (0, 70) or len(errors) != 1:
            failures.append(f"{what}: exit {result.exit_code}, {type(result.exception).__name__}: {result.output[-300:]!r}")
    assert not failures, "\n".join(failures)


def test_4_the_installed_command_line_says_one_line_too(tmp_path):
    """The same boundary in a real process (python -m lerobot_shards), and exit 70 with the
    traceback's way out for a bug of ours."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["pack", "nosuchproto://x/y", str(tmp_path / "out")], ["finalize", "nosuchproto://x/y"]):
        result = subprocess.run(
            [sys.executable, "-m", "lerobot_shards", *args], env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines() == [
            "Error: nosuchproto://x/y: unknown storage scheme nosuchproto://; give a local path or a URL of a storage "
            "system (s3://, gs://, az://, hf://, or another fsspec knows)"
        ], result.stderr


# -- 3. keys that collide where they are used -------------------------------------------------------
@pytest.mark.parametrize(
    "windows",
    [
        {"a.b": {"action": [0.0, 0.1]}, "a_b": {"action": [0.0]}},  # one name after '.' -> '_'
        {"w": {"action": [0.0, 0.1]}, "W": {"action": [0.0]}},  # one name to DuckDB, which ignores case
    ],
)
def test_3_windows_whose_pad_columns_meet_are_refused_before_any_shard(tiny_source, tmp_path, windows):
    from lerobot_shards import OptionsError

    with pytest.raises(OptionsError, match=r"share the samples index column .*rename one window") as caught:
        pack_dataset(str(tiny_source), str(tmp_path / "out"), windows=windows)
    assert caught.value.option == "windows"
    assert not (tmp_path / "out" / "shards").exists() or not any((tmp_path / "out" / "shards").iterdir())


def test_3_sql_never_shows_one_keys_values_under_another_keys_name(tiny_source, tmp_path):
    """`OBSERVATION.STATE` beside `observation.state` (LeRobot reads both, by exact name):
    DuckDB ignores case, and `SELECT "observation.state"` returned the decoy's values."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from lerobot_shards import PackedDataset, run_sql
    from lerobot_shards.cli import main as cli

    source = tmp_path / "src"
    shutil.copytree(tiny_source, source)
    info = json.loads((source / "meta" / "info.json").read_text())
    info["features"] = {"OBSERVATION.STATE": info["features"]["observation.state"], **info["features"]}
    (source / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    for path in (source / "data").glob("*/*.parquet"):
        table = pq.read_table(path)
        decoy = pa.array([[1000.0 + x for x in row] for row in table["observation.state"].to_pylist()], pa.list_(pa.float32()))
        pq.write_table(table.add_column(0, "OBSERVATION.STATE", decoy), path)  # the decoy first: DuckDB's pick
    pack = tmp_path / "pack"
    pack_dataset(str(source), str(pack))
    truth = {int(s["index"]): s for s in PackedDataset(str(pack), shuffle=False)}
    assert all(float(s["OBSERVATION.STATE"][0]) >= 1000 > float(s["observation.state"][0]) for s in truth.values())

    result = CliRunner().invoke(cli, ["sql", str(pack), 'SELECT "observation.state" FROM frames'])
    assert result.exit_code == 1, result.output
    assert 'named <name>@<n>: "OBSERVATION.STATE@1", "observation.state@2"' in result.output, result.output
    for alias, key in (("observation.state@2", "observation.state"), ("OBSERVATION.STATE@1", "OBSERVATION.STATE")):
        _, rows = run_sql(str(pack), f'SELECT "index", "{alias}" FROM frames ORDER BY "index"')
        assert rows and all(list(values) == pytest.approx(truth[index][key].tolist()) for index, values in rows), alias


# -- 6. a refused mixture create touches nothing ------------------------------------------------------
@pytest.mark.parametrize("planted", ["link to a private file", "link to /dev/zero", "fifo"])
def test_6_a_mixture_json_that_is_not_a_file_is_never_read_copied_or_followed(tiny_source, tmp_path, planted):
    from lerobot_shards import MixtureDataset, MixtureError, create_mixture

    mix = tmp_path / "mix"
    pack_dataset(str(tiny_source), str(mix / "a"))
    secret = tmp_path / "secret.json"
    secret.write_text('{"token": "mine"}')
    secret.chmod(0o600)
    target = mix / "mixture.json"
    if planted == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(secret if planted == "link to a private file" else Path("/dev/zero"))
    with pytest.raises(MixtureError, match=r"the existing mixture.json is unchanged \((it is a link|it is not a regular file)"):
        create_mixture(str(mix), names={"a": str(mix / "nope")})  # a typo: refused
    assert sorted(p.name for p in mix.iterdir()) == ["a", "mixture.json"], "nothing copied beside it"
    assert (target.is_symlink() or target.is_fifo()) and secret.read_text() == '{"token": "mine"}'
    report = create_mixture(str(mix))  # a success replaces the entry itself, never writes through it
    assert report.ok and target.is_file() and not target.is_symlink()
    assert secret.read_text() == '{"token": "mine"}' and (secret.stat().st_mode & 0o777) == 0o600
    assert len(MixtureDataset(str(target))) == 11


def test_6_a_success_keeps_the_replaced_mixtures_compiled_files_one_generation(tiny_source, tmp_path):
    import json

    from lerobot_shards import create_mixture

    mix = tmp_path / "mix"
    pack_dataset(str(tiny_source), str(mix / "a"))
    pack_dataset(str(tiny_source), str(mix / "b"), shard_size_mb=0.001)

    def create(names: dict) -> set[str]:
        assert create_mixture(str(mix), names=names).ok
        return {f["path"] for f in json.loads((mix / "mixture.json").read_text())["index"].values()}

    def present() -> set[str]:
        return {f"_mixture/{p.name}" for p in (mix / "_mixture").iterdir()}

    first = create({"a": "a"})
    second = create({"a": "a", "b": "b"})
    assert present() == first | second, "a trainer that opened the first mixture still finds its files"
    third = create({"b": "b"})
    assert present() == second | third, "the generation before the replaced one goes"
    assert first - (second | third), "the three mixtures differ in what they compile"


# -- 1. bounded reads cost what the file holds ------------------------------------------------------
PREFIX_CHILD = """
import resource, sys
from lerobot_shards.core.storage import Storage
storage = Storage(sys.argv[1])
storage.read_prefix("small.json", 2)  # the client and its imports, before the limit
size = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), resource.RLIM_INFINITY))
data = storage.read_prefix("small.json", (1 << 30) + 1)  # a manifest's bound is 256 MiB; any bound
print(len(data))
"""


def test_1_a_bounded_prefix_read_of_a_small_local_file_costs_what_it_holds(tmp_path):
    """`read_prefix` of a manifest (bound 256 MiB) asked for the whole bound up front: under a
    virtual-memory limit a reader failed on a 2 KB manifest with ENOMEM."""
    (tmp_path / "small.json").write_text('{"a": 1}')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PREFIX_CHILD, str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0 and done.stdout.split() == ["8"], done.stderr[-2000:]


def test_9_a_session_a_test_starts_never_judges_or_removes_the_running_sessions_folder(tmp_path):
    """A pytest session a test starts (tests/contracts/test_tiers.py) inherits the variables;
    one that ended cleanly removed the running session's temp folder, and every later test
    that staged anything there failed."""
    test = tmp_path / "test_passes.py"
    test.write_text("def test_passes():\n    pass\n")
    folder = os.environ["LEROBOT_SHARDS_TEST_TEMP"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest", "-q", str(test)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert os.path.isdir(folder) and os.path.isdir(tempfile.gettempdir())


# -- 7. two packs into one destination ----------------------------------------------------------------
def _wait_for(predicate, what: str, timeout: float = 300) -> None:
    import time

    deadline = time.monotonic() + timeout  # a hang guard, not a measurement
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def _start_pack(src: Path, dst: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lerobot_shards", "pack", str(src), str(dst), "--shard-size-mb", "0.001"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_7_a_second_pack_into_a_destination_being_packed_is_refused_by_name(tiny_source, tmp_path):
    import signal

    from click.testing import CliRunner

    from lerobot_shards.cli import main as cli

    dst = tmp_path / "out"
    first = _start_pack(tiny_source, dst)
    lease = dst / ".leases" / "all.json"
    try:
        _wait_for(lambda: lease.exists() and str(first.pid) in lease.read_text(), "the first pack took no lease")
        first.send_signal(signal.SIGSTOP)  # holds its lease, mid-pack, while the second one tries
        second = CliRunner().invoke(cli, ["pack", str(tiny_source), str(dst), "--shard-size-mb", "0.001"])
        assert second.exit_code == 1, second.output
        assert f"is being packed by another run (the whole pack: pid {first.pid} on " in second.output, second.output
        part = CliRunner().invoke(cli, ["pack", str(tiny_source), str(dst), "--part", "0/2", "--shard-size-mb", "0.001"])
        assert part.exit_code == 1 and f"pid {first.pid}" in part.output, "a part meets the whole pack's shards"
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert verify(str(dst), decode=True).ok
    assert not (dst / ".leases").exists(), "a finished pack leaves no lease"


def test_7_a_killed_packs_lease_is_taken_over_with_a_line_saying_so(tiny_source, tmp_path):
    import signal

    dst = tmp_path / "out"
    first = _start_pack(tiny_source, dst)
    lease = dst / ".leases" / "all.json"
    _wait_for(lambda: lease.exists() and str(first.pid) in lease.read_text(), "the first pack took no lease")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    second = subprocess.run(
        [sys.executable, "-m", "lerobot_shards", "pack", str(tiny_source), str(dst), "--shard-size-mb", "0.001"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert second.returncode == 0, second.stderr
    assert f"took over the lease a stopped run left (pid {first.pid} on " in second.stderr
    assert verify(str(dst)).ok and not (dst / ".leases").exists()


def test_7_parts_of_one_split_run_side_by_side(tiny_source, tmp_path):
    """Leases meet only where shards can: `--part 0/2` and `--part 1/2` together are an array."""
    import json

    from lerobot_shards import finalize

    dst = tmp_path / "out"
    (dst / ".leases").mkdir(parents=True)
    import fcntl

    held = dst / ".leases" / "part-1-of-2.json"
    held.write_text(json.dumps({"host": "elsewhere", "pid": 1, "job": "7_1", "since": 0, "expires": 0, "token": "x"}))
    with open(held) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # part 1 of 2 is running
        pack_dataset(str(tiny_source), str(dst), part=(0, 2), shard_size_mb=0.001)
        from lerobot_shards import PackError

        with pytest.raises(PackError, match=r"--part 1 of 2: pid 1 on elsewhere, SLURM job 7_1"):
            pack_dataset(str(tiny_source), str(dst), part=(0, 3), shard_size_mb=0.001)  # another split meets it
    pack_dataset(str(tiny_source), str(dst), part=(1, 2), shard_size_mb=0.001)
    finalize(str(dst))
    assert verify(str(dst)).ok


def test_7_a_bucket_lease_refuses_a_live_pack_and_takes_over_an_expired_one(tiny_source, s3_bucket, caplog):
    import json
    import logging
    import time

    import s3fs

    from lerobot_shards import PackError

    url, options = s3_bucket
    fs = s3fs.S3FileSystem(**options)
    dst = f"{url}/packed"
    key = f"{url.removeprefix('s3://')}/packed/.leases/all.json"
    live = {"host": "node-7", "pid": 4242, "job": "99", "since": time.time(), "expires": time.time() + 3600, "token": "t"}
    fs.pipe_file(key, json.dumps(live).encode())
    with pytest.raises(PackError, match=r"is being packed by another run \(the whole pack: pid 4242 on node-7, SLURM job 99"):
        pack_dataset(str(tiny_source), dst, storage_options=options)
    fs.pipe_file(key, json.dumps({**live, "expires": time.time() - 1}).encode())
    with caplog.at_level(logging.WARNING):
        pack_dataset(str(tiny_source), dst, storage_options=options)
    assert "took over the lease a stopped run left (pid 4242 on node-7, SLURM job 99" in caplog.text
    assert verify(dst, storage_options=options).ok
    assert not fs.exists(key), "a finished pack leaves no lease"


# -- 2. parquet footers counted before pyarrow parses them --------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def bare_chunk_parquet(groups: int) -> bytes:
    """A parquet file of one INT32 column whose footer (Thrift compact, written by hand) lists
    ``groups`` row groups of one bare column chunk each, and no page anywhere: 10 bytes a
    chunk in the file, ~1.5 KB a chunk once pyarrow parses the footer."""
    root = b"\x48" + _varint(6) + b"schema" + b"\x15" + _zigzag(1) + b"\x00"  # name, num_children
    leaf = b"\x15" + _zigzag(1) + b"\x25" + _zigzag(0) + b"\x18" + _varint(1) + b"a" + b"\x00"  # INT32, REQUIRED, "a"
    chunk = b"\x26" + _zigzag(4) + b"\x00"  # ColumnChunk.file_offset
    group = b"\x19\x1c" + chunk + b"\x16" + _zigzag(0) + b"\x16" + _zigzag(1) + b"\x00"  # columns, bytes, rows
    meta = b"\x15" + _zigzag(1) + b"\x19\x2c" + root + leaf + b"\x16" + _zigzag(groups)
    meta += b"\x19\xfc" + _varint(groups) + group * groups + b"\x00"
    return b"PAR1" + meta + len(meta).to_bytes(4, "little") + b"PAR1"


@pytest.mark.parametrize("place", ["data", "tasks"])
def test_2_a_footer_of_bare_column_chunks_is_refused_before_pyarrow_builds_it(tiny_source, tmp_path, place):
    from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured

    source = tmp_path / "src"
    shutil.copytree(tiny_source, source)
    target = next((source / "data").rglob("*.parquet")) if place == "data" else source / "meta" / "tasks.parquet"
    target.write_bytes(bare_chunk_parquet(1_500_000))  # 15 MB; pyarrow's footer alone: ~2 GB
    code = """
import sys
from lerobot_shards import check_dataset, pack_dataset
if sys.argv[3] == "data":
    pack_dataset(sys.argv[1], sys.argv[2])
else:
    print("FINDINGS", " | ".join(f.line() for f in check_dataset(sys.argv[1]).findings))
"""
    measured = run_measured(code, str(source), str(tmp_path / "out"), place)
    said = measured.outcome if place == "data" else measured.stdout
    assert "parquet footer lists 1,500,000 column chunks in 1,500,000 row groups" in said, measured
    assert str(target) in said, measured
    assert place != "data" or measured.outcome.startswith("SourceError"), measured
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, f"peak {measured.peak_bytes / 2**20:.0f} MiB"


def test_4_a_bug_of_ours_is_one_line_with_exit_70_and_its_advice_gives_the_traceback(monkeypatch, tmp_path):
    """The boundary's advice for an internal error, run as printed: the same command with
    LEROBOT_SHARDS_TRACEBACK=1 keeps the traceback."""
    from click.testing import CliRunner

    from lerobot_shards.cli import main as cli
    from lerobot_shards.tools import summary

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(summary, "summarize", broken)
    result = CliRunner().invoke(cli, ["info", str(tmp_path)])
    assert result.exit_code == 70 and "Traceback" not in result.output, result.output
    assert result.output.splitlines() == [
        "Error: internal error, a bug in lerobot-shards: TypeError: a bug; please report it with the traceback "
        "`LEROBOT_SHARDS_TRACEBACK=1` prints when the same command is run again"
    ], result.output
    again = CliRunner().invoke(cli, ["info", str(tmp_path)], env={"LEROBOT_SHARDS_TRACEBACK": "1"})
    assert isinstance(again.exception, TypeError) and str(again.exception) == "a bug"
