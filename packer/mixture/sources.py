"""The sources file of a mixture: one dataset per line, each with the name it is packed under.

    # comments and blank lines are ignored
    lerobot/pusht                    Hub dataset -> DST/lerobot--pusht/
    lerobot/aloha_sim@v3.0           Hub dataset at a branch, tag or commit SHA
    lerobot/aloha_sim@main  aloha    an explicit name (second field)
    s3://bucket/raw/ds_a             an fsspec URL -> DST/ds_a/
    /data/lerobot/ds_b               a local path (relative ones start with ./)

A line is ``SOURCE [NAME]``. ``ORG/NAME[@REVISION]`` (no scheme, exactly one slash, not
starting with ``/`` or ``.``) is a Hub repo id; anything else is a path or URL. Names are
derived from the source (``org/name`` -> ``org--name``, a path or URL -> its last part),
with characters outside ``[A-Za-z0-9_.-]`` replaced by ``_``; they must be unique and may not
start with ``_`` or ``.`` (``DST/_failures`` is reserved).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packer.errors import SourcesError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class MixtureSource:
    """One line of a sources file.

    Attributes:
        source: the line's source as written (``org/name@rev``, a URL or a path).
        name: the directory under DST it is packed into.
        line: 1-based line number in the file.
        repo_id, revision: set for Hub sources (revision None = default branch).
    """

    source: str
    name: str
    line: int
    repo_id: str | None = None
    revision: str | None = None

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
        if len(fields) > 2:
            raise SourcesError(f"{where}:{number}: expected 'SOURCE [NAME]', got {len(fields)} fields: {raw.strip()!r}")
        source = fields[0]
        if len(fields) == 2:
            name = fields[1]
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
        sources.append(MixtureSource(source=source, name=name, line=number, repo_id=repo_id, revision=revision))
    return sources


def read_sources(path: str | Path) -> list[MixtureSource]:
    """Read and parse a local sources file. Raises ``SourcesError`` (also when it is missing)."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise SourcesError(f"cannot read sources file {path}: {err.strerror or err}") from None
    return parse_sources(text, where=str(path))
