"""The pack plan: which episodes a pack holds and how they are assigned to shards.

Pure: it turns the source's episode list, size estimates and the options into a ``PackPlan``
(``pack-plan.json``), so every ``--part`` task of a SLURM array computes the same plan from
the same source and options. Reading the source (sizes, the fingerprint) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence

from lerobot_shards.core.format import PackPlan
from lerobot_shards.packer.errors import OptionsError, SourceError
from lerobot_shards.packer.options import PackOptions
from lerobot_shards.packer.plan.shard_plan import plan_shards


def select_episodes(available: Sequence[int], wanted: Sequence[int] | None) -> list[int]:
    """The episodes to pack, ascending: ``wanted`` (all of them present), else all.

    Raises:
        OptionsError: ``wanted`` names episodes the source does not have (listed).
        SourceError: the source has no episode at all.
    """
    if wanted is not None:
        missing = sorted(set(wanted) - set(available))
        if missing:
            more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
            raise OptionsError(
                f"episodes {missing[:20]}{more} are not in the source ({len(available)} episodes, "
                f"{min(available, default=0)}-{max(available, default=0)})",
                option="episodes",
            )
        chosen = set(wanted)
        episodes = [e for e in available if e in chosen]
    else:
        episodes = list(available)
    if not episodes:
        raise SourceError("nothing to pack: the source has no episodes")
    return episodes


def make_pack_plan(episodes: Sequence[int], estimated_bytes: Sequence[int], options: PackOptions, source: dict) -> PackPlan:
    """The deterministic plan: ``episodes`` grouped into shards of about ``shard_size_mb``.

    ``source`` describes the source and must carry its ``fingerprint``: a destination holding
    a plan of another source (or version of it) then refuses to resume into it.
    """
    if "fingerprint" not in source:
        raise ValueError("the source description needs its fingerprint")
    shards = plan_shards(list(episodes), list(estimated_bytes), int(options.shard_size_mb * 1024 * 1024))
    return PackPlan(source=dict(source), options=options.to_json_dict(), shards=shards)


def plan_differences(old: PackPlan, new: PackPlan) -> str:
    """What differs between two plans, in words: 'source fingerprint', 'option video: copy -> hevc'."""
    found = []
    for key in sorted(set(old.source) | set(new.source)):
        if old.source.get(key) != new.source.get(key):
            found.append(f"source {key}: {str(old.source.get(key))[:80]} -> {str(new.source.get(key))[:80]}")
    for key in sorted(set(old.options) | set(new.options)):
        if old.options.get(key) != new.options.get(key):
            found.append(f"option {key}: {str(old.options.get(key))[:80]} -> {str(new.options.get(key))[:80]}")
    if old.shards != new.shards:
        found.append(f"shard assignment ({len(old.shards)} -> {len(new.shards)} shards)")
    return "; ".join(found) or "the plans differ"
