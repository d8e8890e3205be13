"""LeRobot's own trainer (``lerobot-train``) on a pack or a mixture, without a fork of LeRobot.

    lerobot-shards train --dataset.root=PACK_OR_MIXTURE_JSON --policy.type=act [every lerobot-train flag] \\
        [--shards.storage_options='{"endpoint_url": "..."}'] [--shards.order=pool --shards.decode_device=cuda] ...
    accelerate launch --num_processes=2 -m lerobot_shards.train --dataset.root=... (same flags)

LeRobot 0.6.1 has no dataset plug-in point (``make_dataset`` builds ``LeRobotDataset`` or
``StreamingLeRobotDataset``; ``DatasetConfig`` has no type field), so this module runs
``lerobot.scripts.lerobot_train.main`` after replacing one name, in every process:

- ``lerobot_train.make_train_eval_datasets``: builds ``PackedLeRobotDataset`` (a pack root, or a
  mixture: a path ending in ``.json``) as LeRobot's factory builds its dataset: windows from
  ``resolve_delta_timestamps(policy config, meta)``, ``--dataset.episodes``, image transforms,
  ``tolerance_s``, ImageNet stats for cameras, ``return_uint8`` (the trainer converts frames to
  float32 / 255, as it does for LeRobot's own dataset). It has ``LeRobotDataset``'s interface
  (``ds[i]``, ``__getitems__``, ``meta.episodes``, ``episodes``, ``absolute_to_relative_idx``), so
  everything after is LeRobot's own: its ``EpisodeAwareSampler`` (``drop_n_last_frames``, shuffle
  per ``--seed`` and epoch), its DataLoader, accelerate's split over ranks, its checkpoints and its
  ``--resume``.

``--shards.order=pool`` reads in our episode-pool order instead (faster from a bucket or over a
large mixture: whole episodes are fetched ahead), at the cost of two more replaced names:

- ``make_train_eval_datasets`` then builds ``PackedDataset``/``MixtureDataset`` (seed ``--seed``)
  and sets ``cfg.dataset.streaming = True`` so the trainer builds no episode sampler;
- ``accelerate.Accelerator.prepare_data_loader``: for that dataset it returns a ``TrainLoader``
  (a ``BatchLoader`` with the trainer's batch size, workers, pinning and start method) instead
  of accelerate's dispatcher: each rank reads its own exact share (accelerate would read
  every batch on rank 0 and scatter it), and each pass of the trainer's ``cycle()`` is the
  next epoch (``set_epoch``);
- ``lerobot_train.save_checkpoint``: also writes the loader's resume state (the same on every
  rank) to ``training_state/lerobot_shards_loader.json``; ``--resume=true`` loads it, so the
  sample sequence continues exactly where the checkpoint's step left it (on another number
  of processes the rest of the epoch is re-split exactly once, see ``PackedDataset``).

A small upstream change would make this unnecessary: docs/LEROBOT_TRAIN.md describes it.
Tested with the LeRobot versions in ``TESTED_LEROBOT``; others are refused unless
``--shards.allow_untested_lerobot=true``.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from lerobot_shards.core.errors import ArgumentError, FormatError, LeRobotTrainError
from lerobot_shards.core.format.features import LANGUAGE_COLUMNS
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.limits import MAX_JSON_DEPTH, MAX_RECORD_BYTES
from lerobot_shards.core.option_fields import OptionField, check_values, describe_options, option, option_fields
from lerobot_shards.reader.loader import BatchLoader
from lerobot_shards.reader.map_dataset import PackedLeRobotDataset
from lerobot_shards.reader.read_options import ReadOptions, decoder_names
from lerobot_shards.reader.runtime.environment import detect_world

TESTED_LEROBOT = ("0.6.1",)
# The accelerate LeRobot 0.6.1 was tested with (unpinned, pip picks a newer one untested).
TESTED_ACCELERATE = "1.16.0"
MIXED_RATES = ("refuse", "frames")
ORDERS = ("sampler", "pool")
STATE_FILE = "lerobot_shards_loader.json"
_PREFIX = "--shards."


# Reading options the trainer's own flags set: not --shards.* flags.
TRAINER_SETS = {
    "seed": "--seed",
    "return_uint8": "(the trainer divides frames by 255)",
    "tolerance_s": "--tolerance_s",
    "decoder": "--dataset.video_backend",
}


@describe_options
@dataclass(frozen=True)
class ShardsOptions:
    """The integration's own flags, ``--shards.<name>=<value>`` (every other flag is LeRobot's):
    every ``ReadOptions`` field that has a command-line form (but those in ``TRAINER_SETS``),
    and the two below. ``reading`` holds the ``ReadOptions`` fields given (``{name: value}``,
    parsed and checked).
    """

    reading: dict = field(default_factory=dict)
    log_samples: str | None = option(
        None,
        help=(
            "Write each batch's index/episode_index (and dataset_index for a mixture), one JSON line per batch, to "
            "this path with .rank<R> appended (to check what was trained on): as the trainer receives it (order "
            "pool), or as a DataLoader worker builds it (order sampler: .worker<W> appended in a worker)."
        ),
    )
    allow_untested_lerobot: bool = option(False, help="Run on a LeRobot version not in TESTED_LEROBOT.")
    order: str = option(
        "sampler",
        choices=ORDERS,
        help=(
            "'sampler' (default): LeRobot's own data order, its EpisodeAwareSampler (drop_n_last_frames), accelerate's "
            "split and its checkpoints and resume, over random access to the pack (PackedLeRobotDataset); 'pool': "
            "our episode-pool stream (BatchLoader), faster on a bucket or a large mixture, resumed from a loader state "
            "saved beside each checkpoint."
        ),
    )
    mixed_rates: str = option(
        "refuse",
        choices=MIXED_RATES,
        help=(
            "A mixture of datasets recorded at different fps: 'refuse' (default) stops before training and names the "
            "rates; 'frames' takes the policy's delta indices (its steps) at each dataset's own fps, so a 50-step "
            "action chunk spans 50 frames of every dataset (1.7 s at 30 fps, 5 s at 10 fps)."
        ),
    )

    def __post_init__(self) -> None:
        unknown = sorted(set(self.reading) - set(_reading_flags()))
        if unknown:
            raise ArgumentError(f"{_PREFIX}{unknown[0]} is not a reading option the trainer takes")
        check_values(self, lambda message, name: ArgumentError(_PREFIX + message))  # its own fields: choices, types
        self.read_options()  # refuse bad values now, not when the dataset opens

    @classmethod
    def from_flags(cls, values: dict[str, Any]) -> ShardsOptions:
        """The options from flag values by name (``split_args``'s first result).

        Raises:
            ArgumentError: a name that is no flag, or a bad value.
        """
        own = {f.name for f in option_fields(cls)}
        return cls(reading={k: v for k, v in values.items() if k not in own}, **{k: v for k, v in values.items() if k in own})

    def flags(self) -> dict[str, Any]:
        """The flag values given, by name (what a checkpoint records; JSON-able)."""
        return {
            **self.reading,
            "log_samples": self.log_samples,
            "allow_untested_lerobot": self.allow_untested_lerobot,
            "mixed_rates": self.mixed_rates,
            "order": self.order,
        }

    def read_options(self, **trainer: Any) -> ReadOptions:
        """``ReadOptions`` from the flags given and what the trainer sets (``TRAINER_SETS``)."""
        return ReadOptions(**trainer, **self.reading)


def _reading_flags() -> dict[str, OptionField]:
    return {f.name: f for f in option_fields(ReadOptions) if f.flag is not None and f.name not in TRAINER_SETS}


def known_flags() -> dict[str, OptionField]:
    """Every ``--shards.<name>`` by name: the reading options', then the integration's own."""
    return {**_reading_flags(), **{f.name: f for f in option_fields(ShardsOptions)}}


def split_args(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Take ``--shards.<name>=<value>`` (or ``--shards.<name> <value>``) out of ``argv``.

    Returns:
        ``(the options given, by name; the rest for lerobot-train)``.

    Raises:
        ArgumentError: an unknown ``--shards.`` name or a value of the wrong type.
    """
    known = known_flags()
    values: dict[str, Any] = {}
    rest: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if not arg.startswith(_PREFIX):
            rest.append(arg)
            continue
        name, sep, raw = arg[len(_PREFIX) :].partition("=")
        if not sep:
            if not args:
                raise ArgumentError(f"{arg} needs a value")
            raw = args.pop(0)
        if name not in known:
            set_by = f" (the trainer's {TRAINER_SETS[name]} sets it)" if name in TRAINER_SETS else ""
            close = difflib.get_close_matches(name, list(known), n=1) if not set_by else []
            guess = f"; did you mean {_PREFIX}{close[0]}?" if close else ""
            raise ArgumentError(f"unknown option {_PREFIX}{name}{set_by}{guess}; known: {', '.join(_PREFIX + n for n in known)}")
        values[name] = known[name].parse_text(raw, spelled=_PREFIX + name)
    return values, rest


# LeRobot 0.6.1 installs on Python 3.12 and later only.
LEROBOT_PYTHON = (3, 12)


def missing_lerobot_message(python: tuple[int, int] = sys.version_info[:2], executable: str = sys.executable) -> str:
    """How to get LeRobot's trainer and lerobot-shards into one environment, for the Python that
    asked: LeRobot needs 3.12 or later, so from an older one the way is to install lerobot-shards
    into the LeRobot environment, not LeRobot into this one (which pip refuses)."""
    lerobot = f"'lerobot[dataset]=={TESTED_LEROBOT[-1]}' 'accelerate=={TESTED_ACCELERATE}'"
    if python >= LEROBOT_PYTHON:
        return (
            f"lerobot-shards train runs LeRobot's trainer, and LeRobot is not installed in this Python ({executable}): "
            f"pip install {lerobot}"
        )
    need = ".".join(map(str, LEROBOT_PYTHON))
    return (
        f"lerobot-shards train runs LeRobot's trainer, which needs Python {need} or later (this is {python[0]}.{python[1]}, "
        f"{executable}): install lerobot-shards into the environment where LeRobot runs and train from there: "
        f"python{need} -m venv lerobot-env && lerobot-env/bin/pip install {lerobot} && "
        f"lerobot-env/bin/pip install -e '{_checkout()}[pack,s3]' 'lerobot[dataset]=={TESTED_LEROBOT[-1]}' "
        "(resolved with LeRobot: it keeps LeRobot's torch and fsspec), then "
        "lerobot-env/bin/lerobot-shards train ...; README, 'Train with lerobot-train'"
    )


def _checkout() -> str:
    """This installation's source folder (what ``pip install -e`` takes), or a placeholder for
    an installation from a wheel."""
    root = Path(__file__).resolve().parents[2]
    return str(root) if (root / "pyproject.toml").is_file() else "PATH_TO_LEROBOT_SHARDS"


# What LeRobot's parser (draccus, through YAML 1.1) reads as true; "1" it refuses.
_TRUE = ("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON")


def _flag_values(rest: list[str], flag: str) -> list[str]:
    """The values ``flag`` is given in LeRobot's arguments, as ``--flag=V`` or ``--flag V``."""
    values = []
    for i, arg in enumerate(rest):
        if arg.startswith(flag + "="):
            values.append(arg.split("=", 1)[1])
        elif arg == flag and i + 1 < len(rest):
            values.append(rest[i + 1])
    return values


def existing_output_dir(rest: list[str]) -> str | None:
    """The refusal for a new run (no ``--resume=true``) into an ``--output_dir`` that exists,
    with the two ways on, or None. LeRobot raises ``FileExistsError`` there, after its imports
    (a traceback under ``python -m``/``accelerate launch``) and without the resume command."""
    given = _flag_values(rest, "--output_dir")
    resume = _flag_values(rest, "--resume")
    if not given or (resume and resume[-1] in _TRUE) or not Path(given[-1]).is_dir():
        return None
    out = given[-1]
    config = Path(out) / "checkpoints" / "last" / "pretrained_model" / "train_config.json"
    resume = f"--resume=true --config_path={config}" if config.is_file() else "--resume=true (from a checkpoint of it)"
    return f"--output_dir={out} already exists: continue that run with {resume}, or give another --output_dir"


def check_lerobot(allow_untested: bool = False) -> str:
    """The installed LeRobot's version.

    Raises:
        LeRobotTrainError: LeRobot is not installed, or is a version this integration was not
            tested with (unless ``allow_untested``).
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("lerobot")
    except PackageNotFoundError:
        raise LeRobotTrainError(missing_lerobot_message()) from None
    if found not in TESTED_LEROBOT and not allow_untested:
        raise LeRobotTrainError(
            f"lerobot {found} is installed; this integration replaces names inside lerobot-train and was "
            f"tested with lerobot {', '.join(TESTED_LEROBOT)}. Install one of those, or pass "
            f"{_PREFIX}allow_untested_lerobot=true to try (check the first steps' samples with {_PREFIX}log_samples)"
        )
    return found


# -- the dataset the trainer holds ------------------------------------------------------------
class TrainData(torch.utils.data.IterableDataset):
    """Our dataset as LeRobot's trainer uses one: ``meta`` (policy, processors and ImageNet
    stats read it), ``num_frames`` (samples per epoch) and ``num_episodes`` (logging); the
    batches come from ``loader()`` (``accelerate`` hands it the trainer's DataLoader)."""

    def __init__(self, dataset, *, options: ShardsOptions, resume_state: dict | None):
        super().__init__()
        self.dataset = dataset
        self.meta = dataset.meta
        self.num_frames = int(dataset.catalog.anchor_counts.sum())
        self.num_episodes = int(dataset.catalog.num_episodes)
        self.options = options
        self.resume_state = resume_state

    def __iter__(self) -> Iterator[dict]:
        return iter(self.dataset)

    def loader(self, data_loader: torch.utils.data.DataLoader) -> TrainLoader:
        """The batches for the trainer's ``data_loader`` (its batch size, workers, pinning and
        start method), resumed from the checkpoint's state when there is one."""
        return TrainLoader(self, data_loader)


class TrainLoader:
    """What ``accelerator.prepare`` returns for ``TrainData``: each ``iter()`` (the trainer's
    ``cycle()`` calls it at every epoch end) is the next epoch of a ``BatchLoader``."""

    def __init__(self, data: TrainData, data_loader: torch.utils.data.DataLoader):
        stage = None
        decode_device = data.dataset.options.decode_device
        if decode_device is not None:
            from lerobot_shards.reader.decode.stage import DecodeStage

            stage = DecodeStage(decode_device)
        self.data = data
        if data_loader.batch_size is None:
            raise LeRobotTrainError("the trainer's DataLoader has no batch_size: lerobot-shards batches what lerobot-train asks")
        self.loader = BatchLoader(
            data.dataset,
            batch_size=int(data_loader.batch_size),
            num_workers=int(data_loader.num_workers),
            pin_memory=bool(data_loader.pin_memory),
            multiprocessing_context=data_loader.multiprocessing_context,
            drop_last=bool(data_loader.drop_last),
            decode_stage=stage,
        )
        self.epoch = 0
        if data.resume_state is not None:
            self.loader.load_state_dict(data.resume_state)
            self.epoch = int(data.resume_state["epoch"])
        self._log = None
        if data.options.log_samples:
            rank = detect_world().rank
            path = Path(f"{data.options.log_samples}.rank{rank}")
            path.parent.mkdir(parents=True, exist_ok=True)
            self._log = path.open("a", buffering=1)
        global _ACTIVE
        _ACTIVE = self

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[dict]:
        self.loader.set_epoch(self.epoch)  # the loaded state's epoch continues from its offset
        for batch in self.loader:
            for key in LANGUAGE_COLUMNS:  # LeRobot's own collate (lerobot_collate_fn) leaves them out of batches
                batch.pop(key, None)
            if self._log is not None:
                record = {
                    "epoch": self.epoch,
                    **{k: batch[k].tolist() for k in ("dataset_index", "episode_index", "index") if k in batch},
                }
                self._log.write(json.dumps(record) + "\n")
            yield batch
        self.epoch += 1

    def state_dict(self) -> dict:
        """The loader's resume state at the batches the trainer received (same on every rank)."""
        return self.loader.state_dict()


_ACTIVE: TrainLoader | None = None


class SampledData(PackedLeRobotDataset):
    """The dataset LeRobot's own sampler and loader read (``--shards.order=sampler``): a
    ``PackedLeRobotDataset`` that, with ``log_samples``, writes each batch it builds as one JSON
    line (``index``, ``episode_index``, ``dataset_index`` for a mixture) to
    ``<log_samples>.rank<R>[.worker<W>]``: a worker builds its batches in the order the loader
    hands them out, so the lines of one worker are its batches in order."""

    def __init__(self, root: str, *, log_samples: str | None = None, **kwargs: Any):
        super().__init__(root, **kwargs)
        self.log_samples = log_samples

    def __getitems__(self, indices):
        samples = super().__getitems__(indices)
        if self.log_samples:
            worker = torch.utils.data.get_worker_info()
            path = Path(f"{self.log_samples}.rank{detect_world().rank}" + (f".worker{worker.id}" if worker else ""))
            path.parent.mkdir(parents=True, exist_ok=True)
            keys = [k for k in ("dataset_index", "episode_index", "index") if samples and k in samples[0]]
            record = {"positions": [int(i) for i in indices], **{k: [int(s[k]) for s in samples] for k in keys}}
            with path.open("a") as log:
                log.write(json.dumps(record) + "\n")
        return samples


# -- the replaced names -----------------------------------------------------------------------
def make_train_data(cfg, options: ShardsOptions) -> tuple[Any, None]:
    """``make_train_eval_datasets(cfg)`` for packed data (see the module docstring): a
    ``PackedLeRobotDataset`` (``--shards.order=sampler``, LeRobot's sampler and loader then run
    as on its own dataset) or a ``TrainData`` stream (``pool``).

    Raises:
        LeRobotTrainError: no ``--dataset.root``, ``--dataset.eval_split`` > 0, ``--dataset.episodes``
            with a mixture, ``--shards.decode_device`` with LeRobot's sampler, or (``pool``) a
            resume from a checkpoint that has no loader state.
    """
    root, read = _train_inputs(cfg, options)  # what is refused is refused before LeRobot is imported
    from lerobot.datasets.factory import resolve_delta_timestamps  # pyright: ignore[reportMissingImports]

    mixture = root.endswith(".json")
    # The windows need the features and fps: open once without them, then with them.
    probe = _open_stream(root, mixture, cfg.dataset.episodes, read)
    frames = policy_windows(resolve_delta_timestamps, cfg.trainable_config, probe, options.mixed_rates)
    delta = None if frames is not None else resolve_delta_timestamps(cfg.trainable_config, probe.meta)
    read = replace(read, tolerance_s=cfg.tolerance_s)
    if options.order == "sampler":
        windows = {"delta_frames": frames} if frames is not None else {}
        data = SampledData(
            root, episodes=cfg.dataset.episodes, delta_timestamps=delta, options=read, log_samples=options.log_samples, **windows
        )
        _use_imagenet_stats(cfg, data.meta)
        return data, None
    if frames is not None:
        dataset = _open_stream(root, mixture, None, read, delta_frames=frames)
    elif delta is None:
        dataset = probe
    else:
        dataset = _open_stream(root, mixture, cfg.dataset.episodes, read, delta_timestamps=delta)
    _use_imagenet_stats(cfg, dataset.meta)
    cfg.dataset.streaming = True  # the trainer then builds no episode sampler (an IterableDataset takes none)
    return TrainData(dataset, options=options, resume_state=checkpoint_loader_state(cfg)), None


def _train_inputs(cfg, options: ShardsOptions) -> tuple[str, ReadOptions]:
    """The root the trainer reads and how: LeRobot's flags (seed, transforms, video backend) over
    the ``--shards.*`` options; frames as uint8 (the trainer divides by 255).

    Raises:
        LeRobotTrainError: what ``make_train_data`` refuses before opening anything.
    """
    root = cfg.dataset.root
    if not root:
        raise LeRobotTrainError(
            "lerobot-shards train reads --dataset.root: a pack's root or a mixture.json (local or a bucket URL)"
        )
    root = str(root)
    if getattr(cfg.dataset, "eval_split", 0.0):
        raise LeRobotTrainError("--dataset.eval_split is not supported on packed data: pack the held-out episodes apart")
    if root.endswith(".json") and cfg.dataset.episodes is not None:
        raise LeRobotTrainError(
            "--dataset.episodes selects episodes of one pack; a mixture's are chosen by `mixture create --where`"
        )
    if options.order == "sampler" and options.reading.get("decode_device") is not None:
        raise LeRobotTrainError(
            f"{_PREFIX}decode_device decodes batches outside the workers, which LeRobot's own loader cannot: add "
            f"{_PREFIX}order=pool (our BatchLoader with a DecodeStage)"
        )
    from lerobot.transforms import ImageTransforms  # pyright: ignore[reportMissingImports]

    read = options.read_options(
        seed=int(cfg.seed or 0),
        return_uint8=True,
        image_transforms=ImageTransforms(cfg.dataset.image_transforms) if cfg.dataset.image_transforms.enable else None,
        decoder=cfg.dataset.video_backend if cfg.dataset.video_backend in decoder_names() else "auto",
    )
    return root, read


def _open_stream(root: str, mixture: bool, episodes, read: ReadOptions, **windows: Any):
    """``MixtureDataset`` for a ``.json``, else ``PackedDataset`` (with ``episodes``)."""
    from lerobot_shards.reader.dataset import PackedDataset
    from lerobot_shards.reader.mixture import MixtureDataset

    if mixture:
        return MixtureDataset(root, options=read, **windows)
    return PackedDataset(root, episodes=episodes, options=read, **windows)


def _use_imagenet_stats(cfg, meta) -> None:
    """``--dataset.use_imagenet_stats``: ImageNet's statistics for every colour camera, as
    LeRobot's factory sets them."""
    if not cfg.dataset.use_imagenet_stats:
        return
    from lerobot.utils.constants import IMAGENET_STATS  # pyright: ignore[reportMissingImports]

    for key in meta.camera_keys:
        if key not in meta.depth_keys:
            meta.stats.setdefault(key, {})
            for name, value in IMAGENET_STATS.items():
                meta.stats[key][name] = torch.tensor(value, dtype=torch.float32)


def policy_windows(resolve, policy, probe, mixed_rates: str) -> dict[str, list[int]] | None:
    """The policy's windows in frames at each dataset's own rate, for a mixture of datasets
    recorded at different fps (``--shards.mixed_rates=frames``); None for one rate (windows in
    seconds then, as LeRobot's factory makes them).

    ``resolve`` is LeRobot's ``resolve_delta_timestamps``: given a rate of 1 fps its seconds are
    the policy's delta indices, so which keys get which indices stays LeRobot's rule.

    Raises:
        LeRobotTrainError: rates that differ with ``mixed_rates`` ``refuse``, naming them and the
            flag that chooses.
    """
    rates = getattr(probe, "fps", None)
    if not isinstance(rates, dict) or len(set(rates.values())) < 2:
        return None
    steps = resolve(policy, SimpleNamespace(features=probe.meta.features, fps=1))
    if steps is None:  # a policy without windows reads one frame per key: any rate will do
        return None
    if mixed_rates != "frames":
        named = ", ".join(f"{name} {fps:g} fps" for name, fps in rates.items())
        raise LeRobotTrainError(
            f"the mixture's datasets were recorded at different rates ({named}): a policy's delta indices are steps, "
            "and LeRobot turns them into seconds at one fps. Add --shards.mixed_rates=frames to take them at each "
            "dataset's own rate (an n-step chunk spans n frames of every dataset), or mix datasets of one rate"
        )
    return {key: [round(s) for s in offsets] for key, offsets in steps.items()}


# Recorded options a resume never takes from a checkpoint: each names a host, a credential, a
# local path or a pin, and a checkpoint is a file anyone may hand over (shared output folders,
# downloads). A recorded one that differs from what this run is given refuses the resume.
NOT_FROM_CHECKPOINT = ("storage_options", "manifest_sha256", "cache_dir", "log_samples")
# Of those, what decides what is read: a resume given other values than the checkpoint's run read
# with is refused. The sample log is where this run writes: never the checkpoint's, and a resumed
# run may well log to a new file.
MUST_MATCH_CHECKPOINT = ("storage_options", "manifest_sha256", "cache_dir")


def read_state_file(path: Path) -> dict:
    """A loader state file as ``save_loader_state`` writes it, checked: a JSON object (bounded)
    with ``format`` 1, an int ``step``, an object ``loader`` and an object ``options``.

    Raises:
        LeRobotTrainError: anything else, in one line naming the file.
    """

    def bad(why: str) -> LeRobotTrainError:
        return LeRobotTrainError(
            f"{path}: not a loader state lerobot-shards train wrote ({why}); resume from a checkpoint "
            "this trainer saved, or start a new run"
        )

    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise bad(f"more than {MAX_RECORD_BYTES:,} bytes")
        record = load_json(path.read_bytes(), where=str(path), max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH)
    except FormatError as err:
        raise bad(str(err).removeprefix(f"{path}: ")) from None
    except OSError as err:
        raise bad(f"{type(err).__name__}: {err}") from None
    if not isinstance(record, dict):
        raise bad(f"a JSON {type(record).__name__}, not an object")
    if record.get("format") != 1:
        raise bad(f"format {str(record.get('format'))[:20]!r}, expected 1")
    step = record.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise bad(f"step {str(step)[:20]!r} is not a non-negative integer")
    for key in ("loader", "options"):
        if not isinstance(record.get(key), dict):
            raise bad(f"{key!r} is not an object")
    return record


def _state_path(checkpoint_dir: str | Path) -> Path:
    return Path(checkpoint_dir) / "training_state" / STATE_FILE


def checkpoint_loader_state(cfg) -> dict | None:
    """The loader state saved beside the checkpoint being resumed (None when not resuming).

    Raises:
        LeRobotTrainError: no state there, or one that is malformed (one line).
    """
    if not cfg.resume:
        return None
    path = _state_path(cfg.checkpoint_path)
    if not path.is_file():
        raise LeRobotTrainError(
            f"{path}: missing. --resume=true continues the sample sequence from the loader state that "
            "lerobot-shards train writes beside each checkpoint; this checkpoint was not written by it"
        )
    return read_state_file(path)["loader"]


def save_loader_state(checkpoint_dir, step: int) -> None:
    if _ACTIVE is None:
        return
    target = _state_path(checkpoint_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    record = {"format": 1, "step": int(step), "loader": _ACTIVE.state_dict(), "options": _ACTIVE.data.options.flags()}
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(record))
    os.replace(temporary, target)


def _flag_text(value: Any) -> str:
    """A recorded option value as its command-line text (what the flag's parser reads)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def resume_options(argv: list[str], given: dict[str, Any]) -> ShardsOptions:
    """The options of a run resumed from ``--config_path`` in ``argv``: the ``--shards.*`` flags
    ``given``, over the options the checkpoint's run recorded, each recorded value parsed by its
    flag's own parser. Those in ``NOT_FROM_CHECKPOINT`` (storage options, the pin, the cache
    folder, the sample log: hosts, credentials, paths) are never taken from the checkpoint, so a
    checkpoint handed over cannot send this run's credentials, reads or writes elsewhere; of
    them, one that decides what is read (``MUST_MATCH_CHECKPOINT``) and differs from what this
    run is given (or its default) refuses the resume, naming it.

    Raises:
        LeRobotTrainError: a malformed state file, a recorded value its flag would not take, or
            a recorded host, credential, path or pin other than this run's (names each).
    """
    config = next((a.split("=", 1)[1] for a in argv if a.startswith("--config_path=")), None)
    if config is None:
        return ShardsOptions.from_flags(given)
    path = _state_path(Path(config).parent.parent)
    if not path.is_file():
        return ShardsOptions.from_flags(given)  # make_train_data names the missing file
    recorded = read_state_file(path)["options"]
    known = known_flags()
    taken: dict[str, Any] = {}
    for name, value in recorded.items():
        if name not in known:
            continue  # an option of another version: not applied
        try:
            taken[name] = known[name].parse_text(_flag_text(value), spelled=f"{path}: {name}")
        except ArgumentError as err:
            raise LeRobotTrainError(f"{err}; the checkpoint's loader state is malformed") from None
    differ = [name for name in MUST_MATCH_CHECKPOINT if name in taken and taken[name] != given.get(name, known[name].default)]
    if differ:
        shown = {name: (sorted(taken[name]) if isinstance(taken[name], dict) else taken[name]) for name in differ}
        raise LeRobotTrainError(
            f"{path}: the checkpoint's run read with {', '.join(_PREFIX + n for n in differ)} other than this run's "
            f"(recorded: {shown}; dict options show their keys). A resume takes no host, credential, path or pin from a "
            f"checkpoint: pass the values you trust as flags ({' '.join(_PREFIX + n + '=...' for n in differ)})"
        )
    carried = {k: v for k, v in taken.items() if k not in NOT_FROM_CHECKPOINT}
    carried.setdefault("order", "pool")  # only pool runs save a loader state (before --shards.order, every run did)
    return ShardsOptions.from_flags({**carried, **given})


def install(options: ShardsOptions) -> None:
    """Replace LeRobot's dataset factory in this process (see the module docstring); with
    ``--shards.order=pool`` also accelerate's loader preparation and LeRobot's checkpoint saving."""
    import accelerate  # pyright: ignore[reportMissingImports]
    import lerobot.scripts.lerobot_train as trainer  # pyright: ignore[reportMissingImports]

    trainer.make_train_eval_datasets = lambda cfg: make_train_data(cfg, options)
    if options.order == "sampler":
        return

    original_save = trainer.save_checkpoint

    def save_checkpoint(checkpoint_dir, step, *args, **kwargs):
        original_save(checkpoint_dir, step, *args, **kwargs)
        save_loader_state(checkpoint_dir, step)

    trainer.save_checkpoint = save_checkpoint

    original_prepare = accelerate.Accelerator.prepare_data_loader
    if getattr(original_prepare, "_lerobot_shards", False):
        return

    def prepare_data_loader(self, data_loader, *args, **kwargs):
        if isinstance(getattr(data_loader, "dataset", None), TrainData):
            return data_loader.dataset.loader(data_loader)
        return original_prepare(self, data_loader, *args, **kwargs)

    setattr(prepare_data_loader, "_lerobot_shards", True)  # noqa: B010 (a marker on a function: installed once)
    accelerate.Accelerator.prepare_data_loader = prepare_data_loader


def shards_help() -> str:
    """The ``--shards.*`` flags with their defaults and help, as ``--help`` prints them."""
    import textwrap

    lines = [
        "lerobot-shards train: LeRobot's lerobot-train on a pack (--dataset.root=PACK) or a mixture "
        "(--dataset.root=MIXTURE.json); every lerobot-train flag as is, and these of our own:",
        "",
    ]
    for name, f in known_flags().items():
        value = f.spec.metavar or (
            "true|false" if f.base_type is bool else "|".join(map(str, f.choices)) if f.choices else f.base_type.__name__.upper()
        )
        lines.append(f"  {_PREFIX}{name}={value}")
        lines += textwrap.wrap(
            f"{f.spec.help} (default: {f.default!r})", width=96, initial_indent=" " * 6, subsequent_indent=" " * 6
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run ``lerobot-train`` with ``argv`` (default: this process's arguments) on packed data.
    ``--help`` prints the ``--shards.*`` flags, then lerobot-train's own help (or why there is
    none: LeRobot not installed).

    Raises:
        LeRobotTrainError / ArgumentError: see ``check_lerobot``, ``split_args``, ``make_train_data``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--help" in argv or "-h" in argv:
        print(shards_help())
        try:
            check_lerobot(allow_untested=True)
        except LeRobotTrainError as err:
            print(f"\nlerobot-train's own flags are not shown: {err}")
            return
        print("\nlerobot-train's own flags:", flush=True)
        from lerobot.scripts.lerobot_train import main as lerobot_main  # pyright: ignore[reportMissingImports]

        sys.argv = [sys.argv[0], "--help"]
        lerobot_main()
        return
    given, rest = split_args(argv)
    refusal = existing_output_dir(rest)
    if refusal is not None:
        raise LeRobotTrainError(refusal)
    check_lerobot(bool(given.get("allow_untested_lerobot")))
    resuming = any(a.startswith("--config_path") for a in rest)
    # A resume reads as the run it continues did (pool, prefetch...), unless told otherwise; hosts,
    # credentials, paths and pins only as this run is given them (resume_options).
    options = resume_options(rest, given) if resuming else ShardsOptions.from_flags(given)
    if not resuming and not any(a.startswith("--dataset.repo_id") for a in rest):
        root = next((a.split("=", 1)[1] for a in rest if a.startswith("--dataset.root=")), "packed")
        # LeRobot requires a repo id; it names the run (logs, model card), nothing is downloaded.
        rest.append(f"--dataset.repo_id=lerobot-shards/{Path(root.rstrip('/')).name or 'packed'}")
    install(options)
    from lerobot.scripts.lerobot_train import main as lerobot_main  # pyright: ignore[reportMissingImports]

    sys.argv = [sys.argv[0], *rest]
    lerobot_main()
