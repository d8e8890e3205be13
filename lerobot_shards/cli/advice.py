"""Commands the command line advises, built from what a pack records: the source it was packed
from (``manifest.source``) and its options (``PackOptions.from_recorded``), so that an advised
``lerobot-shards pack`` keeps the user's own options. The recorded text comes from the pack:
each word is shell-quoted and shown printable; nothing of it is run here."""

from __future__ import annotations

import shlex
from dataclasses import replace

from lerobot_shards.cli.text import printable
from lerobot_shards.core.format.nvdec_limits import nvdec_size_for, nvdec_size_refusal
from lerobot_shards.core.storage import storage_protocol
from lerobot_shards.packer.options import PackOptions, options_as_flags


def pack_command(source: dict, dst: str, flags: list[str], *, storage_options: bool = False) -> tuple[str, str]:
    """``(command, note)``: ``lerobot-shards pack SRC DST FLAGS`` with the source as the pack
    records it (``--repo-id`` for the Hub, the URL of a bucket; a local source is recorded by its
    folder's name only: ``SRC`` then stands for it, and the note says so), quoted and printable."""
    repo_id, uri = source.get("repo_id"), source.get("uri")
    words, note = ["lerobot-shards", "pack"], ""
    if isinstance(repo_id, str):
        words += ["--repo-id", repo_id] + (["--revision", source["revision"]] if isinstance(source.get("revision"), str) else [])
    elif isinstance(uri, str) and storage_protocol(uri) is not None:
        words.append(uri)
    else:
        words.append("SRC")
        note = (
            f" (SRC: the LeRobot dataset it was packed from, a local folder named {uri!r}: the pack records its name only)"
            if isinstance(uri, str)
            else " (SRC: its source)"
        )
    words += [dst, *flags]
    if storage_options:
        note += " with your --storage-options"
    return printable(" ".join(shlex.quote(str(w)) for w in words)), printable(note)


def nvdec_repack(manifest, refused: list[str], dst: str) -> str | None:
    """The one ``lerobot-shards pack`` that gives a pack every colour camera of which NVDEC
    decodes: its recorded options (``--video hevc`` where it was copied or coded otherwise than
    NVDEC reads), and ``--resize KEY=HxW`` for every camera NVDEC refused at its packed size
    (NVDEC's smallest at its aspect; the user's own sizes kept for the others), into ``DST-nvdec``.
    None when nothing is refused, the options cannot be read, or a camera cannot be fitted."""
    if not refused:
        return None
    try:
        options = PackOptions.from_recorded(manifest.options)
    except Exception:  # advice is best effort: the refusal itself stands
        return None
    codec = options.video if options.video in ("hevc", "h264") else "hevc"
    sizes = {key: size for key in manifest.video_keys if (size := options.resize_for(key)) is not None}
    for key in refused:
        camera = manifest.features[key].camera
        if camera is None:
            return None
        if nvdec_size_refusal(codec, *camera.size, where=key) is not None:
            fit = nvdec_size_for(codec, *camera.size)
            if fit is None:
                return None
            sizes[key] = fit
    flags, _ = options_as_flags(replace(options, video=codec, resize=sizes or None))
    source = manifest.source if isinstance(manifest.source, dict) else {}
    command, note = pack_command(source, dst.rstrip("/") + "-nvdec", flags)
    return f"NVDEC decodes every camera after `{command}`{note}"


__all__ = ["nvdec_repack", "pack_command"]
