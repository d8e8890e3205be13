"""The packer's errors: part of the one hierarchy rooted at ``lerobot_shards.core.errors.LeRobotShardsError``.

Catch ``LeRobotShardsError`` for every error of ours (reader and packer alike), ``PackError``
for every error of packing (its source, cutting video, planning shards included). Messages name
the file, episode, shard or option value involved; option errors also carry the option's
name (``OptionsError.option``) so a command line can name its flag.
"""

from __future__ import annotations

from typing import Any

from lerobot_shards.core.errors import ArgumentError, ConfigurationError, LeRobotShardsError


class PackError(LeRobotShardsError, RuntimeError):
    """Packing failed; the message names the episode(s), file or shard involved."""


class FrameMismatchError(PackError):
    """A video holds a different number of frames than its episode has rows."""


class PackInterrupted(PackError):
    """A pack stopped on a signal (SIGTERM from ``scancel`` or a job's time limit, SIGINT);
    finished shards are kept and re-running the same command resumes."""


class OptionsError(PackError, ArgumentError):
    """An option value that cannot be packed with (a ``PackError`` and a ``ValueError``).

    Attributes:
        option: the option's name as ``pack_dataset`` spells it (``"resize"``, ``"windows"``).
    """

    def __init__(self, message: str, *, option: str):
        super().__init__(message)
        self.option = option


class SourceError(PackError, ValueError):
    """The source dataset is missing files, has an unsupported version or is inconsistent."""


class MissingRowsError(SourceError):
    """An episode's data parquet holds fewer rows than its metadata length (rows lost at the end
    or in the middle): ``on_frame_mismatch`` decides (``pad`` fills each missing row from the one
    before it, ``drop-episode`` leaves the episode out). ``episode``, ``missing``: which;
    ``rows``: how many it has (0: nothing to fill from)."""

    def __init__(self, message: str, *, episode: int = -1, missing: tuple[int, ...] = (), rows: int = -1):
        super().__init__(message)
        self.episode, self.missing, self.rows = episode, tuple(missing), rows

    def __reduce__(self):  # crosses process pools (packing workers) with its fields
        return (_missing_rows, (str(self), self.episode, self.missing, self.rows))


def _missing_rows(message: str, episode: int, missing: tuple[int, ...], rows: int = -1) -> MissingRowsError:
    return MissingRowsError(message, episode=episode, missing=missing, rows=rows)


class VideoCutError(PackError, ValueError):
    """A source video cannot be cut or decoded for an episode."""


class ShardPlanError(PackError, ValueError):
    """Invalid planning input (sizes, targets or part specification)."""


class SourcesError(ConfigurationError):
    """The sources file of a mixture is malformed; the message names the file and line. Exits
    2 from every command (a configuration error)."""


class MixtureError(LeRobotShardsError, ValueError):
    """No complete dataset to describe, or bad arguments; names what was looked at.

    Attributes:
        report: the ``lerobot_shards.packer.mixture.create.MixtureReport`` of what was found, when the scan ran.
    """

    def __init__(self, message: str, report: Any = None):
        super().__init__(message)
        self.report = report


__all__ = [
    "FrameMismatchError",
    "MissingRowsError",
    "MixtureError",
    "OptionsError",
    "PackError",
    "PackInterrupted",
    "ShardPlanError",
    "SourceError",
    "SourcesError",
    "VideoCutError",
]


# Tracebacks and reprs name each error where users import it (``lerobot_shards.FormatError``),
# not this internal module; pickling (errors raised in DataLoader workers) resolves that name
# too, since the package exports every one (tests/contracts/test_nothing_silent.py checks both).
PUBLIC_MODULE = "lerobot_shards"


def _name_where_imported() -> None:
    for value in list(globals().values()):
        if isinstance(value, type) and issubclass(value, Warning | Exception) and value.__module__ == __name__:
            value.__module__ = PUBLIC_MODULE


_name_where_imported()
