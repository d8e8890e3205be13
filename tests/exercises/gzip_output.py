"""Change exercise: a pack-output option, as its one file: gzip for the pack's parquet.

A contributor adds the row ``"gzip": GZIP`` to ``PARQUET_COMPRESSIONS``
(``lerobot_shards/core/format/pack_output.py``); the option field reads its choices from that
table when it checks a value and when the CLI parses ``--parquet-compression``, every parquet
writer of a pack takes its profile from the option, and the plan records the option only when
it is not at its default. ``register()`` stands in for that edit: the test calls it (or a
subprocess does, before the CLI is imported).
"""

from __future__ import annotations

from lerobot_shards.core.format import PARQUET_COMPRESSIONS, ParquetCompression

GZIP = ParquetCompression("gzip", "what every parquet reader decompresses, slow to write", level=6)


def register() -> None:
    """Add the row (the one-line edit of the table)."""
    PARQUET_COMPRESSIONS["gzip"] = GZIP
