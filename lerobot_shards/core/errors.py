"""The one error hierarchy of lerobot-shards (reader and packer).

Every error the library raises on purpose derives from ``LeRobotShardsError``, so a caller
can catch everything of ours in one clause, and each also derives from the builtin that
fits it (``ValueError`` for bad data or arguments, ``OSError`` for storage), so code written
against builtins keeps working. Messages name the file (and shard, episode, camera) involved
and say what was expected and what was found.

Imports nothing heavy: the packer, which never loads torch, uses it too.
"""

from __future__ import annotations


class LeRobotShardsError(Exception):
    """Base class of every error lerobot-shards raises on purpose.

    ``exit_code``: the exit status the command line gives it (1: the input or the run failed;
    a ``ConfigurationError`` says 2, as a usage error). The boundary reads it; library code
    never exits.
    """

    exit_code: int = 1


class ConfigurationError(LeRobotShardsError, ValueError):
    """The command's own configuration is wrong (a sources file, an array index, a destination
    that takes no writes): nothing ran. Exits 2, as a usage error, so a SLURM array tells it
    from a dataset's failure (recorded, exit 0)."""

    exit_code = 2


# -- the packed format ----------------------------------------------------------------------
class FormatError(LeRobotShardsError, ValueError):
    """A packed dataset (or mixture file) does not follow the format: a bad manifest, index,
    receipt, plan or shard. The message names the file."""


class BoundExceededError(FormatError):
    """Data claims more than a bound of the format allows (what it would expand to: samples,
    bytes per sample, ...). Unlike other format errors, never a reason to hand the file to
    another reader (FFmpeg's demuxer would expand the same claims): the message names the
    file, the field, the value found and the value allowed."""


class NotAPackError(FormatError):
    """The path holds no packed dataset, and why (``reason``): ``"missing"`` (no such directory
    or Hub repo), ``"bucket"`` (no such bucket), ``"file"`` (a file, not the directory that
    holds ``manifest.json``), ``"mixture"`` (a mixture's folder or file) or ``"unfinished"``
    (a pack whose ``finalize`` has not run). What fixes it differs with each (``verify`` says)."""

    def __init__(self, message: str, *, reason: str = "unfinished"):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # pickles across DataLoader workers with its reason
        return (_not_a_pack, (str(self), self.reason))


def _not_a_pack(message: str, reason: str) -> NotAPackError:
    return NotAPackError(message, reason=reason)


class UnsupportedFormatVersionError(FormatError):
    """The dataset was written by a format version this reader does not read."""


class IntegrityError(FormatError):
    """Bytes do not match the size or digest the format records for them: the file was
    damaged or replaced after packing. The message names the file and the range."""


class PinMismatchError(IntegrityError):
    """``manifest.json`` is not the one the caller pinned (``manifest_sha256=``)."""


class EpisodeDataError(FormatError):
    """An episode's rows or member bytes disagree with the index (truncated shard, rows of
    another episode, a member that decodes to other sizes than the manifest says)."""


class MixtureSpecError(FormatError):
    """``mixture.json`` does not follow the schema; the message names the entry and field."""


# -- storage ----------------------------------------------------------------------------------
class StorageError(LeRobotShardsError, OSError):
    """A storage operation failed permanently or after retries; the message names the object.

    Attributes ``url``, ``operation`` and ``attempts`` repeat what the message says (empty or 0
    when unknown, e.g. after the exception crossed a process boundary). After retries ran out,
    ``last_error`` holds the last underlying exception (not chained: its frames are noise).
    """

    last_error: BaseException | None = None

    def __init__(self, message: str, *, url: str = "", operation: str = "", attempts: int = 0):
        super().__init__(message)
        self.url = url
        self.operation = operation
        self.attempts = attempts

    def __reduce__(self):
        # OSError's default pickling drops keyword-only attributes: DataLoader workers send
        # exceptions to the parent, which must re-raise the same class with the same message.
        return (_rebuild_storage_error, (type(self), str(self), self.url, self.operation, self.attempts))


def _rebuild_storage_error(cls, message, url, operation, attempts):
    return cls(message, url=url, operation=operation, attempts=attempts)


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object does not exist (404, NoSuchKey, no such file): never retried.
    ``missing_bucket``: the bucket itself does not exist."""

    missing_bucket: bool = False


class AccessDeniedError(StorageError, PermissionError):
    """The credentials may not do this (403, AccessDenied, EACCES): never retried."""


class ShortReadError(StorageError):
    """Fewer bytes exist than a ranged read asked for (object truncated or replaced): never retried."""


# -- planning, windows, resume ---------------------------------------------------------------
class ResourceLimitError(LeRobotShardsError, OSError):
    """A limit of this process was hit (open files, threads, memory): the message names the
    limit and its value. Never retried: it is not the network, and retrying only hides it.

    Attributes:
        limit: ``"memory"``, ``"files"``, ``"threads"``, set where the message carries a
            reader's fix (``num_workers``, ``prefetch_*``): the command line words its own line
            from it instead, a reader's fix being wrong advice for a command. None: the message
            is whole.
        where: what was being done (``s3://b/p/x.tar: read``), or ``""``.
    """

    def __init__(self, message: str, *, limit: str | None = None, where: str = ""):
        super().__init__(message)
        self.limit = limit
        self.where = where

    def __reduce__(self):  # crosses process pools with its attributes
        return (_rebuild_resource_limit, (str(self), self.limit, self.where))


def _rebuild_resource_limit(message: str, limit: str | None, where: str) -> ResourceLimitError:
    return ResourceLimitError(message, limit=limit, where=where)


class PlanError(LeRobotShardsError, ValueError):
    """Planning inputs are inconsistent: a bad count, seed, world shape or resume offset."""


class ResumeStateError(PlanError):
    """A resume state does not belong to this dataset and configuration, or lacks what it
    needs; the message lists each field found vs expected."""


class WindowError(LeRobotShardsError, ValueError):
    """A ``delta_timestamps`` window is malformed or does not fit the dataset's fps."""


class HarmonizeError(LeRobotShardsError, ValueError):
    """Datasets' features cannot be made to batch together (shapes, windows, key maps)."""


# -- arguments --------------------------------------------------------------------------------
class ArgumentError(LeRobotShardsError, ValueError):
    """An argument of a call is out of range or inconsistent with another; the message names it
    and the value given (the packer's ``OptionsError`` is one too)."""


class PredicateError(ArgumentError):
    """A ``where`` predicate is not valid SQL (DuckDB's parser message, with its line breaks
    and ``^`` pointer, names where); the same for every dataset it would be applied to."""


class MissingPackageError(LeRobotShardsError, ImportError):
    """An optional package this needs is not installed (a storage system's fsspec backend,
    ``gcsfs`` for ``gs://``); the message names the ``pip install`` that fixes it."""


# -- inspecting -------------------------------------------------------------------------------
class InspectError(LeRobotShardsError, ValueError):
    """The destination is not a complete packed dataset, or the SQL failed."""


class SqlSyntaxError(InspectError):
    """The user's SQL does not parse (DuckDB's message, multi-line with its ``^`` pointer)."""


# -- decoding ---------------------------------------------------------------------------------
class DecodeError(LeRobotShardsError, RuntimeError):
    """A member failed to decode; the message names shard, episode and camera."""


class DecodeStageError(DecodeError):
    """A decode stage cannot decode on the requested device, or a member failed to decode in
    it (the message says what to do or names the member): a ``DecodeError``."""


class PrefetchError(LeRobotShardsError, RuntimeError):
    """A background fetch failed with an unexpected error; the message names the episode."""


__all__ = [
    "AccessDeniedError",
    "ArgumentError",
    "ConfigurationError",
    "DecodeError",
    "DecodeStageError",
    "EpisodeDataError",
    "FormatError",
    "BoundExceededError",
    "HarmonizeError",
    "InspectError",
    "IntegrityError",
    "LeRobotShardsError",
    "LeRobotTrainError",
    "MissingPackageError",
    "MixtureSpecError",
    "ObjectNotFoundError",
    "PinMismatchError",
    "PlanError",
    "PredicateError",
    "PrefetchError",
    "ResumeStateError",
    "ShortReadError",
    "SqlSyntaxError",
    "StorageError",
    "UnsupportedFormatVersionError",
    "WindowError",
    "WindowWarning",
    "MixtureFeatureWarning",
]


class LeRobotTrainError(LeRobotShardsError):
    """``lerobot-shards train`` cannot run as asked: LeRobot missing or an untested version, an
    option it does not support, a checkpoint without the loader's state."""


class WindowWarning(UserWarning):
    """A window is longer than every episode: no sample holds it whole (all are padded)."""


class ResumeWarning(UserWarning):
    """A loaded resume state is about to go unused (``set_epoch`` of another epoch)."""


class MixtureFeatureWarning(UserWarning):
    """A mixture leaves out features only some of its datasets have, or a dataset's unsound
    statistics of a feature from its aggregate (named in the message)."""


class DecoderFallbackWarning(UserWarning):
    """``decoder="auto"`` fell back from torchcodec (LeRobot's decoder) to PyAV: same frames,
    fewer samples/s (the message says why torchcodec did not import and the measured rate)."""


# Tracebacks and reprs name each error where users import it (``lerobot_shards.FormatError``),
# not this internal module; pickling (errors raised in DataLoader workers) resolves that name
# too, since the package exports every one (tests/contracts/test_nothing_silent.py checks both).
PUBLIC_MODULE = "lerobot_shards"
_OURS = [
    c for c in list(globals().values()) if isinstance(c, type) and issubclass(c, Warning | Exception) and c.__module__ == __name__
]
for _cls in _OURS:
    _cls.__module__ = PUBLIC_MODULE
del _OURS
