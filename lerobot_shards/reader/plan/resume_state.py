"""The resume state a trainer saves: what it resumes, and how the epoch ran so far.

One checkpoint serves every rank: the state holds nothing rank-specific. It names

- the **identity** of what is read (the dataset's manifest digest or the mixture's, the
  selection, seed, shuffle, pool size and block size): ``load_state_dict`` refuses a state
  of anything else and lists each field found vs expected, instead of continuing silently
  with another sequence;
- the **epoch** and **samples_consumed**, the trainer's per-rank counter of samples received
  this epoch, continued across resumes;
- the **phases** of the epoch so far: the shape it was planned on and every re-split since
  (at which counter value, onto which shape). ``lerobot_shards.reader.plan.resume.resume_streams`` turns them into
  what each consumer of the next loader serves.

``EpochResume`` is the wiring both ``PackedDataset`` and ``MixtureDataset`` use, so the two
cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lerobot_shards.core.errors import ResumeStateError
from lerobot_shards.reader.plan.resume import Phase, ResumedStreams, resume_streams
from lerobot_shards.reader.plan.world import World

STATE_VERSION = 1
_PHASE_FIELDS = ("start", "world_size", "num_workers", "batch_size", "drop_last")
# A checkpoint is a file: what it says is bounded before the resume arithmetic sizes arrays by it.
# Consumers (ranks x workers) beyond any cluster (1M: 8 MB per per-consumer array), a batch of
# more samples than a dataset may hold frames, a sample counter beyond exact float64 integers.
MAX_RESUME_CONSUMERS = 1 << 20
MAX_RESUME_BATCH = 1 << 30
MAX_RESUME_SAMPLES = 1 << 53


@dataclass(frozen=True)
class ResumeState:
    """A validated resume state (see the module docstring); ``to_dict`` is what is saved."""

    kind: str
    identity: dict[str, Any]
    epoch: int
    samples_consumed: int
    phases: tuple[Phase, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "lerobot_shards_state": STATE_VERSION,
            "kind": self.kind,
            "identity": dict(self.identity),
            "epoch": self.epoch,
            "samples_consumed": self.samples_consumed,
            "phases": [{name: getattr(p, name) for name in _PHASE_FIELDS} for p in self.phases],
        }

    @classmethod
    def from_dict(cls, data: Any, *, kind: str, identity: dict[str, Any]) -> ResumeState:
        """Parse a saved state and check that it belongs to this dataset and configuration.

        Raises:
            ResumeStateError: not a state of ours (for instance the old
                ``{"epoch", "samples_consumed", "batch_size"}`` form, which cannot say how
                the epoch was split), another kind of dataset, or identity fields that differ
                (each listed as found vs expected).
        """
        if not isinstance(data, dict) or "lerobot_shards_state" not in data:
            keys = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ResumeStateError(
                f"not a resume state of this version of lerobot-shards (found keys {keys}); save one with "
                "ds.state_dict(samples_consumed=..., batch_size=..., num_workers=...): a state without the epoch's "
                "phases and the dataset's identity cannot be resumed exactly, and is not guessed"
            )
        if data["lerobot_shards_state"] != STATE_VERSION:
            raise ResumeStateError(f"resume state version {data['lerobot_shards_state']!r} is not {STATE_VERSION}")
        missing = [k for k in ("kind", "identity", "epoch", "samples_consumed", "phases") if k not in data]
        if missing:
            raise ResumeStateError(f"resume state lacks {missing}")
        if data["kind"] != kind:
            raise ResumeStateError(f"resume state of a {data['kind']}, not of a {kind}")
        found = data["identity"] if isinstance(data["identity"], dict) else {}
        differ = [
            f"{name}: found {_short(found.get(name, '<missing>'))}, expected {_short(value)}"
            for name, value in identity.items()
            if found.get(name, "<missing>") != value
        ]
        differ += [f"{name}: found {_short(found[name])}, expected <nothing>" for name in found if name not in identity]
        if differ:
            raise ResumeStateError("the resume state belongs to another dataset or configuration: " + "; ".join(differ))
        epoch, consumed, raw_phases = data["epoch"], data["samples_consumed"], data["phases"]
        if (
            not _is_int(epoch)
            or not 0 <= epoch <= MAX_RESUME_SAMPLES
            or not _is_int(consumed)
            or not 0 <= consumed <= MAX_RESUME_SAMPLES
        ):
            raise ResumeStateError(
                f"resume state epoch {_short(epoch)} / samples_consumed {_short(consumed)} must be integers in [0, 2^53]"
            )
        if not isinstance(raw_phases, list) or not raw_phases:
            raise ResumeStateError("resume state has no phases (the shape its epoch was planned on)")
        phases = []
        for i, raw in enumerate(raw_phases):
            if not isinstance(raw, dict) or set(raw) != set(_PHASE_FIELDS):
                raise ResumeStateError(f"resume state phase {i} must have exactly {list(_PHASE_FIELDS)}, found {_short(raw)}")
            try:
                phase = Phase(**raw)
            except ValueError as err:
                raise ResumeStateError(f"resume state phase {i}: {err}") from None
            if not isinstance(phase.drop_last, bool):
                raise ResumeStateError(
                    f"resume state phase {i}: drop_last must be true or false, found {_short(phase.drop_last)}"
                )
            if phase.world_size * phase.workers_per_rank > MAX_RESUME_CONSUMERS or phase.batch_size > MAX_RESUME_BATCH:
                raise ResumeStateError(
                    f"resume state phase {i}: {phase.world_size} ranks x {phase.workers_per_rank} workers, batch "
                    f"{phase.batch_size}: beyond {MAX_RESUME_CONSUMERS:,} consumers or a batch of {MAX_RESUME_BATCH:,}"
                )
            phases.append(phase)
        if phases[0].start != 0 or any(b.start < a.start for a, b in zip(phases, phases[1:])) or consumed < phases[-1].start:
            raise ResumeStateError(f"resume state phases {[p.start for p in phases]} must start at 0 and ascend to {consumed}")
        return cls(kind=kind, identity=dict(identity), epoch=epoch, samples_consumed=consumed, phases=tuple(phases))


@dataclass
class EpochResume:
    """Where the current epoch stands for a dataset: planned fresh, or resumed from a state.

    Args:
        kind: ``"PackedDataset"`` or ``"MixtureDataset"`` (a state of one is refused by the other).
        identity: what the dataset reads and how it orders it (JSON-able, compared field by field).
    """

    kind: str
    identity: dict[str, Any]
    loaded: ResumeState | None = field(default=None)

    def load(self, state: dict) -> int:
        """Validate ``state`` and remember it; returns its epoch (the dataset selects it)."""
        self.loaded = ResumeState.from_dict(state, kind=self.kind, identity=self.identity)
        return self.loaded.epoch

    def _for(self, epoch: int) -> ResumeState | None:
        return self.loaded if self.loaded is not None and self.loaded.epoch == epoch else None

    def resumed_at(self, epoch: int) -> int:
        """Samples of ``epoch`` consumed before the point its iteration starts from (0 unresumed)."""
        resumed = self._for(epoch)
        return resumed.samples_consumed if resumed is not None else 0

    def state_dict(
        self, *, epoch: int, world_size: int, samples_consumed: int, batch_size: int, num_workers: int, drop_last: bool
    ) -> dict[str, Any]:
        """The state to save after ``samples_consumed`` samples of ``epoch`` on this rank.

        Raises:
            ResumeStateError: ``samples_consumed`` is behind the point this run resumed from.
        """
        current = Phase(0, world_size, num_workers, batch_size, drop_last)
        resumed = self._for(epoch)
        phases: tuple[Phase, ...] = (current,)
        if resumed is not None:
            if samples_consumed < resumed.samples_consumed:
                raise ResumeStateError(
                    f"samples_consumed={samples_consumed} is less than the {resumed.samples_consumed} this run resumed "
                    "from: pass the samples received this epoch, counted across resumes"
                )
            current = Phase(resumed.samples_consumed, world_size, num_workers, batch_size, drop_last)
            last = resumed.phases[-1]
            # The same shape continues the last phase's batch sequence exactly: no new phase.
            phases = resumed.phases if last.same_loader(current) else (*resumed.phases, current)
        return ResumeState(self.kind, self.identity, epoch, int(samples_consumed), phases).to_dict()

    def streams(self, epoch: int, world: World, plan_counts_for: Any) -> tuple[tuple[int, int], ResumedStreams | None]:
        """``((plan world size, plan workers per rank), resumed streams or None)`` for ``epoch``.

        ``plan_counts_for(world_size, workers_per_rank)`` gives the epoch plan's draws per
        stream. Without a state for this epoch (or at its start) the plan is made for
        ``world``'s shape and None is returned: each consumer serves its own stream.
        """
        resumed = self._for(epoch)
        if resumed is None:
            return (world.world_size, world.workers_per_rank), None
        first = resumed.phases[0]
        counts = plan_counts_for(first.world_size, first.workers_per_rank)
        streams = resume_streams(
            counts,
            resumed.phases,
            resumed_at=resumed.samples_consumed,
            world_size=world.world_size,
            workers_per_rank=world.workers_per_rank,
        )
        return (first.world_size, first.workers_per_rank), streams

    def worker_counts(self, epoch: int, world: World, plan_counts_for: Any) -> np.ndarray:
        """(workers,) samples each DataLoader worker of ``world.rank`` yields to the epoch's end."""
        (plan_world, plan_workers), streams = self.streams(epoch, world, plan_counts_for)
        counts = np.asarray(plan_counts_for(plan_world, plan_workers)) if streams is None else streams.consumer_counts
        k = world.workers_per_rank
        return np.asarray(counts, dtype=np.int64)[world.rank * k : (world.rank + 1) * k]

    def per_rank(self, epoch: int, world_size: int, plan_counts_for: Any) -> int:
        """Samples each rank yields from here to the epoch's end (equal on every rank)."""
        world = World(rank=0, world_size=world_size)
        (plan_world, plan_workers), streams = self.streams(epoch, world, plan_counts_for)
        if streams is None:
            return int(np.asarray(plan_counts_for(plan_world, plan_workers)).sum()) // plan_world
        return int(streams.consumer_counts.sum()) // world_size


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


__all__ = ["STATE_VERSION", "EpochResume", "ResumeState"]
