"""What every command prints and parses the same way: safe text, counts, sizes, JSON options."""

from __future__ import annotations

# Control characters (newline and tab included: a dataset string must not start a line of
# its own, which could imitate our output) and the invisible Unicode format characters that
# reorder or hide text: bidirectional overrides and isolates (U+202E shows "exe.txt" for
# "txt.exe"), zero-width characters, line and paragraph separators, the byte-order mark.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
_CONTROL |= {
    c: f"\\u{c:04x}"
    for c in [0x061C, *range(0x200B, 0x2010), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0xFEFF]
}


def printable(text: str) -> str:
    """``text`` on one line, with control characters (ESC, BEL, newline, tab, C1 controls)
    shown as ``\\xNN`` and invisible format characters (bidi overrides, zero-width spaces)
    as ``\\uNNNN``: strings from a dataset must not drive the terminal (window titles, screen
    clears, clipboard writes through OSC 52), start lines of their own or reorder what is
    shown. Print each field through it; put separators between fields afterwards."""
    return str(text).translate(_CONTROL)


def printable_lines(text: str) -> str:
    """``printable`` line by line: a message's own line breaks kept (DuckDB points at the
    error with ``^`` on the next line), every other control character escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


def plural(count: int, noun: str) -> str:
    """``1 shard``, ``2 shards``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def human_bytes(count: float) -> str:
    """``512 B``, ``12.3 KB``, ``4.56 MB``, ``7.89 GB`` (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.{1 if unit == 'KB' else 2}f} {unit}"
    return f"{int(count)} B"
