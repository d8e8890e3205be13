"""Re-encoding under an address-space limit ends, with one named error or the member.

x265 starts its frame threads without checking that they started and waits for them: under
``ulimit -v`` with 20-40 MiB left (480x640 frames, 2 cores) ``avcodec_open2`` never returned,
and a pack hung until killed (found by the field fuzzer, whose worker runs under
``RLIMIT_AS``). x264 failed with a bare "Generic error in an external library". The encoder
now opens only when the kernel grants its room (``packer/shard/encoder_room.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lerobot_shards.packer.shard import encoder_room_bytes, encoder_threads

MIB = 1 << 20

# One child sweeps the room left under its limit from none to more than any encoder here needs,
# encoding at each step. The child ending at all is the point: before the check, the hevc
# sweep hung at its third step.
SWEEP = """
import json, resource, sys
import av
from lerobot_shards import ResourceLimitError
from lerobot_shards.packer.shard import EncodeSettings, encode_frames
from lerobot_shards.testing import identity_frame

codec = sys.argv[1]
frames = [av.VideoFrame.from_ndarray(identity_frame(0, j, 480, 640), format="rgb24") for j in range(3)]
assert encode_frames(iter(frames), 30, EncodeSettings(codec)).frames == 3  # warm: libraries mapped

def mapped():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024

from lerobot_shards.packer.shard import encoder_room_bytes
settings = EncodeSettings(codec)
need_mib = encoder_room_bytes(settings.encoder_name(), settings.options(640, 480), 480, 640) >> 20
outcomes = []
# From no room to more than this machine's encoder asks for (it grows with the cores).
for left_mib in list(range(0, 97, 8)) + [need_mib + 32, need_mib + 128, need_mib + 256]:
    resource.setrlimit(resource.RLIMIT_AS, (mapped() + left_mib * 2**20, resource.RLIM_INFINITY))
    try:
        video = encode_frames(iter(frames), 30, EncodeSettings(codec))
        outcomes.append([left_mib, "ok" if video.frames == 3 else f"{video.frames} frames"])
    except ResourceLimitError as err:
        outcomes.append([left_mib, "refused: " + str(err)])
    except BaseException as err:
        outcomes.append([left_mib, f"{type(err).__name__}: {err}"])
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(json.dumps(outcomes))
"""


@pytest.mark.parametrize("codec", ["hevc", "h264"])
def test_an_encoder_under_an_address_space_limit_encodes_or_refuses_by_name_and_never_hangs(codec):
    try:
        done = subprocess.run([sys.executable, "-c", SWEEP, codec], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:  # a hang guard: the sweep takes seconds
        pytest.fail(f"{codec}: encoding under an address-space limit hung (x265 waits for a thread that never started)")
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    verdicts = [verdict for _, verdict in outcomes]
    assert all(v == "ok" or v.startswith("refused: ") for v in verdicts), outcomes
    refused = [v for v in verdicts if v != "ok"]
    # With no room left the encoder is refused, naming the limit and the fix; with room it encodes.
    assert verdicts[0].startswith("refused: "), outcomes
    assert verdicts[-1] == "ok", outcomes
    assert all("ulimit -v" in v and "GiB" in v and "raise the job's virtual-memory limit" in v for v in refused)
    # Refusals come first, then successes: no size in between both refuses and encodes.
    assert verdicts == sorted(verdicts, key=lambda v: v == "ok"), outcomes


def test_the_room_an_encoder_is_given_covers_its_threads_stacks():
    # x265 on 2 cores started 5 threads for 480x640 frames (2 pool workers, 2 frame encoders,
    # its lookahead); on small frames (pools=none, frame-threads=1) 3; x264 started 6.
    x265 = {"x265-params": "keyint=2:ctu=64"}
    small = {"x265-params": "keyint=2:ctu=16:pools=none:frame-threads=1"}
    assert encoder_threads("libx265", x265, 2) >= 5 and encoder_threads("libx265", small, 2) >= 3
    assert encoder_threads("libx264", {}, 2) >= 6 and encoder_threads("libx264", {"threads": "1"}, 2) == 3
    # A pool worker a core (x265 builds several pools past 64 cores): more cores, more room.
    rooms = [encoder_room_bytes("libx265", x265, 480, 640, cores=c) for c in (1, 2, 16, 64, 128)]
    assert rooms == sorted(rooms) and len(set(rooms)) == len(rooms) and rooms[1] > 8 * 5 * MIB
    # frame-threads as given, not as a prefix: 12 frame threads are not 1.
    twelve = {"x265-params": "keyint=2:pools=none:frame-threads=12"}
    assert encoder_threads("libx265", twelve, 2) == 14
