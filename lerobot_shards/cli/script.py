"""The ``lerobot-shards`` script (and ``python -m lerobot_shards``): the command group, loaded
inside the boundary."""

from __future__ import annotations

import os
import sys

import click

from lerobot_shards.cli.boundary import TRACEBACK_ENV, error_line, one_line
from lerobot_shards.core.address_space import fit_reservations_to_limit


def run() -> None:
    """The ``lerobot-shards`` script: loads the command group inside the boundary too, since
    under a small ``ulimit -v`` importing pyarrow, torch or a codec library can fail before any
    command runs (then no command is known: the advice is the memory limit alone).

    Before anything loads pyarrow or numpy, under ``ulimit -v`` the allocators are kept to what
    they use (``core.address_space.fit_reservations_to_limit``), so the limit goes to work, not
    to reservations; not for ``train``, whose process is LeRobot's trainer with its own settings."""
    if sys.argv[1:2] != ["train"]:
        fit_reservations_to_limit()
    try:
        from lerobot_shards.cli.commands import main
    except Exception as err:
        if os.environ.get(TRACEBACK_ENV) == "1" or not one_line(err):
            raise
        click.echo(f"Error: {error_line(err, workers=False)}", err=True)
        raise SystemExit(1) from None
    main()


__all__ = ["run"]
