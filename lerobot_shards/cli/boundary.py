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
``KeyboardInterrupt``          what was kept and how to resume                             130
``MemoryError``                how much the process may hold (``ulimit -v``) and the fix   1
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

import os
import resource
import sys
from typing import Any

import click

from lerobot_shards.cli.text import printable, printable_lines
from lerobot_shards.core.errors import LeRobotShardsError, PredicateError, SqlSyntaxError

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


def error_line(err: BaseException) -> str:
    """The one line (or, for the user's own SQL, DuckDB's lines) a command prints for ``err``."""
    from lerobot_shards.packer.options import flag_of

    if isinstance(err, SqlSyntaxError | PredicateError):
        return printable_lines(str(err))
    if isinstance(err, LeRobotShardsError):
        option = getattr(err, "option", None)
        return printable(str(err)) + (f" ({flag_of(option)})" if option else "")
    if isinstance(err, MemoryError):
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        held = "no limit" if limit == resource.RLIM_INFINITY else f"{limit / 2**30:.1f} GiB (ulimit -v / RLIMIT_AS)"
        return (
            f"out of memory (this process may address {held}); raise the job's memory limit or lower "
            "--workers (each worker holds a shard's episodes)"
        )
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


class BoundaryGroup(click.Group):
    """A click group whose commands' errors leave through ``error_line`` (the table above)."""

    def invoke(self, ctx: click.Context) -> Any:
        if os.environ.get(TRACEBACK_ENV) == "1":
            return super().invoke(ctx)
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            _interrupted(ctx)
        except LeRobotShardsError as err:
            raise click.ClickException(error_line(err)) from None
        except (MemoryError, OSError, ImportError) as err:
            raise click.ClickException(error_line(err)) from None
        except Exception as err:
            if ctx.invoked_subcommand in PASSTHROUGH:
                raise
            click.echo(f"Error: {error_line(err)}", err=True)
            raise SystemExit(EXIT_BUG) from None


def _interrupted(ctx: click.Context) -> None:
    name = ctx.invoked_subcommand or ""
    kept = INTERRUPTED.get(name)
    click.echo("interrupted" + (f": {kept}" if kept else ""), err=True)
    sys.stderr.flush()
    raise SystemExit(EXIT_INTERRUPTED) from None


__all__ = ["BoundaryGroup", "EXIT_BUG", "EXIT_INTERRUPTED", "TRACEBACK_ENV", "error_line"]
