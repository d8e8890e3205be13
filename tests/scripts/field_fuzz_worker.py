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

from lerobot_shards.core.address_space import fit_reservations_to_limit

# As the command line does as it loads (lerobot_shards/cli/__init__.py), before pyarrow: this
# worker runs pack, verify and finalize as those commands do, under RLIMIT_AS.
fit_reservations_to_limit()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lerobot_shards import MixtureDataset, PackedDataset, finalize, pack_dataset, verify  # noqa: E402
from lerobot_shards.core.errors import LeRobotShardsError  # noqa: E402
from lerobot_shards.core.format import content_sha256  # noqa: E402
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset  # noqa: E402
from tests.field_fuzz import CROSS_TARGET, JSON_TARGETS, Mutation, json_paths, mutate_json  # noqa: E402
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


def meta_of(meta) -> dict:
    """What a dataset's ``meta`` says that a trainer uses besides the samples: fps, each
    feature's dtype, shape and names, the camera keys, the tasks and the stats (NaN kept)."""
    import numpy as np

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in sorted(value.items())}
        array = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else value
        return array.tolist() if not isinstance(array, str) else array

    return {
        "fps": float(meta.fps) if meta.fps is not None else None,
        "features": {k: (ft["dtype"], list(ft["shape"]), ft.get("names")) for k, ft in sorted(meta.features.items())},
        "camera_keys": sorted(meta.camera_keys),
        "tasks": {int(i): str(t) for t, i in meta.tasks["task_index"].items()},
        "stats": plain(meta.stats or {}),
    }


def reference_meta(source: Path) -> dict:
    """``meta_of`` LeRobot's ``LeRobotDatasetMetadata`` of ``source``, as LeRobot 0.6.1 builds
    it: info.json by ``json.load``, tasks by ``pd.read_parquet``, stats by ``load_stats``."""
    import pandas as pd

    from tests.lerobot_reference import reference_stats

    info = json.loads((source / "meta" / "info.json").read_text())
    features = info["features"]
    tasks = pd.read_parquet(source / "meta" / "tasks.parquet")
    meta = type("Meta", (), {})()
    meta.fps, meta.features, meta.stats = info["fps"], features, reference_stats(source)
    meta.camera_keys = [k for k, ft in features.items() if ft["dtype"] in ("video", "image")]
    meta.tasks = tasks
    return meta_of(meta)


def same_meta(a: dict, b: dict) -> bool:
    """``meta_of`` values equal, NaN equal to NaN."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def documented_drift(honest, drift: dict, samples: list[dict], meta: dict) -> bool:
    """Documented (docs/FORMAT.md, manifest "features"), where LeRobot refuses the load instead:
    when info.json and the data parquet disagree, tabular features follow the parquet, and the
    manifest names the difference (``extra.schema_drift``). Then the samples must be the honest
    ones without what only info.json declared, and ``meta.features`` the honest ones without
    those, with what only the parquet holds as the parquet holds it (its dtype)."""
    only_info, only_parquet = set(drift.get("only_in_info") or []), set(drift.get("only_in_parquet") or [])
    tabular = {k for k, (dtype, _, _) in honest.meta["features"].items() if dtype not in ("video", "image")}
    if not (only_info | only_parquet) <= tabular:
        return False
    without = [{k: v for k, v in sample.items() if k not in only_info} for sample in honest.samples]
    features = {k: v for k, v in honest.meta["features"].items() if k not in only_info}
    if set(meta["features"]) != set(features):
        return False
    kept = all(meta["features"][k] == v for k, v in features.items() if k not in only_parquet)
    typed = all(meta["features"][k][0] == features[k][0] for k in only_parquet)
    return same(samples, without) and kept and typed


def pack_meta(root: Path) -> dict:
    return meta_of(PackedDataset(str(root), prefetch_episodes=0).meta)


def peak_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS; False when the kernel does not allow it (the run's peak
    would then be an earlier run's: the parent fails the mutation rather than trust it)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        return False
    return True


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
        self.meta = pack_meta(self.pack)
        # The comparison can tell: the honest pack's meta is what LeRobot's reads of the source.
        assert same_meta(self.meta, reference_meta(self.source)), (self.meta, reference_meta(self.source))
        self.mixture_samples = read_mixture(self.mixture)
        self.mixture_meta = meta_of(MixtureDataset(str(self.mixture), prefetch_episodes=0).meta)
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
        out[CROSS_TARGET] = cross_paths(spec())
        return out


def cross_paths(honest: SampleSpec) -> list[list]:
    """Every place of every cross-file kind (``tests/field_fuzz.CROSS_KINDS``) in the honest source."""
    episodes = range(honest.episodes)
    out: list[list] = []
    out += [["swap_timestamps", e, 0] for e in episodes]
    out += [["shift_timestamp", e, 1] for e in episodes]
    out += [["declared_dtype", key, dtype] for key, dtype in DECLARED]
    out += [["stored_type", key, kind] for key, kind in STORED]
    out += [["unlisted_episode", e] for e in episodes]
    out += [["tasks_layout", layout] for layout in ("lerobot_0.4", "plain_pyarrow")]
    out += [["stats_unsound", key, stat, value] for key, stat, value in UNSOUND_STATS]
    return out


# Another declared dtype than the column holds, and another stored type than declared.
DECLARED = [
    ("next.reward", "float64"),
    ("next.reward", "int64"),
    ("next.done", "int64"),
    ("action", "float64"),
    ("action", "float"),
]
STORED = [
    ("next.reward", "int64"),
    ("next.reward", "string"),
    ("next.done", "int64"),
    ("action", "float64"),
    ("observation.state", "int64"),
]
UNSOUND_STATS = [
    ("action", "mean", "nan"),
    ("observation.state", "std", "inf"),
    ("action", "min", "above_max"),
    ("next.reward", "max", "nan"),
]


def mutate_cross(src: Path, path: tuple) -> None:
    """Apply one cross-file change (``cross_paths``) to the source at ``src``, in place."""
    import numpy as np
    import pandas as pd
    import pyarrow.compute as pc

    kind, *args = path
    data_files = sorted((src / "data").rglob("*.parquet"))
    info_path = src / "meta" / "info.json"

    def edit_data(edit) -> None:
        for file in data_files:
            table = pq.read_table(file)
            pq.write_table(edit(table), file)

    def put(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
        return table.set_column(table.schema.get_field_index(name), name, values)

    if kind in ("swap_timestamps", "shift_timestamp"):
        episode, row = args

        def edit(table: pa.Table) -> pa.Table:
            episodes, stamps = table["episode_index"].to_pylist(), table["timestamp"].to_pylist()
            at = [i for i, e in enumerate(episodes) if e == episode]
            if kind == "swap_timestamps":
                stamps[at[row]], stamps[at[row + 1]] = stamps[at[row + 1]], stamps[at[row]]
            else:
                stamps[at[row]] += 0.5 / honest_fps(info_path)
            return put(table, "timestamp", pa.array(stamps, pa.float32()))

        edit_data(edit)
    elif kind == "declared_dtype":
        key, dtype = args
        info = json.loads(info_path.read_text())
        info["features"][key]["dtype"] = dtype
        info_path.write_text(json.dumps(info, indent=4))
    elif kind == "stored_type":
        key, kind_name = args

        def edit(table: pa.Table) -> pa.Table:
            column = table[key]
            if kind_name == "string":
                return put(table, key, pa.array([repr(v) for v in column.to_pylist()], pa.string()))
            leaf = pa.int64() if kind_name == "int64" else pa.float64()
            stored = column.type
            target = pa.list_(leaf) if pa.types.is_list(stored) or pa.types.is_fixed_size_list(stored) else leaf
            return put(table, key, pc.cast(column, target, safe=False))

        edit_data(edit)
    elif kind == "unlisted_episode":
        (episode,) = args
        meta = next((src / "meta" / "episodes").rglob("*.parquet"))
        table = pq.read_table(meta)
        pq.write_table(table.filter(pc.not_equal(table["episode_index"], episode)), meta)
    elif kind == "tasks_layout":
        (layout,) = args
        tasks_path = src / "meta" / "tasks.parquet"
        tasks = pd.read_parquet(tasks_path)
        if layout == "lerobot_0.4":  # a DataFrame with an unnamed index, as LeRobot 0.4.x wrote it
            pd.DataFrame({"task_index": tasks["task_index"].to_numpy()}, index=list(tasks.index)).to_parquet(tasks_path)
        else:  # no pandas metadata at all
            pq.write_table(pa.table({"task_index": tasks["task_index"].to_numpy(), "task": list(tasks.index)}), tasks_path)
    elif kind == "stats_unsound":
        key, stat, value = args
        stats_path = src / "meta" / "stats.json"
        stats = json.loads(stats_path.read_text())
        if value == "above_max":
            stats[key][stat] = [v + 1.0 for v in np.atleast_1d(stats[key]["max"]).tolist()]
        else:
            values = np.atleast_1d(np.asarray(stats[key][stat], dtype=np.float64))
            values[0] = np.nan if value == "nan" else np.inf
            stats[key][stat] = values.tolist()
        stats_path.write_text(json.dumps(stats))  # NaN / Infinity, as Python's json writes them
    else:
        raise ValueError(kind)


def honest_fps(info_path: Path) -> float:
    return float(json.loads(info_path.read_text())["fps"])


def mutate_table(table: pa.Table, column: str, kind: str) -> pa.Table:
    """One table mutation of one column (``tests/field_fuzz.TABLE_KINDS``)."""
    import pyarrow.compute as pc

    at = table.schema.get_field_index(column)
    array = table[column]
    kind_type = array.type
    if kind == "null_column":
        return table.set_column(at, column, pa.nulls(len(table), kind_type))
    if kind == "as_string":
        return table.set_column(at, column, pa.array([json.dumps(v, default=_text) for v in array.to_pylist()], pa.string()))
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
        return table.set_column(
            at, column, pa.array([json.dumps(v, default=_text) for v in array.to_pylist()][::-1], pa.string())
        )
    if kind == "drop_column":
        return table.remove_column(at)
    if kind == "duplicate_rows":
        return pa.concat_tables([table, table])
    if kind == "empty":
        return table.slice(0, 0)
    raise ValueError(kind)


def _text(value) -> str:
    """JSON for what ``json`` has no form of (a picture's bytes)."""
    return value.hex() if isinstance(value, bytes) else str(value)


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
        samples, meta = read_pack(scratch / "pack"), pack_meta(scratch / "pack")
        if same(samples, honest.samples) and same_meta(meta, honest.meta):
            return {"equal": True}
        drift = json.loads((scratch / "pack" / "manifest.json").read_text())["extra"].get("schema_drift")
        if drift:
            return {"equal": documented_drift(honest, drift, samples, meta)}
        # A value that decides what samples or meta hold (a depth quantizer, a unit, a stat)
        # changes them as it changes LeRobot's: ours must be what LeRobot reads of the source.
        # Rows whose timestamps name other frames than their row numbers (a data mutation of
        # timestamp) get members re-encoded with each row's frame, as the pack records
        # (extra.reencoded_episodes): those cameras are compared as the cross swaps are, lossy.
        manifest = json.loads((scratch / "pack" / "manifest.json").read_text())
        lossy = set(manifest["video_keys"]) if manifest["extra"].get("reencoded_episodes") else set()
        return {"equal": like_lerobot(src, samples, lossy=lossy) and same_meta(meta, reference_meta(src)), "lerobot": True}
    if target == CROSS_TARGET:
        src = scratch / "src"
        shutil.copytree(honest.source, src)
        mutate_cross(src, mutation.path)
        pack_dataset(str(src), str(scratch / "pack"), windows=WINDOW)
        samples = read_pack(scratch / "pack")
        tasks_as_strings = mutation.path[0] == "tasks_layout"  # LeRobot's row numbers: our documented exception
        lossy = {TOP} if mutation.path[0] == "swap_timestamps" else set()  # re-encoded with each row's frame
        meta, expected = pack_meta(scratch / "pack"), reference_meta(src)
        if tasks_as_strings:  # the documented exception again: our tasks are the strings
            expected["tasks"] = dict(enumerate(read_task_strings(src)))
        return {
            "equal": like_lerobot(src, samples, lossy=lossy, task_strings=tasks_as_strings)
            and stats_like_lerobot(src, scratch / "pack")
            and same_meta(meta, expected)
        }
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
        return {"equal": same(read_pack(pack), honest.samples) and same_meta(pack_meta(pack), honest.meta)}
    if target == "mixture":
        mix = scratch / "mix"
        shutil.copytree(honest.pack.parent, mix)
        (mix / "mixture.json").write_text(mutate_json(honest.doc("mixture"), mutation))
        meta = meta_of(MixtureDataset(str(mix / "mixture.json"), prefetch_episodes=0).meta)
        return {
            "equal": same(read_mixture(mix / "mixture.json"), honest.mixture_samples) and same_meta(meta, honest.mixture_meta)
        }
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


def like_lerobot(source: Path, samples: list[dict], *, lossy: set[str] = frozenset(), task_strings: bool = False) -> bool:
    """Whether every sample equals the oracle's reading of ``source`` (tests/lerobot_reference.py,
    LeRobot 0.6.1's semantics), pictures compared as LeRobot's floats; ``lossy`` cameras (a
    member re-encoded here) within 30 dB, which another frame of the episode is not; with
    ``task_strings`` the task is the tasks file's string where LeRobot gives its row number."""
    from tests.lerobot_reference import load_source, reference_item
    from tests.packer.test_layouts import assert_like_lerobot

    load_source.cache_clear()  # the oracle keeps sources by path: every mutation reuses the scratch path

    try:
        for sample in samples:
            expected = reference_item(source, int(sample["index"]), return_uint8=True)
            if task_strings and not isinstance(expected["task"], str):
                expected["task"] = read_task_strings(source)[int(expected["task"])]
            assert_like_lerobot(expected, sample, images={PIC}, lossy=lossy, min_psnr=30.0, where=str(int(sample["index"])))
        if not samples:
            return False  # nothing read: no verdict
    except Exception:  # the oracle refuses it, or the values differ: not what LeRobot reads
        return False
    return True


def read_task_strings(source: Path) -> list[str]:
    """The task strings a tasks file holds: its ``task`` column, or (LeRobot 0.4.x) the pandas
    index column its metadata names, in row order."""
    table = pq.read_table(source / "meta" / "tasks.parquet")
    column = "task" if "task" in table.column_names else next(c for c in table.column_names if c != "task_index")
    return [str(t) for t in table[column].to_pylist()]


def stats_like_lerobot(source: Path, pack: Path) -> bool:
    """Whether the pack's ``meta.stats`` are LeRobot's ``load_stats`` of the source (NaN equal)."""
    import numpy as np

    from tests.lerobot_reference import reference_stats

    expected, actual = reference_stats(source) or {}, PackedDataset(str(pack), prefetch_episodes=0).meta.stats
    if set(expected) != set(actual):
        return False
    for key, stats in expected.items():
        if set(stats) != set(actual[key]):
            return False
        for name, value in stats.items():
            if not np.array_equal(
                np.asarray(value, dtype=np.float64), np.asarray(actual[key][name], dtype=np.float64), equal_nan=True
            ):
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
        record_reset = reset_peak()
        faulthandler.dump_traceback_later(HANG_S, exit=True)
        record: dict = {"mutation": mutation.to_json(), "peak_reset": record_reset}
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
