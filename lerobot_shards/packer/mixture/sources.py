"""The sources file of a mixture: one dataset per line, each with the name it is packed under.

    # comments and blank lines are ignored
    lerobot/pusht                    Hub dataset -> DST/lerobot--pusht/
    lerobot/aloha_sim@v3.0           Hub dataset at a branch, tag or commit SHA
    lerobot/aloha_sim@main  aloha    an explicit name (second field)
    s3://bucket/raw/ds_a             an fsspec URL -> DST/ds_a/
    /data/lerobot/ds_b               a local path (relative ones start with ./)
    org/ds_c  ds_c  observation.images.cam=observation.images.top
                                     key maps: mixture create renames the camera (OLD=, no
                                     name, leaves the feature out of the mixture)

A line is ``SOURCE [NAME] [OLD=NEW ...]``: key maps are applied by ``mixture create`` and
recorded in ``mixture.json`` (``--key-map NAME:OLD=NEW`` does the same from the command line). ``ORG/NAME[@REVISION]`` (no scheme, exactly one slash, not
starting with ``/`` or ``.``) is a Hub repo id; anything else is a path or URL. Names are
derived from the source (``org/name`` -> ``org--name``, a path or URL -> its last part),
with characters outside ``[A-Za-z0-9_.-]`` replaced by ``_``; they must be unique and may not
start with ``_`` or ``.`` (``DST/_failures`` is reserved).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from lerobot_shards.core.format import FormatError, check_feature_key
from lerobot_shards.core.format.limits import MAX_RECORD_BYTES
from lerobot_shards.packer.errors import SourcesError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class MixtureSource:
    """One line of a sources file.

    Attributes:
        source: the line's source as written (``org/name@rev``, a URL or a path).
        name: the directory under DST it is packed into.
        line: 1-based line number in the file.
        repo_id, revision: set for Hub sources (revision None = default branch).
        key_map: ``{source key: mixture key, or None to leave it out}`` (the line's
            ``OLD=NEW`` fields).
    """

    source: str
    name: str
    line: int
    repo_id: str | None = None
    revision: str | None = None
    key_map: dict[str, str | None] = field(default_factory=dict)

    @property
    def is_hub(self) -> bool:
        return self.repo_id is not None

    def pack_args(self, target: str) -> list[str]:
        """Arguments of ``lerobot-shards pack`` that read this source into ``target``."""
        if self.repo_id is None:
            return [self.source, target]
        return ["--repo-id", self.repo_id, *(["--revision", self.revision] if self.revision else []), target]


def is_hub_source(source: str) -> bool:
    """True for ``ORG/NAME[@REVISION]``: no scheme, one slash, not a ``/`` or ``.`` path."""
    base = source.split("@", 1)[0]
    return "://" not in source and not source.startswith(("/", ".", "~")) and base.count("/") == 1 and "" not in base.split("/")


def dataset_name(source: str) -> str:
    """The default directory name of a source: ``org/name@rev`` -> ``org--name``, a path/URL -> its last part."""
    if is_hub_source(source):
        name = source.split("@", 1)[0].replace("/", "--")
    else:
        name = source.rstrip("/").rsplit("/", 1)[-1]
    return _UNSAFE.sub("_", name)


def parse_sources(text: str, *, where: str = "sources") -> list[MixtureSource]:
    """Parse a sources file's text.

    Raises:
        SourcesError: a line with more than two fields, a bad explicit name, a name that
            starts with ``_`` or ``.``, or two lines with the same name (both line numbers).
    """
    sources: list[MixtureSource] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        source, rest = fields[0], fields[1:]
        names = []
        while rest and "=" not in rest[0]:
            names.append(rest.pop(0))
        if len(names) > 1 or any("=" not in f for f in rest):
            raise SourcesError(
                f"{where}:{number}: expected 'SOURCE [NAME] [OLD=NEW ...]', got {len(fields)} fields: {raw.strip()!r}"
            )
        key_map = parse_key_maps(rest, where=f"{where}:{number}")
        if names:
            name = names[0]
            if _UNSAFE.search(name):
                raise SourcesError(f"{where}:{number}: name {name!r} may only use [A-Za-z0-9_.-]")
        else:
            name = dataset_name(source)
        if not name or name.startswith(("_", ".")):
            raise SourcesError(
                f"{where}:{number}: name {name!r} (from {source!r}) is empty or starts with '_' or '.', which "
                f"are reserved; give a name as the second field"
            )
        if name in seen:
            raise SourcesError(
                f"{where}:{number}: name {name!r} (from {source!r}) is already used on line {seen[name]}; "
                f"give one of them an explicit name as the second field"
            )
        seen[name] = number
        repo_id = revision = None
        if is_hub_source(source):
            repo_id, _, rev = source.partition("@")
            revision = rev or None
        sources.append(MixtureSource(source=source, name=name, line=number, repo_id=repo_id, revision=revision, key_map=key_map))
    return sources


def parse_key_maps(items: list[str], *, where: str) -> dict[str, str | None]:
    """``OLD=NEW`` items as ``{OLD: NEW}`` (``OLD=``: ``{OLD: None}``, left out of the mixture).

    A key holding ``=``, ``%``, a space or a character a shell or the sources file splits on is
    written percent-encoded (``front%20cam``, ``a%3Db``), as in a URL.

    Raises:
        SourcesError: an item that is not ``OLD=NEW`` over LeRobot keys, or a key given twice.
    """
    out: dict[str, str | None] = {}
    for item in items:
        old, _, new = item.partition("=")
        old, new = unquote(old), unquote(new)
        try:
            check_feature_key(old, what="key map source key")
            if new:
                check_feature_key(new, what="key map mixture key")
        except FormatError as err:
            raise SourcesError(f"{where}: {item!r}: {err}") from None
        if old in out:
            raise SourcesError(f"{where}: key {old!r} mapped twice")
        out[old] = new or None
    return out


def read_sources(path: str | Path) -> list[MixtureSource]:
    """Read and parse a local sources file. Raises ``SourcesError`` (also when it is missing)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would hang the read, /dev/zero never end it
            raise SourcesError(f"sources file {path}: not a regular file")
        if info.st_size > MAX_RECORD_BYTES:
            raise SourcesError(f"sources file {path}: {info.st_size:,} bytes; at most {MAX_RECORD_BYTES:,} are read")
        with open(path, "rb") as handle:
            data = handle.read(info.st_size + 1)  # what the file holds (and a byte to see it grow)
    except OSError as err:
        raise SourcesError(f"cannot read sources file {path}: {err.strerror or err}") from None
    if len(data) > info.st_size:
        raise SourcesError(f"sources file {path}: grew while it was read; read it again once it is written")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SourcesError(f"sources file {path}: not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    return parse_sources(text, where=str(path))
