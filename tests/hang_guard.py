"""A generous upper bound on how long a call may take: it catches hangs, never slowness.

Wall-clock thresholds flake on loaded CI machines, so tests count work instead; only a hang
(an operation that would never end) is caught by time, with a limit many times what the
slowest machine needs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def hang_guard(seconds: float, what: str) -> Iterator[None]:
    """Fail the test if the block takes more than ``seconds`` (a hang, not a slow machine)."""
    started = time.monotonic()
    yield
    if time.monotonic() - started > seconds:
        pytest.fail(f"{what} took more than {seconds} s: it should end in a fraction of that (a hang?)")
