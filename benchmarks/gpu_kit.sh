#!/usr/bin/env bash
# The GPU benchmark in one command, on a machine with an NVIDIA GPU and CUDA torch (Python 3.12),
# from a repository root holding .gpukit/ (benchmarks/make_gpu_kit.sh builds it):
#   bash benchmarks/gpu_kit.sh [bench_gpu_decode.py options]
# Results: $OUT/gpu-results.json (OUT defaults to gpu-out/) and the log on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=${KIT:-.gpukit}
OUT=${OUT:-gpu-out}
SITE=${SITE:-/tmp/lerobot-shards-gpu-site}
mkdir -p "$OUT"
if [ ! -d "$SITE/PyNvVideoCodec" ]; then
    # Python's tarfile: the machine may have no xz binary.
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='fully_trusted')" "$KIT/kit.tar.xz" "$SITE"
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 benchmarks/bench_gpu_decode.py --pack "$KIT/aloha6-hevc" --cpu-pack "$KIT/aloha6-av1" --out "$OUT/gpu-results.json" "$@"
