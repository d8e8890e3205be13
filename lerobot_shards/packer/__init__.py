"""lerobot-shards packer: rewrite LeRobot v3 datasets into episode-aligned shards, check and
verify packs, build mixtures. The public face: scripts, tests and benchmarks import from here.

Layers (each a sub-package; ``docs/ARCHITECTURE.md`` has the map and the import rules, which
``tests/contracts/test_import_rules.py`` enforces):

- ``plan``: pure planning (episode selection, shard assignment, ``--part`` split);
- ``source``: reading a LeRobot v3 root, local, from a bucket or the Hub (knows nothing of shards);
- ``shard``: building one shard into a local directory (no storage, no processes);
- ``run``: the only code that writes to a destination or forks: claim, resume, pool, finalize;
- ``verify``: checking a finished pack against its manifest (a mixture task verifies what it packed);
- ``mixture``: mixtures of packs (``mixture.json``, the SLURM array task);

What both halves read of a finished pack is ``lerobot_shards.core.pack``'s; the tools over
packs that also decode (info, sql, preview) are ``lerobot_shards.tools``, above both halves.
Above it: ``lerobot_shards.cli`` (the command) and ``lerobot_shards.testing`` (synthetic
LeRobot datasets for tests, the demo and benchmarks).

Names are imported lazily: ``import lerobot_shards.packer`` costs nothing until a name is used.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    # packing, then the tools over packs and mixtures
    "lerobot_shards.packer.run.pack": ["pack_dataset", "PackReport", "PackProgress"],
    "lerobot_shards.packer.options": ["PackOptions", "PackRunOptions"],
    "lerobot_shards.packer.run.finalize": ["finalize"],
    "lerobot_shards.packer.run.check": ["check_dataset"],
    "lerobot_shards.packer.shard.check": ["SourceCheck", "Finding"],
    "lerobot_shards.packer.source.lerobot": ["LeRobotSource"],
    "lerobot_shards.packer.verify_pack": ["verify", "VerifyReport"],
    "lerobot_shards.packer.mixture.create": ["create_mixture", "scan_datasets", "MixtureReport", "failure_path", "format_report"],
    "lerobot_shards.packer.mixture.sources": ["parse_sources", "read_sources", "dataset_name"],
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
