"""A bounded reader of Thrift's compact protocol: the encoding of parquet page headers.

pyarrow decodes a page after trusting its header (how many values, how many bytes once
decompressed); to bound what a page expands to we read the headers first, ourselves. Only
what parsing needs is here: a struct becomes ``{field id: value}`` (nested structs as dicts,
lists as lists, binaries as ``bytes``), and every length is checked against the bytes left,
so a hostile header can neither read past its buffer nor make us allocate beyond it. Pure.
"""

from __future__ import annotations

from lerobot_shards.core.errors import FormatError

# Compact protocol type ids.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)
_MAX_DEPTH = 16  # page headers nest three levels (header, data page header, statistics)


class CompactReader:
    """Reads compact-protocol values from ``data[pos:end]``; ``pos`` advances as it reads.

    Raises (every method):
        FormatError: truncated input, a length beyond the bytes left, an unknown type id or
            nesting deeper than a page header has.
    """

    def __init__(self, data: memoryview, pos: int, end: int):
        self.data = data
        self.pos = pos
        self.end = end

    def _byte(self) -> int:
        if self.pos >= self.end:
            raise FormatError("truncated thrift data")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self._byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise FormatError("thrift varint longer than 64 bits")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def _take(self, size: int) -> bytes:
        if size < 0 or size > self.end - self.pos:
            raise FormatError(f"thrift field of {size} bytes with {self.end - self.pos} left")
        value = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return value

    def value(self, kind: int, depth: int):
        if kind in (_TRUE, _FALSE):  # a bool inside a list or map: one byte
            return self._byte() == _TRUE
        if kind == _BYTE:
            return self._byte()
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            return self._take(8)
        if kind == _BINARY:
            return self._take(self.varint())
        if kind in (_LIST, _SET):
            return self._list(depth)
        if kind == _MAP:
            return self._map(depth)
        if kind == _STRUCT:
            return self.struct(depth + 1)
        raise FormatError(f"unknown thrift type id {kind}")

    def _list(self, depth: int) -> list:
        header = self._byte()
        size, kind = header >> 4, header & 0x0F
        if size == 15:
            size = self.varint()
        if size > self.end - self.pos:  # every element takes at least one byte
            raise FormatError(f"thrift list of {size} elements with {self.end - self.pos} bytes left")
        return [self.value(kind, depth + 1) for _ in range(size)]

    def _map(self, depth: int) -> dict:
        size = self.varint()
        if size == 0:
            return {}
        kinds = self._byte()
        if 2 * size > self.end - self.pos:
            raise FormatError(f"thrift map of {size} entries with {self.end - self.pos} bytes left")
        return {self.value(kinds >> 4, depth + 1): self.value(kinds & 0x0F, depth + 1) for _ in range(size)}

    def struct(self, depth: int = 0) -> dict[int, object]:
        """The next struct as ``{field id: value}`` (booleans as ``True``/``False``)."""
        if depth > _MAX_DEPTH:
            raise FormatError("thrift structs nested deeper than a parquet page header")
        fields: dict[int, object] = {}
        last = 0
        while True:
            header = self._byte()
            if header == 0:
                return fields
            delta, kind = header >> 4, header & 0x0F
            field_id = last + delta if delta else self.zigzag()
            last = field_id
            if kind in (_TRUE, _FALSE):
                fields[field_id] = kind == _TRUE
            else:
                fields[field_id] = self.value(kind, depth)


class _Skipper(CompactReader):
    """Walks compact-protocol values without building them (a footer of 1.5 million column
    chunks would be 1.5 million dicts): what ``footer_shape`` counts, nothing more."""

    def skip(self, kind: int, depth: int) -> None:
        if kind in (_TRUE, _FALSE, _BYTE):
            self._byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self._advance(8)
        elif kind == _BINARY:
            self._advance(self.varint())
        elif kind in (_LIST, _SET):
            size, element = self.list_header()
            for _ in range(size):
                self.skip(element, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                kinds = self._byte()
                for _ in range(size):
                    self.skip(kinds >> 4, depth + 1)
                    self.skip(kinds & 0x0F, depth + 1)
        elif kind == _STRUCT:
            for _, field_kind in self.fields(depth + 1):
                self.skip(field_kind, depth + 1)
        else:
            raise FormatError(f"unknown thrift type id {kind}")

    def _advance(self, size: int) -> None:
        if size < 0 or size > self.end - self.pos:
            raise FormatError(f"thrift field of {size} bytes with {self.end - self.pos} left")
        self.pos += size

    def list_header(self) -> tuple[int, int]:
        header = self._byte()
        size, kind = header >> 4, header & 0x0F
        if size == 15:
            size = self.varint()
        if size > self.end - self.pos:
            raise FormatError(f"thrift list of {size} elements with {self.end - self.pos} bytes left")
        return size, kind

    def fields(self, depth: int):
        """``(field id, type id)`` of each field of the struct at ``pos``; the caller reads or
        skips each value before asking for the next."""
        if depth > _MAX_DEPTH:
            raise FormatError("thrift structs nested deeper than parquet metadata")
        last = 0
        while True:
            header = self._byte()
            if header == 0:
                return
            delta, kind = header >> 4, header & 0x0F
            field_id = last + delta if delta else self.zigzag()
            last = field_id
            if kind in (_TRUE, _FALSE):
                continue  # the value is in the type id
            yield field_id, kind


def footer_shape(data: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """``(schema elements, row groups, column chunks)`` of the parquet ``FileMetaData`` in
    ``data[pos:end]``, counted without building it (pyarrow builds about 1.5 KB per chunk).

    Raises:
        FormatError: not compact-protocol metadata, or truncated.
    """
    reader = _Skipper(data, pos, end)
    schema = groups = chunks = 0
    for field_id, kind in reader.fields(0):
        if field_id == 2 and kind == _LIST:  # schema: list<SchemaElement>
            schema, element = reader.list_header()
            for _ in range(schema):
                reader.skip(element, 1)
        elif field_id == 4 and kind == _LIST:  # row_groups: list<RowGroup>
            groups, element = reader.list_header()
            for _ in range(groups):
                if element != _STRUCT:
                    raise FormatError("parquet row groups are not structs")
                for group_field, group_kind in reader.fields(1):
                    if group_field == 1 and group_kind == _LIST:  # columns: list<ColumnChunk>
                        size, chunk = reader.list_header()
                        chunks += size
                        for _ in range(size):
                            reader.skip(chunk, 2)
                    else:
                        reader.skip(group_kind, 2)
        else:
            reader.skip(kind, 1)
    return schema, groups, chunks


__all__ = ["CompactReader", "footer_shape"]
