"""How a pack's parquet is written: one profile every writer uses (the pack-output seam).

Every parquet file of a pack (each shard's rows, ``index/episodes.parquet``,
``index/samples.parquet``) is written through ``ParquetProfile`` (compression, page index,
statistics), and so is a compiled mixture's index (``MIXTURE_PARQUET``) and the synthetic packs
of ``lerobot_shards.testing``. Nothing else names a codec: the reader needs none of it (parquet
files say how they are compressed, and ``core/format/parquet`` bounds what any page expands to).

The compression of a pack's parquet is the pack option ``parquet_compression``, one row of
``PARQUET_COMPRESSIONS`` per choice: a new choice is a row (its CLI flag, help, range check and
recording follow from the option field). A pack option added after plan version 2 is recorded
only when it differs from its default (``PackOptions.to_json_dict``), so adding one leaves the
plan digests, and the resumes, of packs made before it unchanged.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.format.parquet.arrow_io import read_parquet_metadata


@dataclass(frozen=True)
class ParquetCompression:
    """One choice of ``--parquet-compression``.

    Attributes:
        codec: pyarrow's name for it (``zstd``, ``lz4``, ``gzip``, ``none``).
        level: the codec's level (None: the codec's default).
        note: what it is for, in the option's help.
    """

    codec: str
    note: str
    level: int | None = None

    def __post_init__(self) -> None:
        """A codec pyarrow knows, and a level within that codec's own range (pyarrow accepted lz4
        at level 20 without a word and failed gzip at 20 only when a file was written).

        Raises:
            ValueError: an unknown codec, a level for a codec without levels, or one out of range.
        """
        try:
            known = self.codec == "none" or pa.Codec.is_available(self.codec)
        except ValueError:  # a name pyarrow does not know at all
            known = False
        if not known:
            raise ValueError(f"parquet compression {self.codec!r} is not a codec this pyarrow writes")
        if self.level is None:
            return
        if self.codec == "none" or not pa.Codec.supports_compression_level(self.codec):
            raise ValueError(f"parquet compression {self.codec!r} takes no level (got {self.level})")
        low, high = pa.Codec.minimum_compression_level(self.codec), pa.Codec.maximum_compression_level(self.codec)
        if not low <= self.level <= high:
            raise ValueError(f"parquet compression {self.codec!r} takes levels {low} to {high}, got {self.level}")


PARQUET_COMPRESSIONS: dict[str, ParquetCompression] = {
    "zstd": ParquetCompression("zstd", "smallest (the default)"),
    "lz4": ParquetCompression("lz4", "cheaper to decompress than zstd, larger files"),
}
DEFAULT_PARQUET_COMPRESSION = "zstd"


def parquet_compression_choices() -> tuple[str, ...]:
    """The names ``--parquet-compression`` accepts (the table's rows, read when asked)."""
    return tuple(PARQUET_COMPRESSIONS)


@dataclass(frozen=True)
class ParquetProfile:
    """The writer settings of one kind of parquet file.

    Attributes:
        compression: the codec and its level.
        page_index: write the column and offset indexes (DuckDB and the reader skip pages by
            them); a compiled mixture's index is read whole and goes without.
    """

    compression: ParquetCompression = PARQUET_COMPRESSIONS[DEFAULT_PARQUET_COMPRESSION]
    page_index: bool = True

    def writer_options(self, columns: Sequence[str] = (), *, plain: Collection[str] = ()) -> dict[str, Any]:
        """Keyword arguments of ``pq.write_table`` and ``pq.ParquetWriter``; the ``plain``
        ones of ``columns`` stored as they are (no dictionary, no compression)."""
        options: dict[str, Any] = {"compression": self.compression.codec, "write_statistics": True}
        if self.compression.level is not None:
            options["compression_level"] = self.compression.level
        if plain:
            # Per-column settings name parquet's leaf columns ("tasks.list.element"), each.
            kept = [name for name in columns if name not in plain]
            options["use_dictionary"] = kept
            options["compression"] = {name: "NONE" if name in plain else self.compression.codec for name in columns}
            if self.compression.level is not None:
                options["compression_level"] = dict.fromkeys(kept, self.compression.level)
        if self.page_index:
            options["write_page_index"] = True
        return options

    def writer(self, path: str | Path, schema: pa.Schema) -> pq.ParquetWriter:
        """A writer of row groups to ``path`` (a shard's parquet, one group per call)."""
        return pq.ParquetWriter(path, schema, **self.writer_options())

    def to_bytes(self, table: pa.Table, *, plain: Collection[str] = ()) -> bytes:
        """``table`` as one parquet file's bytes (pyarrow's row-group size); ``plain`` columns
        stored as they are: repeated digests, which a reader requires to be backed by their
        own bytes (``Budget.backed``), would otherwise collapse into one dictionary entry."""
        buffer = io.BytesIO()
        columns = leaf_paths(table.schema) if plain else table.column_names
        pq.write_table(table, buffer, **self.writer_options(columns, plain=plain))
        return buffer.getvalue()


def leaf_paths(schema: pa.Schema) -> list[str]:
    """Parquet's leaf column paths of ``schema`` (``tasks.list.element`` for a list column), as
    per-column writer settings name them: read from an empty file of that schema."""
    buffer = io.BytesIO()
    pq.write_table(schema.empty_table(), buffer)
    metadata = read_parquet_metadata(buffer.getvalue())
    return [metadata.schema.column(j).path for j in range(metadata.num_columns)]


def pack_parquet(compression: str = DEFAULT_PARQUET_COMPRESSION) -> ParquetProfile:
    """The profile of a pack's parquet files for the option ``parquet_compression``.

    Raises:
        KeyError: a name that is not a row of ``PARQUET_COMPRESSIONS`` (the option's choices
            refuse it before).
    """
    return ParquetProfile(PARQUET_COMPRESSIONS[compression])


MIXTURE_PARQUET = ParquetProfile(page_index=False)

__all__ = [
    "DEFAULT_PARQUET_COMPRESSION",
    "MIXTURE_PARQUET",
    "PARQUET_COMPRESSIONS",
    "ParquetCompression",
    "ParquetProfile",
    "pack_parquet",
    "parquet_compression_choices",
]
