"""lerobot-shards packer: rewrite LeRobot v3 datasets into episode-aligned shards, check and
inspect packs, build mixtures. The public face: scripts, tests and benchmarks import from here.

Layers (each a sub-package; ``docs/DESIGN_NOTES.md`` has the map and the import rules, which
``tests/test_import_rules.py`` enforces):

- ``plan``: pure planning (episode selection, shard assignment, ``--part`` split);
- ``source``: reading a LeRobot v3 root, local, from a bucket or the Hub (knows nothing of shards);
- ``shard``: building one shard into a local directory (no storage, no processes);
- ``run``: the only code that writes to a destination or forks: claim, resume, pool, finalize;
- ``tools``: verify, info/sql, preview over finished packs;
- ``mixture``: mixtures of packs (``mixture.json``, the SLURM array task);
- ``synthetic``: a faithful LeRobot v3 writer for tests, the demo and benchmarks;
- ``cli``: the ``lerobot-shards`` command, a thin layer over the above.

Names are imported lazily: ``import packer`` costs nothing until a name is used.
"""

from reader.exports import lazy_exports

_EXPORTS = {
    # packing, then the tools over packs, mixtures, synthetic data for tests and benchmarks
    "packer.run.pack": ["pack_dataset", "PackReport", "PackProgress"],
    "packer.options": ["PackOptions", "PackRunOptions"],
    "packer.run.finalize": ["finalize"],
    "packer.run.check": ["check_dataset"],
    "packer.shard.check": ["SourceCheck", "Finding"],
    "packer.source.lerobot": ["LeRobotSource"],
    "packer.tools.verify": ["verify", "VerifyReport"],
    "packer.tools.summary": ["summarize"],
    "packer.tools.sql": ["run_sql", "run_statements", "SqlResult", "connect"],
    "packer.tools.preview": ["render_preview"],
    "packer.mixture.create": ["create_mixture", "scan_datasets", "MixtureReport", "failure_path", "format_report"],
    "packer.mixture.sources": ["parse_sources", "read_sources", "dataset_name"],
    "packer.synthetic.dataset": [
        "write_sample_dataset", "SampleSpec", "CameraSpec", "rollover_spec", "depth_map_mm", "quantize_depth_mm",
    ],
    "packer.synthetic.frame_identity": ["identity_frame", "read_identity"],
    "packer.synthetic.tabular_pack": ["write_tabular_pack"],
    "packer.synthetic.video": ["tiny_member", "encode_episode_video", "concatenate_by_stream_copy"],
    # errors: every one a reader.errors.LeRobotShardsError
    "packer.errors": [
        "PackError", "FrameMismatchError", "PackInterrupted", "OptionsError", "SourceError", "VideoCutError",
        "ShardPlanError", "InspectError", "SqlSyntaxError", "MixtureError", "SourcesError",
    ],
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
