"""Where this process sits in a training job: rank, world size and DataLoader worker.

A *consumer* is one (rank, DataLoader worker) pair: it owns one slice of the epoch plan.
Consumers are numbered rank-major, ``consumer = rank * workers_per_rank + worker``, so
the consumers of one rank are contiguous and ``num_consumers = world_size *
workers_per_rank``.

``World`` itself is plain arithmetic over ints. ``World.detect`` is the only place in the
reader that reads the environment (torch.distributed, ``RANK``/``WORLD_SIZE``, the
DataLoader's worker info), so everything downstream stays testable without torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from reader.plan.epoch_plan import PlanError


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
            raise PlanError(
                f"World.rank must be in [0, {self.world_size}) for world_size={self.world_size}, got {self.rank}"
            )
        if self.num_workers < 0:
            raise PlanError(f"World.num_workers must be >= 0 (0 = main process), got {self.num_workers}")
        if not 0 <= self.worker < self.workers_per_rank:
            raise PlanError(
                f"World.worker must be in [0, {self.workers_per_rank}) for num_workers={self.num_workers}, "
                f"got {self.worker}"
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

    @classmethod
    def detect(cls, rank: int | None = None, world_size: int | None = None) -> World:
        """Build the ``World`` of the calling process.

        ``rank`` and ``world_size`` are each resolved from the first source that has them:
        the explicit argument, then torch.distributed when it is available and
        initialized, then the ``RANK`` / ``WORLD_SIZE`` environment variables (set by
        torchrun), then 0 / 1. ``worker`` and ``num_workers`` come from
        ``torch.utils.data.get_worker_info()`` (0 / 0 outside a DataLoader worker).

        Returns:
            The detected ``World``.

        Raises:
            PlanError: an environment variable is not an integer, or the resolved values
                are out of range (say ``RANK=3`` with ``world_size=2``).
        """
        dist_rank = dist_world = None
        worker, num_workers = 0, 0
        try:
            # Lazy: the planning modules must import without torch.
            import torch.distributed as dist
            import torch.utils.data
        except ImportError:
            pass
        else:
            if dist.is_available() and dist.is_initialized():
                dist_rank, dist_world = dist.get_rank(), dist.get_world_size()
            info = torch.utils.data.get_worker_info()
            if info is not None:
                worker, num_workers = int(info.id), int(info.num_workers)
        if rank is None:
            rank = dist_rank if dist_rank is not None else _env_int("RANK", 0)
        if world_size is None:
            world_size = dist_world if dist_world is not None else _env_int("WORLD_SIZE", 1)
        return cls(rank=int(rank), world_size=int(world_size), worker=worker, num_workers=num_workers)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise PlanError(f"environment variable {name}={raw!r} is not an integer") from None
