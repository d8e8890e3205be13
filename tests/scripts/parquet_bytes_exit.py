"""Child process of tests/contracts/test_clean_exit.py: read parquet from bytes in threads, then exit.

    python tests/scripts/parquet_bytes_exit.py FILE.parquet [--python-owned]

Four threads each read ``FILE`` several times through ``lerobot_shards.core.format.parquet.arrow_io`` (whole
table, metadata) and ``decode_row_group`` (every row group from its own bytes), then the
interpreter shuts down normally. ``--python-owned`` reads through ``pa.BufferReader(bytes)``
instead, the pattern ``arrow_io`` replaced: it aborts at exit in roughly one run in five, which
is how the test's sensitivity was measured (docs/SECURITY.md).
"""

from __future__ import annotations

import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.format import sha256_hex
from lerobot_shards.core.format.parquet import decode_row_group, read_parquet_bytes, read_parquet_metadata, row_group_span


def read_all(data: bytes, python_owned: bool) -> int:
    if python_owned:
        return pq.read_table(pa.BufferReader(data)).num_rows
    metadata = read_parquet_metadata(data)
    rows = read_parquet_bytes(data).num_rows
    for group in range(metadata.num_row_groups):
        offset, nbytes = row_group_span(metadata, group)
        chunk = data[offset : offset + nbytes]
        table = decode_row_group(
            metadata,
            group,
            chunk,
            offset=offset,
            sha256=sha256_hex(chunk),
            file_size=len(data),
            single_episode=False,
            where="child",
        )
        rows -= table.num_rows
    assert rows == 0
    return metadata.num_rows


def main(path: str, python_owned: bool) -> None:
    data = open(path, "rb").read()
    errors = []

    def work() -> None:
        try:
            for _ in range(3):
                read_all(data, python_owned)
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


if __name__ == "__main__":
    main(sys.argv[1], "--python-owned" in sys.argv[2:])
