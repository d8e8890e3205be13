"""Where an NVDEC elementary-stream decode spends its time (GPU only): variants on one HEVC member.

    PYTHONPATH=. python benchmarks/nvdec_variants.py MEMBER.mp4    # a 480x640 hevc member

Feeds random 64-frame sets of the member (GOP runs, as the decode stage does) through
PyNvVideoCodec's core decoder for 3 s per variant: output RGBP or NV12 (``NATIVE``), display
latency NATIVE/LOW/ZERO, each frame handed to torch (``from_dlpack`` + ``copy_``) or not, 1-8
threads; prints frames fed per second and CPU cores, then a cProfile of one thread. Results:
benchmarks/results/h100-nvdec-variants.txt (what led to the driver copy in lerobot_shards/reader/decode/backends/nvdec.py),
measured when the parameter sets were still inside the stream buffer before every keyframe;
the loop now sends them in each run's first packet, as lerobot_shards/reader/decode/backends/nvdec.py does.
"""

import cProfile
import io
import pstats
import random
import sys
import threading
import time

import numpy as np
import PyNvVideoCodec as nvc
import torch

from lerobot_shards.core.format import check_mp4
from lerobot_shards.reader.decode import elementary_stream, packets, stream_config

path = sys.argv[1]
data = open(path, "rb").read()
layout = check_mp4(data, where=path)
es = elementary_stream(data, layout, stream_config(layout.codec, layout.codec_config, where=path), where=path)
buf = np.frombuffer(es.data, dtype=np.uint8)
base = buf.ctypes.data


def make(color, latency, stream):
    return nvc.CreateDecoder(
        gpuid=0,
        codec=nvc.cudaVideoCodec.HEVC,
        cudacontext=0,
        cudastream=stream.cuda_stream,
        usedevicememory=True,
        outputColorType=getattr(nvc.OutputColorType, color),
        latency=getattr(nvc.DisplayDecodeLatencyType, latency),
    )


def worker(color, latency, copy, seconds, counts, idx, flag=True):
    stream = torch.cuda.Stream()
    dec = make(color, latency, stream)
    rng = random.Random(idx)
    n = fed = 0
    out = torch.empty((3, 480, 640), dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(stream):
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            wanted = sorted(rng.sample(range(250), 64))
            for j, first in packets(layout, wanted):
                payload = np.frombuffer(es.packet(j, first=True), dtype=np.uint8) if first else None
                p = nvc.PacketData()
                p.pts = j
                if first:
                    p.bsl_data = payload.ctypes.data
                    p.bsl = payload.size
                else:
                    p.bsl_data = base + es.starts[j]
                    p.bsl = es.starts[j + 1] - es.starts[j]
                if flag:
                    p.decode_flag = nvc.VideoPacketFlag.ENDOFPICTURE
                fed += 1
                for f in dec.Decode(p):
                    if copy:
                        out.copy_(torch.from_dlpack(f).reshape(-1)[: out.numel()].view(3, 480, 640))
                    n += 1
            p = nvc.PacketData()
            p.bsl = 0
            p.bsl_data = 0
            p.decode_flag = nvc.VideoPacketFlag.ENDOFSTREAM
            for _frame in dec.Decode(p):
                n += 1
        stream.synchronize()
    counts[idx] = (fed, n)


def run(color, latency, copy, threads, seconds=3, flag=True):
    counts = {}
    ts = [threading.Thread(target=worker, args=(color, latency, copy, seconds, counts, i, flag)) for i in range(threads)]
    c0 = time.process_time()
    t = time.perf_counter()
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    dt = time.perf_counter() - t
    cpu = time.process_time() - c0
    fed = sum(v[0] for v in counts.values())
    print(
        f"{color:6} {latency:6} copy={copy!s:5} flag={flag!s:5} threads={threads:2}: {fed / dt:7.0f} fed frames/s, {cpu / dt:.2f} cores",
        flush=True,
    )


run("RGBP", "NATIVE", True, 1, 1)  # warm-up
for color, latency, copy in (
    ("RGBP", "NATIVE", True),
    ("RGBP", "NATIVE", False),
    ("NATIVE", "NATIVE", False),
    ("RGBP", "LOW", True),
    ("RGBP", "ZERO", True),
):
    for threads in (1, 4):
        run(color, latency, copy, threads)
run("RGBP", "NATIVE", True, 1, flag=False)
run("NATIVE", "NATIVE", False, 8)
counts = {}
prof = cProfile.Profile()
prof.enable()
worker("RGBP", "NATIVE", True, 3, counts, 0)
prof.disable()
s = io.StringIO()
pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
print(s.getvalue()[:3000])
