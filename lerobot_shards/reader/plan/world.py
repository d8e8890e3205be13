"""Where this process sits in a training job: rank, world size and DataLoader worker.

A *consumer* is one (rank, DataLoader worker) pair: it owns one slice of the epoch plan.
Consumers are numbered rank-major, ``consumer = rank * workers_per_rank + worker``, so
the consumers of one rank are contiguous and ``num_consumers = world_size *
workers_per_rank``.

``World`` is plain arithmetic over ints. Reading the environment (torch.distributed,
``RANK``/``WORLD_SIZE``, the DataLoader's worker info) is the runtime's job
(``lerobot_shards.reader.runtime.environment.detect_world``), so planning stays testable without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from lerobot_shards.reader.plan.epoch_plan import PlanError


@dataclass(frozen=True)
class World:
    """One consumer's place in the job.

    Attributes:
        rank: this process's rank, in ``[0, world_size)``.
        world_size: number of training processes, ``>= 1``.
        worker: this DataLoader worker's id, in ``[0, workers_per_rank)``.
        num_workers: the DataLoader's ``num_workers``, ``>= 0``; 0 means the data is
            loaded in the main process, which counts as one worker.

    Raises:
        PlanError: (from the constructor) a field is out of its range.
    """

    rank: int
    world_size: int
    worker: int = 0
    num_workers: int = 0

    def __post_init__(self) -> None:
        for name in ("rank", "world_size", "worker", "num_workers"):
            value = getattr(self, name)
            # bool is an int subclass; World(rank=True) is a bug, not rank 1.
            if not isinstance(value, int) or isinstance(value, bool):
                raise PlanError(f"World.{name} must be an int, got {value!r} ({type(value).__name__})")
        if self.world_size < 1:
            raise PlanError(f"World.world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise PlanError(f"World.rank must be in [0, {self.world_size}) for world_size={self.world_size}, got {self.rank}")
        if self.num_workers < 0:
            raise PlanError(f"World.num_workers must be >= 0 (0 = main process), got {self.num_workers}")
        if not 0 <= self.worker < self.workers_per_rank:
            raise PlanError(
                f"World.worker must be in [0, {self.workers_per_rank}) for num_workers={self.num_workers}, got {self.worker}"
            )

    @property
    def workers_per_rank(self) -> int:
        """Consumers per rank: ``num_workers``, or 1 when loading in the main process."""
        return max(1, self.num_workers)

    @property
    def consumer(self) -> int:
        """This consumer's id, ``rank * workers_per_rank + worker``."""
        return self.rank * self.workers_per_rank + self.worker

    @property
    def num_consumers(self) -> int:
        """Consumers in the job, ``world_size * workers_per_rank``."""
        return self.world_size * self.workers_per_rank
