"""Every bound the packed format puts on what untrusted bytes may expand to, in one place.

A dataset, a mixture and a LeRobot source are untrusted (docs/SECURITY.md): whoever wrote
them may have written files of a few KB that claim, or decode to, gigabytes. Readers and the
packer check these bounds against what data *produces* when decoded (page headers walked,
values counted, boxes parsed) before they allocate for it, and a value beyond one is a
``FormatError`` (``SourceError`` in the packer) naming the file, the field, the value found
and the one allowed. Each value is far beyond any honest dataset (the sizes quoted are the
largest we know of: DROID 92k episodes and 27M frames, language_table 442k episodes, Open-X
kuka 580k episodes, ALOHA episodes of 1,500 frames at 50 fps), so honest data never meets
one. docs/SECURITY.md lists them with their reasons; change both together.
"""

from __future__ import annotations

# -- JSON records -------------------------------------------------------------------------------
MAX_MANIFEST_BYTES = 256 << 20  # ~400 bytes per shard entry: far beyond 100k shards
MAX_RECORD_BYTES = 256 << 20  # receipts, pack plans, mixture files, info.json
MAX_JSON_DEPTH = 32  # the deepest legitimate nesting (features.<key>.info...) is about 5
MAX_STATS_BYTES = 64 << 20  # meta/stats.json: a few KB per feature

# -- names, rates, frames -----------------------------------------------------------------------
MAX_KEY_LENGTH = 200
MAX_FPS = 10_000
MAX_FRAME_SIDE = 16_384
MAX_FRAME_PIXELS = 8192 * 8192
MAX_WINDOW_OFFSETS = 100_000
# Values of one picture of an image feature (height x width x channels): a 4096x4096 colour
# picture with alpha, 256 MiB as float32; a 1080p colour camera is 6.2M. What reading one may
# allocate follows from it (the decoded picture and the one float32 tensor made from it).
MAX_IMAGE_VALUES = 1 << 26

# -- dataset shape ------------------------------------------------------------------------------
# An episode of a million frames is 5.5 hours at 50 fps (real ones: at most tens of thousands).
MAX_EPISODE_FRAMES = 1_000_000
# 4.5x the most episodes of any dataset we know of (Open-X kuka: 580k).
MAX_DATASET_EPISODES = 2_000_000
# Members (episodes x cameras) of a dataset: 4 cameras at the most episodes, or 64 cameras on
# 125k episodes (DROID: 92k x 3). With the episodes bound it sizes what an episodes index may
# decode to (``lerobot_shards.core.format.indexes.episodes_index_budget``).
MAX_DATASET_MEMBERS = 8_000_000
# 37x DROID's 27M frames.
MAX_DATASET_FRAMES = 1_000_000_000
# Elements of one tabular feature in one frame (its shape's product): 1M float32 is 4 MB per
# frame; real features (joints, end-effector poses, language embeddings) have at most thousands.
MAX_FEATURE_ELEMENTS = 1 << 20
MAX_FEATURE_DIMS = 8
# Values of one frame's language column (LeRobot's ``language_persistent``/``language_events``:
# a list of message structs, each a few strings and tool calls): real rows hold a plan and a
# handful of subtasks, tens of values.
MAX_LANGUAGE_VALUES = 1 << 16
MAX_CAMERAS = 64
# A member's codec name (``VIDEO_CODECS``: "av1", "hevc", ...), for what a compiled index may decode to.
MAX_CODEC_NAME_BYTES = 16

# -- tasks --------------------------------------------------------------------------------------
MAX_TASKS = 2_000_000  # rows of meta/tasks.parquet (language_table: one task per episode)
MAX_TASK_BYTES = 64 << 10  # one task string (real ones: a sentence, at most a paragraph)
MAX_EPISODE_TASKS = 1_024  # tasks listed for one episode (real ones: one, rarely a few)

# -- parquet ------------------------------------------------------------------------------------
# Row groups of a shard parquet never exceed this decoded (unless one episode alone does).
ROW_GROUP_MAX_BYTES = 32 << 20
# A row group of one episode may exceed ROW_GROUP_MAX_BYTES, but never decode to more than
# this many times the bytes read for it: tabular rows of real datasets compress a few times.
MAX_EXPANSION = 64
MAX_FOOTER_BYTES = 64 << 20  # a shard parquet's footer (schema + row-group metadata)
# A parquet footer is counted before pyarrow parses it (about 1.5 KB per column chunk): a 3 MB
# footer of 1.5 million bare chunks cost 2.2 GB. Honest files: a few columns x tens of row groups.
MAX_SCHEMA_ELEMENTS = 16_384  # schema nodes (a list column takes 3)
MAX_FOOTER_CHUNKS = 262_144  # column chunks, all row groups together
MIN_CHUNK_BYTES = 8  # what one column chunk's page takes in the file at least (a page header)
# A page's declared uncompressed size is what the decoder allocates to decompress it; writers
# cut pages at ~1 MB (pyarrow's default), larger only for single values (an image) that big.
MAX_PAGE_BYTES = 256 << 20
# What one parse of an index, tasks or metadata file may decode to, computed from its page
# headers (values x widths, dictionary entries) before pyarrow decodes anything. The working
# bound is tighter: MAX_EXPANSION times the bytes read (at least EXPANSION_FLOOR_BYTES), so a
# small hostile file decodes to little; this caps honest files, whose expansion is small.
MAX_DECODED_BYTES = 4 << 30
EXPANSION_FLOOR_BYTES = 64 << 20
# Files read whole into memory: the episodes and samples index, tasks, metadata.
MAX_INDEX_FILE_BYTES = 4 << 30
# The index files we write (a pack's episodes index, a compiled mixture's tables) are written by
# pyarrow, whose dictionary pages stop at 1 MiB (it falls back to plain pages past that) and whose
# row groups hold 1Mi rows: a reader allows each column chunk one such dictionary page (on top of
# what the rows decode to) and row groups of at least 1/16 of that (all but the last), so the
# dictionary pages a file may add are tied to its rows, not to how well its bytes compress.
INDEX_DICTIONARY_CHUNK_BYTES = (1 << 20) + (64 << 10)
INDEX_MIN_GROUP_ROWS = 1 << 16
# Task values one episode of an honest episodes index lists (1 to a few): what its rows may add to
# the index's decoded bytes beside the per-episode figures (``MAX_EPISODE_TASKS`` bounds a row);
# the task strings themselves may decode to this many times the bytes of their column (text).
INDEX_TASKS_PER_EPISODE = 4
TEXT_EXPANSION = 16
# A member's SHA-256 is 32 random bytes: in an index its digests take at least this many bytes
# each (hex, dictionary or plain, compressed), half of them, so an honest index can repeat a
# digest (byte-identical videos of a dead camera) for up to half its members.
MIN_DIGEST_BYTES = 16

# -- mixtures -----------------------------------------------------------------------------------
MAX_MIXTURE_DATASETS = 100_000
# 10x the largest corpora being assembled (Open X-Embodiment, AgiBot World: ~1M trajectories
# each); members 4 cameras per episode at that size. Together they size what a compiled index
# may decode to (``lerobot_shards.core.format.mixture_index.table_budget``): the honest index at these
# maxima opens, and nothing a hostile one claims can make a reader decode more.
MAX_MIXTURE_EPISODES = 10_000_000
MAX_MIXTURE_MEMBERS = 40_000_000

# -- video members --------------------------------------------------------------------------------
# Pixels decoded to reach any one frame (from the keyframe before it): GOP length x frame
# pixels. 2^31 is a 1,000-frame GOP at 1080p or 250 frames at 4K; LeRobot encodes GOPs of 2.
MAX_GOP_PIXELS = 1 << 31
MAX_MP4_BOXES = 10_000  # boxes in one member (FFmpeg's muxer writes about 30)
MAX_MP4_DEPTH = 12
MAX_EDIT_ENTRIES = 64  # elst entries (the muxer writes one or two)
# A source video's moov, read whole to cut episodes by byte range in copy mode: ~12-20 bytes
# per sample, so 256 MiB is over 10M frames (a LeRobot file holds at most a few hundred MB).
MAX_MOOV_BYTES = 256 << 20
# Samples of one video track read without a recorded frame count (a source file in copy mode):
# each becomes three int64s; 10M is 55 hours at 50 fps in one file. A source file is further
# held to what its episodes can use (``SOURCE_SAMPLES_SLACK``).
MAX_TRACK_SAMPLES = 10_000_000
# A source video file holds at most 2 x (its episodes' last second x fps) + this many samples.
SOURCE_SAMPLES_SLACK = 1_000
# One sample (a compressed frame) claims at most this multiple of its raw RGB frame
# (height x width x 3) plus SAMPLE_SLACK_BYTES: codecs compress, and even lossless noise
# stays under raw RGB; a sparse file's apparent size is no bound.
MAX_SAMPLE_RAW_MULTIPLE = 2
SAMPLE_SLACK_BYTES = 64 << 10
# Bytes of parameter sets sent before each GOP run (x265 writes ~100; the SEI is not sent).
MAX_PARAMETER_SET_BYTES = 64 << 10
MAX_SAMPLE_ENTRY_BOXES = 64  # child boxes of a video sample entry (avcC/hvcC, btrt, pasp, colr...)
# Parameter sets (SPS/PPS/VPS) in one avcC/hvcC: the GPU decode stage sends them before every
# GOP it feeds NVDEC. Encoders write one of each (x265 adds one SEI).
MAX_PARAMETER_SETS = 32
