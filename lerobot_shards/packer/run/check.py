"""``check_dataset``: a source checked as a pack of it would read it, nothing written
(``lerobot-shards check`` / ``pack --check``; the checks are ``lerobot_shards.packer.shard.check``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.option_fields import keyword_signature, merge_options, split_options
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.options import PackOptions, PackRunOptions
from lerobot_shards.packer.plan.pack_plan import select_episodes
from lerobot_shards.packer.run.pack import source_windows
from lerobot_shards.packer.shard.check import Finding, SourceCheck, check_source, empty_videos, nvdec_advice
from lerobot_shards.packer.source.base import format_of
from lerobot_shards.packer.source.staging import shown_name, source_arguments, stage_source, staged_names


@keyword_signature(PackOptions, PackRunOptions)
def check_dataset(
    src: str | None,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    options: PackOptions | None = None,
    run: PackRunOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    **overrides: Any,
) -> SourceCheck:
    """Every problem packing ``src`` (or ``repo_id``) with these options would meet, found by
    reading it as the pack reads it, without writing (a bucket or Hub source is staged into the
    cache as for a pack). ``progress(episodes checked, episodes)`` after each episode.

    Returns:
        The ``SourceCheck``: a source that does not open is one error finding.

    Raises:
        OptionsError: a bad option value, or a window that does not resolve at the source's
            fps; ArgumentError: a keyword that is no option.
        StorageError: a remote source failed beyond the retry policy.
    """
    shaping, running = split_options((PackOptions, PackRunOptions), overrides, caller="check_dataset")
    options = merge_options(PackOptions, options, shaping, caller="check_dataset")
    run = merge_options(PackRunOptions, run, running, caller="check_dataset")
    episodes = list(options.episodes) if options.episodes is not None else None
    try:
        root = stage_source(
            src,
            repo_id=repo_id,
            revision=revision,
            episodes=episodes,
            storage_options=run.src_storage_options,
            cache_dir=run.cache_dir,
        )
    except (SourceError, FormatError) as err:
        return SourceCheck(findings=[Finding("error", str(err))])
    shown = shown_name(src, repo_id=repo_id, revision=revision)
    with staged_names(root, shown):  # messages name the bucket or the Hub, not the staging cache
        report = _check_staged(
            root,
            options,
            run,
            progress,
            command=["lerobot-shards", "check", *source_arguments(src, repo_id=repo_id, revision=revision)],
        )
    if str(root) != shown:
        report.findings = [replace(f, message=f.message.replace(str(root), shown)) for f in report.findings]
    return report


def _check_staged(
    root: Path, options: PackOptions, run: PackRunOptions, progress: Callable[[int, int], None] | None, *, command: list[str]
) -> SourceCheck:
    """``check_dataset`` of a local (or staged) root: the source opened, every selected episode
    checked as the pack reads it (``check_source``), and what is said of the source as a whole."""
    try:
        source_format = format_of(root)
        source = source_format.open(root, follow_symlinks=run.follow_symlinks)
        selected = select_episodes(source.episode_indices, options.episodes)
    except (SourceError, FormatError) as err:
        return SourceCheck(findings=[Finding("error", str(err))])
    options = source_windows(source, options, run)  # a window pack would refuse is refused here too
    empty = empty_videos(source, selected)  # such episodes are errors of their own; the others are checked
    sound = [e for e in selected if e not in empty]
    drift = source.schema_drift(sound)
    report = check_source(source, options, sound, progress=progress)
    report.checked = list(selected)
    report.findings += [Finding("error", why, episode) for episode, why in empty.items()]
    if drift:
        report.findings.insert(
            0,
            Finding(
                "warning",
                f"the data parquet and meta/info.json disagree (only in info.json: "
                f"{drift.only_in_info}; only in the parquet: {drift.only_in_parquet}): "
                "the pack keeps what the parquet holds",
            ),
        )
    report.source_format = source_format.name
    advice = nvdec_advice(source, options, command=command)
    if advice:  # one command for every camera the per-camera findings name
        report.findings.append(Finding("warning", advice))
    lacking = source.check_tasks()
    if lacking:  # packed anyway, as pack packs them: their rows name tasks by task_index
        report.findings.append(Finding("warning", f"episodes {lacking[:10]} list tasks the task list lacks; they are packed"))
    return report


__all__ = ["check_dataset"]
