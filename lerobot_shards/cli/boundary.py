"""The command line's one error boundary: whatever a command raises leaves as one line and an
exit code, never a traceback.

Commands raise; they do not catch to print. ``BoundaryGroup`` (the ``main`` group's class) maps
what escapes any command or subcommand, in this order:

=============================  ==========================================================  ====
raised                         said                                                        exit
=============================  ==========================================================  ====
click's own (usage, --help)    click's text                                                2/0
``SqlSyntaxError``,            the message's own lines (DuckDB points at the error with    1
``PredicateError``             ``^`` on the next line), each printable
``LeRobotShardsError``         the message, printable; an option's error names its flag    1
``ConfigurationError``         the message (a sources file, an array index, a destination) 2
``KeyboardInterrupt``          what was kept and how to resume                             130
``MemoryError``, ``ENOMEM``,   how much the process may hold (``ulimit -v``) and the fix   1
a library that cannot be       (``--workers`` only where the command has it); a
mapped, a reader's             ``ResourceLimitError`` keeps where, not a reader's fix
``ResourceLimitError``
a thread that cannot start     the same limits, and ``ulimit -u``                          1
anything, near the limit       the memory line (at the limit anything fails oddly)         1
``OSError``                    the path and the system's reason (a read-only folder, a     1
                               missing file, a full disk)
``ImportError``                the missing package and its ``pip install``                 1
anything else                  a bug of ours: its type and message, and how to get the     70
                               traceback to report it (``LEROBOT_SHARDS_TRACEBACK=1``);
                               ``train`` keeps LeRobot's own errors' tracebacks
=============================  ==========================================================  ====

With ``LEROBOT_SHARDS_TRACEBACK=1`` nothing is mapped: every error keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import resource
import sys
from typing import Any

import click

from lerobot_shards.cli.text import printable, printable_lines
from lerobot_shards.core.address_space import address_space_words, near_limit, thread_not_started, unmappable_library
from lerobot_shards.core.errors import LeRobotShardsError, PredicateError, ResourceLimitError, SqlSyntaxError

TRACEBACK_ENV = "LEROBOT_SHARDS_TRACEBACK"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a job stopped by ^C
EXIT_BUG = 70  # EX_SOFTWARE (sysexits.h): an internal error, not the input

# Commands that run someone else's code (LeRobot's trainer): its errors keep their traceback,
# which is LeRobot's to explain; only ours are mapped.
PASSTHROUGH = frozenset({"train"})

# What an interrupted command kept, by command name (the rest say only that they stopped).
INTERRUPTED = {
    "pack": "shards already written are kept; re-run the same command to resume",
}


LIMIT_LINES = ("memory", "threads", "files")


def _limit_line(kind: str, workers: bool) -> str:
    """A process limit in words, with its value and the fix for a command (``--workers`` only
    where the command has it)."""
    fewer = " or lower --workers (each worker holds a shard's episodes)" if workers else ""
    if kind == "files":
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return f"too many open files (this process may open {soft}, ulimit -n; hard limit {hard}); raise it{fewer}"
    if kind == "threads":
        tasks = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        held = "no limit" if tasks == resource.RLIM_INFINITY else str(tasks)
        return (
            f"could not start a thread (this process may address {address_space_words()}; its user may run {held} "
            f"processes and threads, ulimit -u); raise the job's memory or task limit{fewer}"
        )
    return f"out of memory (this process may address {address_space_words()}); raise the job's memory limit{fewer}"


def one_line(err: BaseException) -> bool:
    """Whether ``err`` leaves as one line with exit 1 (ours, or a process limit, or anything near
    the address-space limit) rather than as a bug report (exit 70)."""
    return isinstance(err, LeRobotShardsError | MemoryError | OSError | ImportError) or thread_not_started(err) or near_limit()


def error_line(err: BaseException, *, workers: bool = True) -> str:
    """The one line (or, for the user's own SQL, DuckDB's lines) a command prints for ``err``;
    ``workers``: the command has ``--workers`` (lowering it is advice only where it exists)."""
    if isinstance(err, SqlSyntaxError | PredicateError):
        return printable_lines(str(err))
    if isinstance(err, ResourceLimitError) and err.limit in LIMIT_LINES:
        return f"{printable(err.where)}: {_limit_line(err.limit, workers)}" if err.where else _limit_line(err.limit, workers)
    if isinstance(err, LeRobotShardsError):
        from lerobot_shards.packer.options import flag_of  # here: loading it can be what failed

        option = getattr(err, "option", None)
        return printable(str(err)) + (f" ({flag_of(option)})" if option else "")
    if isinstance(err, MemoryError) or unmappable_library(err) or (isinstance(err, OSError) and err.errno == errno.ENOMEM):
        return _limit_line("memory", workers)
    if thread_not_started(err):
        return _limit_line("threads", workers)
    if not isinstance(err, OSError | ImportError) and near_limit():
        # Anything can fail oddly at the limit (CPython compiling a module under 275 MiB said
        # SyntaxError): the limit is the report, not a bug of ours.
        return _limit_line("memory", workers)
    if isinstance(err, OSError):
        where = " -> ".join(printable(str(f)) for f in (err.filename, err.filename2) if f)
        reason = err.strerror or str(err) or type(err).__name__
        return f"{where}: {printable(reason)}" if where else printable(reason)
    if isinstance(err, ImportError):
        package = err.name or "a package"
        return f"{printable(str(err))}: pip install {printable(package)}" if err.name else printable(str(err))
    return (
        f"internal error, a bug in lerobot-shards: {type(err).__name__}: {printable(str(err))[:500]}; "
        f"please report it with the traceback `{TRACEBACK_ENV}=1` prints when the same command is run again"
    )


_LEAF = "lerobot_shards.cli.leaf"  # ctx.meta key: the command that ran (meta is shared by nested contexts)


class BoundaryGroup(click.Group):
    """A click group whose commands' errors leave through ``error_line`` (the table above).
    Nested groups are ``BoundaryGroup`` too, so the command that ran is known (its flags)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta[_LEAF] = command
        return name, command, rest

    def invoke(self, ctx: click.Context) -> Any:
        if os.environ.get(TRACEBACK_ENV) == "1":
            return super().invoke(ctx)
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            _interrupted(ctx)
        except Exception as err:
            leaf = ctx.meta.get(_LEAF)
            line = error_line(err, workers=leaf is not None and any(p.name == "workers" for p in leaf.params))
            if one_line(err):
                raise _failure(line, getattr(err, "exit_code", 1)) from None
            if ctx.invoked_subcommand in PASSTHROUGH:
                raise
            click.echo(f"Error: {line}", err=True)
            raise SystemExit(EXIT_BUG) from None


class _ConfigurationFailure(click.ClickException):
    exit_code = 2


def _failure(line: str, exit_code: int) -> click.ClickException:
    """Click's one-line failure with the error's own exit code (``LeRobotShardsError.exit_code``)."""
    return _ConfigurationFailure(line) if exit_code == _ConfigurationFailure.exit_code else click.ClickException(line)


def _interrupted(ctx: click.Context) -> None:
    name = ctx.invoked_subcommand or ""
    kept = INTERRUPTED.get(name)
    click.echo("interrupted" + (f": {kept}" if kept else ""), err=True)
    sys.stderr.flush()
    raise SystemExit(EXIT_INTERRUPTED) from None


__all__ = ["BoundaryGroup", "EXIT_BUG", "EXIT_INTERRUPTED", "TRACEBACK_ENV", "error_line", "one_line"]
