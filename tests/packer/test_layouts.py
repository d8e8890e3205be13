"""Every LeRobot layout packs and reads back as LeRobot reads it (issue 40).

Datasets written by the project's LeRobot writer in the layouts real Hub datasets use besides
LeRobot's default (image features, depth as video and as pictures, h264/hevc sources with
B-frames and 4:4:4, odd sizes, no video at all, episodes metadata without ``tasks``, language
columns) are packed, and every anchor is compared with the independent oracle
(``tests/lerobot_reference.py``: PIL for pictures, PyAV for depth video, LeRobot's formulas),
which ``make parity`` checks against LeRobot itself on datasets LeRobot's own writer made.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from lerobot_shards import PackedDataset, pack_dataset
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.lerobot_reference import reference_item

TOP, WRIST, DEPTH, DEPTH_IMG = (
    "observation.images.top",
    "observation.images.wrist",
    "observation.depth",
    "observation.depth_image",
)

LAYOUTS = {
    # An RGB video beside a picture camera, a depth video (LeRobot's depth encoder: 12-bit codes,
    # lossless HEVC) and a depth picture camera; language columns; no episodes tasks column.
    "images-depth-language": SampleSpec(
        episodes=3,
        lengths=(6, 1, 9),
        seed=2,
        language=True,
        episode_tasks_column=False,
        cameras=(
            CameraSpec(TOP, 48, 64),
            CameraSpec(WRIST, 32, 40, kind="image"),
            CameraSpec(DEPTH, 48, 64, kind="depth_video"),
            CameraSpec(DEPTH_IMG, 24, 32, kind="depth_image"),
        ),
    ),
    # h264 with B-frames in a long GOP and hevc 4:4:4 with B-frames: copy mode must cut them.
    "bframes": SampleSpec(
        episodes=3,
        lengths=(14, 9, 11),
        seed=3,
        cameras=(
            CameraSpec(TOP, 64, 96, codec="h264", gop=30, bframes=3),
            CameraSpec(WRIST, 64, 128, codec="hevc", pix_fmt="yuv444p", gop=8, bframes=4),
        ),
    ),
    # No video at all ("video_path": null): pictures and a 16-bit depth picture only.
    "no-video": SampleSpec(
        episodes=2,
        lengths=(5, 7),
        seed=4,
        cameras=(CameraSpec(WRIST, 32, 40, kind="image"), CameraSpec(DEPTH_IMG, 24, 32, kind="depth_image")),
    ),
    # An odd-sized camera: copy is exact; a re-encode codes it 4:4:4 (4:2:0 cannot hold odd sides).
    "odd-size": SampleSpec(episodes=2, lengths=(6, 4), seed=5, cameras=(CameraSpec(TOP, 97, 131),)),
}


def _configs(features: dict, fps: int):
    cameras = [k for k, f in features.items() if f["dtype"] in ("video", "image")]
    windowed = {**{k: [-1 / fps, 0.0] for k in cameras}, "action": [0.0, 1 / fps, 2 / fps], "observation.state": [-5 / fps, 0.0]}
    return [("single", None, True), ("windowed", windowed, True), ("float", windowed, False)]


def assert_like_lerobot(
    expected: dict, actual: dict, *, images: set[str], where: str, lossy: set[str] = frozenset(), min_psnr: float = 35.0
) -> None:
    """Equal keys, dtypes, shapes and values; 8-bit pictures that ours gives as uint8
    (``return_uint8``) are compared as ``/ 255`` (LeRobot gives them float32 whatever it is
    asked); ``lossy`` keys (re-encoded colour video) by PSNR."""
    assert set(expected) == set(actual), f"{where}: keys {set(expected) ^ set(actual)}"
    for key, value in expected.items():
        other = actual[key]
        if not isinstance(value, torch.Tensor):
            assert other == value, f"{where}: {key}: {other!r} != {value!r}"
            continue
        if key in images and other.dtype == torch.uint8 and value.dtype == torch.float32:
            other = other.to(torch.float32).div(255)
        assert (other.dtype, other.shape) == (value.dtype, value.shape), (
            f"{where}: {key}: {other.dtype}{tuple(other.shape)} != {value.dtype}{tuple(value.shape)}"
        )
        if key in lossy:
            scale = 1.0 if value.dtype == torch.uint8 else 255.0
            mse = float((value.double() * scale - other.double() * scale).pow(2).mean())
            assert mse == 0 or 10 * math.log10(255.0**2 / mse) >= min_psnr, f"{where}: {key} below {min_psnr} dB"
            continue
        assert torch.equal(other, value), f"{where}: {key}: values differ (max {(other.double() - value.double()).abs().max()})"


VIDEO_LAYOUTS = [name for name, spec in LAYOUTS.items() if any(camera.is_video for camera in spec.cameras)]
_WRITTEN: dict = {}


def _written(name: str, tmp_path_factory):
    """The layout's source, written once per test session."""
    if name not in _WRITTEN:
        root = tmp_path_factory.mktemp(name) / "src"
        write_sample_dataset(root, LAYOUTS[name])
        _WRITTEN[name] = root
    return name, _WRITTEN[name]


@pytest.fixture(params=list(LAYOUTS))
def layout(request, tmp_path_factory):
    return _written(request.param, tmp_path_factory)


@pytest.fixture(params=VIDEO_LAYOUTS)
def video_layout(request, tmp_path_factory):
    return _written(request.param, tmp_path_factory)


def _check_pack(source, pack, *, lossy: set[str] = frozenset()):
    info = json.loads((source / "meta/info.json").read_text())
    images = {k for k, f in info["features"].items() if f["dtype"] == "image"}
    compared = 0
    for config, delta, uint8 in _configs(info["features"], info["fps"]):
        for sample in PackedDataset(str(pack), delta_timestamps=delta, return_uint8=uint8, shuffle=False):
            index = int(sample["index"])
            expected = reference_item(source, index, delta, return_uint8=uint8)
            assert_like_lerobot(expected, sample, images=images, lossy=lossy, where=f"{pack.name} {config} index {index}")
            compared += 1
    assert compared == 3 * info["total_frames"]


def test_copy_pack_equals_lerobot(layout, tmp_path):
    name, source = layout
    pack = tmp_path / "copy"
    report = pack_dataset(str(source), str(pack))
    assert report.reencoded_episodes == []  # B-frame sources are cut, not re-encoded
    _check_pack(source, pack)


def test_reencoded_pack_equals_lerobot_but_colour_video(video_layout, tmp_path):
    """``--video hevc``: colour video within 35 dB; pictures, depth and every other value exact
    (depth is cut, or re-encoded losslessly, never as 8-bit colour)."""
    name, source = video_layout
    info = json.loads((source / "meta/info.json").read_text())
    videos = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    assert videos
    pack = tmp_path / "hevc"
    pack_dataset(str(source), str(pack), video="hevc")
    depth = {k for k in videos if info["features"][k]["info"].get("is_depth_map")}
    _check_pack(source, pack, lossy=set(videos) - depth)
    manifest = json.loads((pack / "manifest.json").read_text())
    for key in set(videos) - depth:
        odd = any(side % 2 for side in info["features"][key]["shape"][:2])
        chroma_full = info["features"][key]["info"]["video.pix_fmt"].startswith("yuv444")
        assert manifest["features"][key]["info"]["video.pix_fmt"] == ("yuv444p" if odd or chroma_full else "yuv420p")
    for key in depth:  # a depth camera keeps its source's description: it was not re-encoded lossily
        assert manifest["features"][key]["info"] == info["features"][key]["info"]


def test_extension_typed_columns_read_as_their_storage():
    """With ``datasets`` imported (lerobot-train's process), pyarrow reads LeRobot's 2-D..5-D
    features as ``datasets``' ArrayND extension types: the reader yielded Python lists for them
    there (found by ``make parity``); it reads the storage instead, a (rows, 2, 3) float32 tensor."""
    import pyarrow as pa

    from lerobot_shards.reader.fetch import column_values

    class Array2DLike(pa.ExtensionType):
        def __init__(self):
            super().__init__(pa.list_(pa.list_(pa.float32())), "lerobot_shards_test.array2d")

        def __arrow_ext_serialize__(self) -> bytes:
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return cls()

    storage = pa.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]] * 4, pa.list_(pa.list_(pa.float32())))
    column = pa.chunked_array([pa.ExtensionArray.from_storage(Array2DLike(), storage)])
    values = column_values(column)
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float32 and values.shape == (4, 2, 3)
    assert values[3].tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` RGB pixels, with a few bytes of data."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def _replace_picture(root, key: str, cell) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = sorted((root / "data").glob("*/*.parquet"))[0]
    table = pq.read_table(path)
    cells = table[key].to_pylist()
    cells[0] = cell
    table = table.set_column(table.schema.get_field_index(key), key, pa.array(cells, table.schema.field(key).type))
    pq.write_table(table, path)


@pytest.mark.parametrize(
    "cell,message",
    [
        (
            {"bytes": _png_header_only(2000, 1500), "path": "big.png"},
            r"a PNG RGB picture of 1500x2000x3; its feature's shape is 32x40x3 \(height x width x channels\)",
        ),
        ({"bytes": _png_header_only(50_000, 50_000), "path": "bomb.png"}, r"header claims more pixels than Pillow decodes"),
        ({"bytes": b"GIF89a" + bytes(64), "path": "x.gif"}, r"not an image Pillow opens as PNG/TIFF/JPEG/WEBP"),
        ({"bytes": None, "path": "/etc/passwd"}, r"no embedded picture bytes \(a path only\)"),
    ],
)
def test_hostile_pictures_are_refused_by_name_before_decoding(tmp_path, cell, message):
    """A picture's header is held to its feature's shape before a pixel is decoded; foreign
    formats and path-only cells (a file the dataset would have a reader open) are refused."""
    from lerobot_shards import SourceError

    root = tmp_path / "src"
    write_sample_dataset(root, SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec(WRIST, 32, 40, kind="image"),)))
    _replace_picture(root, WRIST, cell)
    with pytest.raises(SourceError, match=rf"episode 0, image feature {WRIST}, frame 0: .*{message}"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_depth_quantizer_lerobot_cannot_read_is_refused_at_the_start(tmp_path):
    from lerobot_shards import SourceError

    root = tmp_path / "src"
    write_sample_dataset(root, SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec(DEPTH, 48, 64, kind="depth_video"),)))
    info = json.loads((root / "meta/info.json").read_text())
    info["features"][DEPTH]["info"]["video.depth_min"] = "near"
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match=rf"feature '{DEPTH}': info video.depth_min must be a finite number, found 'near'"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_decode_stage_leaves_pictures_and_depth_to_the_workers_and_counts_them(tmp_path):
    """With ``decode_device`` only colour video travels to the stage: pictures and depth are
    decoded in the workers (a GPU stage has no depth or picture path), counted in
    ``ds.stats()``, and the batches equal the in-worker path's."""
    from lerobot_shards import BatchLoader
    from lerobot_shards.reader.decode import DecodeStage

    root = tmp_path / "src"
    write_sample_dataset(root, LAYOUTS["images-depth-language"])
    pack = tmp_path / "pack"
    pack_dataset(str(root), str(pack), video="hevc")
    delta = {TOP: [-1 / 30, 0.0], WRIST: [0.0], DEPTH: [-1 / 30, 0.0]}
    reference = PackedDataset(str(pack), delta_timestamps=delta, seed=3, return_uint8=True)
    staged = PackedDataset(str(pack), delta_timestamps=delta, seed=3, return_uint8=True, decode_device="cpu")
    expected = list(BatchLoader(reference, batch_size=4, num_workers=0))
    got = list(BatchLoader(staged, batch_size=4, num_workers=0, decode_stage=DecodeStage("cpu")))
    assert len(got) == len(expected) == 4
    for a, b in zip(expected, got):
        assert set(a) == set(b)
        for key, value in a.items():
            if isinstance(value, torch.Tensor):
                assert (value.dtype, value.shape) == (b[key].dtype, b[key].shape) and torch.equal(value, b[key]), key
            else:
                assert value == b[key], key
    stats = staged.stats()
    assert stats["images_decoded"] == 16 + 16  # a picture per sample of each picture camera (no window on the depth one)
    assert stats["depth_frames_decoded"] == 2 * 16  # two frames per sample of the depth video
    assert stats["frames_decoded"] == stats["images_decoded"] + stats["depth_frames_decoded"]  # colour went to the stage
