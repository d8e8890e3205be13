#!/usr/bin/env bash
# Build the GPU benchmark kit in .gpukit/ (ignored by git; under the device tool's 64 MiB):
# PyNvVideoCodec 2.2.4 + PyAV 18.1.0 for Python 3.12, unpacked, stripped of samples and
# duplicate libraries, as one xz tarball (~28 MB), and the shared ALOHA set's first 6 episodes
# packed twice: --video hevc (~14 MB, what NVDEC decodes) and --video copy (AV1, ~18 MB).
#   bash benchmarks/make_gpu_kit.sh            # then, on a GPU machine: bash benchmarks/gpu_kit.sh
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=${KIT:-.gpukit}
SOURCE=${SOURCE:-../shared/datasets/aloha_cube_4cam}
EPISODES=${EPISODES:-0-5}
mkdir -p "$KIT"
grep -qxF "/$KIT/" .git/info/exclude 2>/dev/null || echo "/$KIT/" >> .git/info/exclude
if [ ! -f "$KIT/kit.tar.xz" ]; then
    tmp=$(mktemp -d)
    for spec in pynvvideocodec==2.2.4 av==18.1.0; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp/wheels" "$spec"
    done
    mkdir "$tmp/site"
    for wheel in "$tmp"/wheels/*.whl; do (cd "$tmp/site" && unzip -qo "$wheel"); done
    rm -rf "$tmp/site/samples" "$tmp/site/benchmarks" "$tmp"/site/pynvvideocodec-*.data
    # PyNvVideoCodec ships three copies of each FFmpeg library: keep one, link the others.
    (cd "$tmp/site/PyNvVideoCodec" && for lib in libavformat libavutil; do
        real=$(ls $lib.so.*.*.* | head -1)
        for name in $lib.so $lib.so.*; do [ "$name" = "$real" ] || ln -sf "$real" "$name"; done
    done)
    tar -cJf "$KIT/kit.tar.xz" -C "$tmp/site" .
    rm -rf "$tmp"
fi
PY=${PY:-.venv/bin/python}
[ -f "$KIT/aloha6-hevc/manifest.json" ] || "$PY" -m lerobot_shards.cli pack "$SOURCE" "$KIT/aloha6-hevc" --episodes "$EPISODES" --video hevc
[ -f "$KIT/aloha6-av1/manifest.json" ] || "$PY" -m lerobot_shards.cli pack "$SOURCE" "$KIT/aloha6-av1" --episodes "$EPISODES"
du -sh "$KIT"/*
