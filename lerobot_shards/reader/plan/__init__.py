"""Pure planning math: which anchors each consumer draws, in which order, and where a resumed
run continues. Numbers and arrays in, numbers and arrays out; no files, no torch, no I/O:
every rank computes the same plan on its own and resume is arithmetic.

- ``world``: a consumer's place (rank x DataLoader worker), detected in one classmethod;
- ``epoch_plan``: the epoch's split of anchors over consumers (equal per-rank counts);
- ``pool_schedule``: the episode pool as slots, with seekable draw order;
- ``consumer_draws``: one consumer segment's draws as episode coordinates;
- ``resume`` and ``resume_state``: the DataLoader round robin, chains of resumes, the saved state;
- ``mixture_plan``: proportional and weighted mixtures.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.plan.consumer_draws": [
        "Admission",
        "Block",
        "Draw",
        "Segment",
        "SegmentDraws",
        "first_draws",
        "segment_blocks",
        "MAX_LOOKAHEAD_DRAWS",
    ],
    "lerobot_shards.reader.plan.epoch_plan": ["plan_epoch", "EpochPlan", "PlanError", "split_stream"],
    "lerobot_shards.reader.plan.world": ["World"],
    "lerobot_shards.reader.plan.mixture_plan": [
        "MixtureLayout",
        "PieceMap",
        "proportional_pieces",
        "source_quotas",
        "weighted_pieces",
    ],
    "lerobot_shards.reader.plan.pool_schedule": ["PoolSchedule"],
    "lerobot_shards.reader.plan.resume": [
        "ResumedStreams",
        "assign_resumed_streams",
        "worker_progress",
        "Phase",
        "resume_streams",
    ],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
