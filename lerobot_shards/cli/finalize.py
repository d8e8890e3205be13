"""``lerobot-shards finalize``: the global index and manifest, once every ``--part`` has finished."""

from __future__ import annotations

import click

from lerobot_shards.cli.flags import storage_option, with_pack_flags
from lerobot_shards.cli.progress import ProgressLog

_with_journal_options = with_pack_flags("journal", "trust_destination")


@click.command("finalize")
@click.argument("dst")
@storage_option
@_with_journal_options
def finalize_command(dst, storage_options, journal, trust_destination):
    """Write the global index and manifest once every --part has finished."""
    from lerobot_shards.packer.run.finalize import finalize

    log = ProgressLog("finalize", unit="shards")
    try:
        manifest = finalize(
            dst,
            storage_options=storage_options,
            journal=journal,
            trust_destination=trust_destination,
            progress=lambda done, total: log.update(done, total),
        )
    finally:
        log.close()
    click.echo(f"finalized {manifest.totals['episodes']} episodes in {manifest.totals['shards']} shards")


__all__ = ["finalize_command"]
