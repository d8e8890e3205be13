"""lerobot-shards: pack LeRobot v3 datasets into episode-aligned shards and stream them into
PyTorch. The one name to import::

    from lerobot_shards import PackedDataset, PackedLeRobotDataset, MixtureDataset, BatchLoader, DecodeStage, pack_dataset

The package's folders are its layers (docs/ARCHITECTURE.md): ``core`` (the format, reading a
finished pack, storage, errors and options both halves share), ``reader`` (datasets, loader,
decode), ``packer`` (packing, verify, mixtures), ``tools`` (info, sql, preview), ``train``
(LeRobot's trainer on packs), ``cli`` (the ``lerobot-shards`` command) and ``testing`` (synthetic
LeRobot datasets for tests).

This face names what a user needs, and every error a public docstring names. At run time the
names load lazily (PEP 562: ``import lerobot_shards`` costs nothing until a name is used, so the
packer's CPU nodes never import torch); the ``TYPE_CHECKING`` block below says the same names to
IDEs and type checkers (``tests/contracts/test_public_face.py`` keeps the two equal).
"""

from typing import TYPE_CHECKING

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    # reading
    "lerobot_shards.reader.dataset": ["PackedDataset", "AnchorSequence"],
    "lerobot_shards.reader.mixture": ["MixtureDataset"],
    "lerobot_shards.reader.map_dataset": ["PackedLeRobotDataset"],
    "lerobot_shards.reader.read_options": ["ReadOptions"],
    "lerobot_shards.reader.lerobot_meta": ["PackedMeta", "aggregate_stats"],
    "lerobot_shards.reader.loader": ["BatchLoader", "to_device"],
    "lerobot_shards.reader.decode.stage": ["DecodeStage"],
    "lerobot_shards.core.format": ["FORMAT_VERSION", "Manifest"],
    "lerobot_shards.core.storage": ["RetryPolicy"],
    # packing, and the tools over packs and mixtures
    "lerobot_shards.packer.run.pack": ["pack_dataset", "PackReport", "PackProgress"],
    "lerobot_shards.packer.options": ["PackOptions", "PackRunOptions"],
    "lerobot_shards.packer.run.finalize": ["finalize"],
    "lerobot_shards.packer.run.check": ["check_dataset"],
    "lerobot_shards.packer.verify_pack": ["verify", "VerifyReport"],
    "lerobot_shards.tools.summary": ["summarize"],
    "lerobot_shards.tools.sql": ["run_sql", "run_statements", "SqlResult", "connect"],
    "lerobot_shards.tools.preview": ["render_preview"],
    "lerobot_shards.packer.mixture.create": ["create_mixture", "scan_datasets", "MixtureReport"],
    "lerobot_shards.packer.mixture.sources": ["parse_sources", "read_sources"],
    # the one error hierarchy: catch LeRobotShardsError for all of ours
    "lerobot_shards.core.errors": [
        "LeRobotShardsError",
        "FormatError",
        "BoundExceededError",
        "UnsupportedFormatVersionError",
        "IntegrityError",
        "PinMismatchError",
        "NotAPackError",
        "EpisodeDataError",
        "MixtureSpecError",
        "StorageError",
        "ObjectNotFoundError",
        "PlanError",
        "ResumeStateError",
        "ResumeWarning",
        "WindowWarning",
        "MixtureFeatureWarning",
        "DecoderFallbackWarning",
        "WindowError",
        "PredicateError",
        "LeRobotTrainError",
        "DecodeError",
        "DecodeStageError",
        "PrefetchError",
        "ResourceLimitError",
        "AccessDeniedError",
        "ShortReadError",
        "HarmonizeError",
        "ArgumentError",
        "ConfigurationError",
        "MissingPackageError",
        "InspectError",
        "SqlSyntaxError",
    ],
    "lerobot_shards.packer.errors": [
        "PackError",
        "FrameMismatchError",
        "MissingRowsError",
        "PackInterrupted",
        "OptionsError",
        "SourceError",
        "VideoCutError",
        "ShardPlanError",
        "MixtureError",
        "SourcesError",
    ],
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the same names for static tools (never run); `X as X` marks a re-export (PEP 484)
    from lerobot_shards.core.errors import (
        AccessDeniedError as AccessDeniedError,
        ArgumentError as ArgumentError,
        BoundExceededError as BoundExceededError,
        ConfigurationError as ConfigurationError,
        DecodeError as DecodeError,
        DecoderFallbackWarning as DecoderFallbackWarning,
        DecodeStageError as DecodeStageError,
        EpisodeDataError as EpisodeDataError,
        FormatError as FormatError,
        HarmonizeError as HarmonizeError,
        InspectError as InspectError,
        IntegrityError as IntegrityError,
        LeRobotShardsError as LeRobotShardsError,
        LeRobotTrainError as LeRobotTrainError,
        MissingPackageError as MissingPackageError,
        MixtureFeatureWarning as MixtureFeatureWarning,
        MixtureSpecError as MixtureSpecError,
        NotAPackError as NotAPackError,
        ObjectNotFoundError as ObjectNotFoundError,
        PinMismatchError as PinMismatchError,
        PlanError as PlanError,
        PredicateError as PredicateError,
        PrefetchError as PrefetchError,
        ResourceLimitError as ResourceLimitError,
        ResumeStateError as ResumeStateError,
        ResumeWarning as ResumeWarning,
        ShortReadError as ShortReadError,
        SqlSyntaxError as SqlSyntaxError,
        StorageError as StorageError,
        UnsupportedFormatVersionError as UnsupportedFormatVersionError,
        WindowError as WindowError,
        WindowWarning as WindowWarning,
    )
    from lerobot_shards.core.format import (
        FORMAT_VERSION as FORMAT_VERSION,
        Manifest as Manifest,
    )
    from lerobot_shards.core.storage import (
        RetryPolicy as RetryPolicy,
    )
    from lerobot_shards.packer.errors import (
        FrameMismatchError as FrameMismatchError,
        MissingRowsError as MissingRowsError,
        MixtureError as MixtureError,
        OptionsError as OptionsError,
        PackError as PackError,
        PackInterrupted as PackInterrupted,
        ShardPlanError as ShardPlanError,
        SourceError as SourceError,
        SourcesError as SourcesError,
        VideoCutError as VideoCutError,
    )
    from lerobot_shards.packer.mixture.create import (
        MixtureReport as MixtureReport,
        create_mixture as create_mixture,
        scan_datasets as scan_datasets,
    )
    from lerobot_shards.packer.mixture.sources import (
        parse_sources as parse_sources,
        read_sources as read_sources,
    )
    from lerobot_shards.packer.options import (
        PackOptions as PackOptions,
        PackRunOptions as PackRunOptions,
    )
    from lerobot_shards.packer.run.check import (
        check_dataset as check_dataset,
    )
    from lerobot_shards.packer.run.finalize import (
        finalize as finalize,
    )
    from lerobot_shards.packer.run.pack import (
        PackProgress as PackProgress,
        PackReport as PackReport,
        pack_dataset as pack_dataset,
    )
    from lerobot_shards.packer.verify_pack import (
        VerifyReport as VerifyReport,
        verify as verify,
    )
    from lerobot_shards.reader.dataset import (
        AnchorSequence as AnchorSequence,
        PackedDataset as PackedDataset,
    )
    from lerobot_shards.reader.decode.stage import (
        DecodeStage as DecodeStage,
    )
    from lerobot_shards.reader.lerobot_meta import (
        PackedMeta as PackedMeta,
        aggregate_stats as aggregate_stats,
    )
    from lerobot_shards.reader.loader import (
        BatchLoader as BatchLoader,
        to_device as to_device,
    )
    from lerobot_shards.reader.map_dataset import (
        PackedLeRobotDataset as PackedLeRobotDataset,
    )
    from lerobot_shards.reader.mixture import (
        MixtureDataset as MixtureDataset,
    )
    from lerobot_shards.reader.read_options import (
        ReadOptions as ReadOptions,
    )
    from lerobot_shards.tools.preview import (
        render_preview as render_preview,
    )
    from lerobot_shards.tools.sql import (
        SqlResult as SqlResult,
        connect as connect,
        run_sql as run_sql,
        run_statements as run_statements,
    )
    from lerobot_shards.tools.summary import (
        summarize as summarize,
    )
