"""The field fuzzer's worker (issue 48): run mutations of what a dataset says about itself.

    python tests/scripts/field_fuzz_worker.py WORKDIR

Builds an honest LeRobot source (a video camera, a depth video, a picture camera, language
columns), its pack (copy mode, a window), a compiled mixture of it and a loader state, then
reads requests as JSON lines on stdin:

* ``{"op": "paths"}``: every mutable node per target (``tests/field_fuzz.TARGETS``);
* ``{"op": "run", "mutation": {...}}``: apply one ``Mutation`` to a fresh copy of the honest
  file, run what reads that file, and answer one JSON line: ``outcome`` is ``error`` (one of
  our named errors), ``equal`` (samples equal to the honest ones) or a failure (``different``,
  ``crash``: a foreign exception), with the error and the peak memory of the run.

A process of its own, so that a crash, a hang (faulthandler) or runaway memory is seen by the
parent instead of taking pytest down. The peak is this process's ``VmHWM``, reset before each
mutation through ``/proc/self/clear_refs``.
"""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import sys
import traceback
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lerobot_shards import MixtureDataset, PackedDataset, finalize, pack_dataset, verify  # noqa: E402
from lerobot_shards.core.errors import LeRobotShardsError  # noqa: E402
from lerobot_shards.core.format import content_sha256  # noqa: E402
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset  # noqa: E402
from tests.field_fuzz import JSON_TARGETS, Mutation, json_paths, mutate_json  # noqa: E402
from tests.pack_tamper import seal_files  # noqa: E402

TOP, DEPTH, PIC = "observation.images.top", "observation.depth", "observation.images.pic"
HANG_S = 300  # one mutation; an honest run takes about a second
WINDOW = {"chunk": {"action": [0.0, 1 / 30]}}


def spec() -> SampleSpec:
    return SampleSpec(
        episodes=2,
        lengths=(3, 4),
        language=True,
        cameras=(
            CameraSpec(TOP, 32, 32),
            CameraSpec(DEPTH, 32, 32, kind="depth_video"),
            CameraSpec(PIC, 32, 32, kind="image"),
        ),
    )


def read_pack(root: Path) -> list[dict]:
    dataset = PackedDataset(str(root), shuffle=False, return_uint8=True, prefetch_episodes=0)
    samples = list(dataset)
    dataset.meta.stats  # noqa: B018  (the pack's stats.json and info.json, parsed as LeRobot reads them)
    return samples


def read_mixture(path: Path) -> list[dict]:
    return list(MixtureDataset(str(path), shuffle=False, return_uint8=True, prefetch_episodes=0))


def same(a: list[dict], b: list[dict]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        for key in x:
            u, v = x[key], y[key]
            if isinstance(u, torch.Tensor):
                if not (isinstance(v, torch.Tensor) and u.dtype == v.dtype and u.shape == v.shape and torch.equal(u, v)):
                    return False
            elif u != v:
                return False
    return True


def peak_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass


class Honest:
    """The honest files and what reading them gives."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.source = workdir / "honest" / "src"
        write_sample_dataset(self.source, spec())
        self.pack = workdir / "honest" / "mix" / "a"
        pack_dataset(str(self.source), str(self.pack), windows=WINDOW)
        from click.testing import CliRunner

        from lerobot_shards.cli import main as cli

        result = CliRunner().invoke(cli, ["mixture", "create", str(self.pack.parent)])
        assert result.exit_code == 0, result.output
        self.mixture = self.pack.parent / "mixture.json"
        self.samples = read_pack(self.pack)
        self.mixture_samples = read_mixture(self.mixture)
        order = PackedDataset(str(self.pack), shuffle=True, seed=3, return_uint8=True, prefetch_episodes=0)
        self.epoch = list(order)
        self.state = order.state_dict(samples_consumed=3, batch_size=1, num_workers=0)
        self.files = {
            "info": self.source / "meta" / "info.json",
            "stats": self.source / "meta" / "stats.json",
            "manifest": self.pack / "manifest.json",
            "pack_info": self.pack / "meta" / "info.json",
            "plan": self.pack / "pack-plan.json",
            "receipt": self.pack / "shards" / "shard-000000.json",
            "mixture": self.mixture,
        }
        self.tables = {
            "episodes_meta": next((self.source / "meta" / "episodes").rglob("*.parquet")),
            "tasks": self.source / "meta" / "tasks.parquet",
            "data": next((self.source / "data").rglob("*.parquet")),
        }

    def doc(self, target: str):
        if target == "state":
            return self.state
        return json.loads(self.files[target].read_text())

    def paths(self) -> dict[str, list]:
        out = {t: [list(p) for p in json_paths(self.doc(t))] for t in JSON_TARGETS}
        for target, path in self.tables.items():
            out[target] = [[name] for name in pq.read_schema(path).names]
        return out


def mutate_table(table: pa.Table, column: str, kind: str) -> pa.Table:
    """One table mutation of one column (``tests/field_fuzz.TABLE_KINDS``)."""
    import pyarrow.compute as pc

    at = table.schema.get_field_index(column)
    array = table[column]
    kind_type = array.type
    if kind == "null_column":
        return table.set_column(at, column, pa.nulls(len(table), kind_type))
    if kind == "as_string":
        return table.set_column(at, column, pa.array([json.dumps(v) for v in array.to_pylist()], pa.string()))
    if kind == "as_float":
        values = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.5 for v in array.to_pylist()]
        return table.set_column(at, column, pa.array(values, pa.float64()))
    if kind in ("negate", "huge", "zero"):
        if pa.types.is_integer(kind_type) or pa.types.is_floating(kind_type):
            if kind == "negate":
                new = pc.negate(pc.add(array, pa.scalar(1, kind_type)))
            elif kind == "huge":
                big = 2**62 if pa.types.is_integer(kind_type) else 1e39
                new = pa.array([big] * len(table), kind_type if pa.types.is_integer(kind_type) else pa.float64())
            else:
                new = pa.array([0] * len(table), kind_type)
            return table.set_column(at, column, new)
        return table.set_column(at, column, pa.array([json.dumps(v) for v in array.to_pylist()][::-1], pa.string()))
    if kind == "drop_column":
        return table.remove_column(at)
    if kind == "duplicate_rows":
        return pa.concat_tables([table, table])
    if kind == "empty":
        return table.slice(0, 0)
    raise ValueError(kind)


def run(honest: Honest, mutation: Mutation, scratch: Path) -> dict:
    target = mutation.target
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    if target in ("info", "stats", "episodes_meta", "tasks", "data"):
        src = scratch / "src"
        shutil.copytree(honest.source, src)
        if target in JSON_TARGETS:
            (src / honest.files[target].relative_to(honest.source)).write_text(mutate_json(honest.doc(target), mutation))
        else:
            path = src / honest.tables[target].relative_to(honest.source)
            pq.write_table(mutate_table(pq.read_table(path), mutation.path[0], mutation.kind), path)
        pack_dataset(str(src), str(scratch / "pack"), windows=WINDOW)
        samples = read_pack(scratch / "pack")
        if same(samples, honest.samples):
            return {"equal": True}
        # A value that decides what samples hold (a depth quantizer, a unit) changes them as it
        # changes LeRobot's: then ours must be what LeRobot reads of the mutated source.
        return {"equal": like_lerobot(src, samples), "lerobot": True}
    if target in ("manifest", "pack_info", "plan", "receipt"):
        pack = scratch / "pack"
        shutil.copytree(honest.pack, pack)
        path = pack / honest.files[target].relative_to(honest.pack)
        path.write_text(mutate_json(honest.doc(target), mutation))
        if target == "pack_info":
            seal_files(pack)  # re-sealed: the digests cannot tell; the parse must
        if target == "manifest":
            _reseal_manifest(path)
        if target in ("plan", "receipt"):
            (pack / "manifest.json").unlink()  # an unfinished pack: what verify and finalize read
            report = verify(str(pack))
            assert not report.ok  # no manifest: verify reports, never crashes
            finalize(str(pack), trust_destination=True)  # a copy at another path: not in this journal
        return {"equal": same(read_pack(pack), honest.samples)}
    if target == "mixture":
        mix = scratch / "mix"
        shutil.copytree(honest.pack.parent, mix)
        (mix / "mixture.json").write_text(mutate_json(honest.doc("mixture"), mutation))
        return {"equal": same(read_mixture(mix / "mixture.json"), honest.mixture_samples)}
    if target == "state":
        state = json.loads(mutate_json(honest.state, mutation))
        dataset = PackedDataset(str(honest.pack), shuffle=True, seed=3, return_uint8=True, prefetch_episodes=0)
        dataset.load_state_dict(state)
        resumed = list(dataset)
        # A state that says another position resumes there: what it yields must be the rest of
        # the honest epoch from some position (no sample twice, none from elsewhere).
        skip = len(honest.epoch) - len(resumed)
        return {"equal": 0 <= skip and same(resumed, honest.epoch[skip:])}
    raise ValueError(target)


def like_lerobot(source: Path, samples: list[dict]) -> bool:
    """Whether every sample equals the oracle's reading of ``source`` (tests/lerobot_reference.py,
    LeRobot 0.6.1's semantics), pictures compared as LeRobot's floats."""
    from tests.lerobot_reference import load_source, reference_item
    from tests.packer.test_layouts import assert_like_lerobot

    load_source.cache_clear()  # the oracle keeps sources by path: every mutation reuses the scratch path

    try:
        for sample in samples:
            expected = reference_item(source, int(sample["index"]), return_uint8=True)
            assert_like_lerobot(expected, sample, images={PIC}, where=str(int(sample["index"])))
    except Exception:  # the oracle refuses it, or the values differ: not what LeRobot reads
        return False
    return True


def _reseal_manifest(path: Path) -> None:
    """Recompute ``content_sha256`` of a mutated manifest (an attacker can), when it still parses
    as an object with that field: then only the schema stands between the bytes and a reader."""
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return
    if isinstance(data, dict) and "content_sha256" in data:
        try:
            data["content_sha256"] = content_sha256(data)
        except ValueError:  # a non-finite number: canonical JSON cannot hold it
            return
        path.write_text(json.dumps(data, indent=1))


def main() -> None:
    workdir = Path(sys.argv[1])
    os.environ.setdefault("LEROBOT_SHARDS_JOURNAL", str(workdir / "journal"))
    honest = Honest(workdir)
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "paths":
            out.write(json.dumps({"paths": honest.paths()}) + "\n")
            out.flush()
            continue
        mutation = Mutation.from_json(request["mutation"])
        reset_peak()
        faulthandler.dump_traceback_later(HANG_S, exit=True)
        record: dict = {"mutation": mutation.to_json()}
        try:
            result = run(honest, mutation, workdir / "scratch")
            record["outcome"] = "equal" if result["equal"] else "different"
        except LeRobotShardsError as err:
            record.update(outcome="error", error=f"{type(err).__name__}: {str(err)[:500]}")
        except Exception as err:  # not one of ours: a failure the test names
            record.update(outcome="crash", error=f"{type(err).__name__}: {str(err)[:500]}", trace=traceback.format_exc()[-3000:])
        finally:
            faulthandler.cancel_dump_traceback_later()
        record["peak_kb"] = peak_kb()
        out.write(json.dumps(record) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
