"""A source's cameras as the packer needs to know them before it packs: which codec each file
holds (one probe per file, no decode), and how large a compressed frame may be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from lerobot_shards.core.format.features import Features, is_depth_pixel_format
from lerobot_shards.core.format.limits import MAX_FRAME_PIXELS, MAX_SAMPLE_RAW_MULTIPLE, SAMPLE_SLACK_BYTES
from lerobot_shards.packer.errors import SourceError, VideoCutError
from lerobot_shards.packer.source.video import StreamProbe, probe_stream


class CameraProbes:
    """Each video file's stream, probed once for the source's life (``probe_stream``)."""

    def __init__(self, features: Features):
        self.features = features
        self._probes: dict[Path, StreamProbe] = {}

    def codecs(self, files_of: Callable[[str], Iterable[Path]]) -> dict[str, dict[str, Path]]:
        """Per camera, the codecs its files (``files_of(camera)``) hold, each with one file that
        holds it; a depth camera's files are checked to hold one plane of codes.

        Raises:
            SourceError: a file that does not open as video, or a depth camera whose stream is
                colour (names the camera, the file and the pixel format found).
        """
        found: dict[str, dict[str, Path]] = {}
        for key in self.features.video_keys:
            codecs = found.setdefault(key, {})
            for path in sorted(set(files_of(key))):
                if not path.is_file():
                    continue  # reported missing where it is read
                probe = self._probe(path)
                if key in self.features.depth and probe.pix_fmt is not None and not is_depth_pixel_format(probe.pix_fmt):
                    # Colour whose luma would pass for plausible depth.
                    raise SourceError(
                        f"{path}: depth camera {key}: the stream (its codec configuration) is {probe.pix_fmt}, not one "
                        "plane of depth codes; its feature declares is_depth_map, which LeRobot writes only for gray12le video"
                    )
                codecs.setdefault(probe.codec, path)
        return found

    def _probe(self, path: Path) -> StreamProbe:
        probe = self._probes.get(path)
        if probe is None:
            try:
                probe = self._probes[path] = probe_stream(path)
            except VideoCutError as err:
                raise SourceError(str(err)) from None
        return probe


def max_sample_bytes(features: Features, video_key: str) -> int:
    """The most one compressed frame of the camera may claim: ``MAX_SAMPLE_RAW_MULTIPLE`` raw
    frames of its declared size, plus ``SAMPLE_SLACK_BYTES`` (checked before a copy-mode cut, or
    FFmpeg's demuxer, reads any sample)."""
    camera = features[video_key].camera
    raw = camera.height * camera.width * 3 if camera is not None else 3 * MAX_FRAME_PIXELS
    return MAX_SAMPLE_RAW_MULTIPLE * raw + SAMPLE_SLACK_BYTES


__all__ = ["CameraProbes", "max_sample_bytes"]
