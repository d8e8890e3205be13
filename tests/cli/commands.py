"""Running the command line in a test, and reading the commands its messages advise (shared by
the "next user" tests: each piece of advice is run as printed)."""

from __future__ import annotations

import re
import shlex

from click.testing import CliRunner, Result

from lerobot_shards.cli import main as cli


def run_cli(*args: str, ok: bool = True) -> Result:
    """``lerobot-shards ARGS`` in-process; with ``ok``, asserts exit 0 (the output in the message)."""
    result = CliRunner().invoke(cli, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def advised(text: str, command: str) -> list[str]:
    """The first `lerobot-shards <command> ...` a message advises, as argv (after the program)."""
    found = re.search(rf"`lerobot-shards ({command}[^`]*)`", text)
    assert found, text
    return shlex.split(found.group(1))
