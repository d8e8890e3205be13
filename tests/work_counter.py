"""Count work instead of timing it: Python lines executed by a call.

Wall-clock thresholds fail on loaded CI machines; the number of Python lines a call executes
does not depend on load, and it shows what a cost test means to show: that skipping to draw
10^7 is a handful of numpy calls, not a loop per draw. Lines inside numpy's C code are not
counted (one vectorized call counts as its Python lines), which is exactly the distinction
these tests draw.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any


def lines_executed(function: Callable[..., Any], *args: Any, skip: tuple[str, ...] = (), **kwargs: Any) -> tuple[Any, int]:
    """Call ``function(*args, **kwargs)``; return its result and the Python lines it executed
    (in every frame it called, library code included), leaving out lines of files whose path
    contains one of ``skip`` (a cost counted elsewhere, e.g. per page of a parquet file)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line" and not (skip and any(part in frame.f_code.co_filename for part in skip)):
            count += 1
        return tracer

    # Garbage of earlier tests collected during the call would run its finalizers (``__del__``,
    # weakref callbacks) in this frame's thread and count their lines: a plan of 10^3 episodes
    # once counted 231 lines against 222 for 10^6 in a full run. Collected before, not during.
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = function(*args, **kwargs)
    finally:
        sys.settrace(previous)
        if collecting:
            gc.enable()
    return result, count
