#!/usr/bin/env bash
# Opt-in: a Python 3.12 venv with LeRobot 0.6.1 (the correctness oracle) plus this project.
# LeRobot pulls its own torch (~5 GB), so this is never part of `make test` or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-parity
if [ ! -x "$VENV/bin/python" ]; then
    PY312=""
    if command -v pyenv >/dev/null; then
        PY312=$(pyenv root)/versions/$(pyenv versions --bare | grep -E '^3\.12' | tail -n1)/bin/python
    fi
    [ -x "$PY312" ] || PY312=$(command -v python3.12 || true)
    if [ -z "$PY312" ] || [ ! -x "$PY312" ]; then
        echo "[parity] needs Python 3.12 (pyenv install 3.12 or apt-get install python3.12)" >&2
        exit 1
    fi
    "$PY312" -m venv "$VENV"
fi
if [ ! -f "$VENV/.installed-4" ]; then
    echo "[parity] installing LeRobot 0.6.1 (with accelerate, for lerobot-train), lerobot-lancedb and this project into $VENV: a few minutes, ~5 GB" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # The README's train journey, as a LeRobot user runs it: LeRobot and accelerate first ...
    "$VENV/bin/python" -m pip install -q 'lerobot[dataset]==0.6.1' 'accelerate==1.16.0'
    "$VENV/bin/python" -m pip install -q pytest
    # Diffusion policies (scripts/parity_train.py trains one through LeRobot's sampler: drop_n_last_frames).
    "$VENV/bin/python" -m pip install -q 'lerobot[diffusion]==0.6.1'
    # A peer for the benchmarks (bench_real.py's lance rows), in the same venv as LeRobot.
    "$VENV/bin/python" -m pip install -q 'lerobot-lancedb==0.3.1' lancedb
    touch "$VENV/.installed-4"
fi
# ... then this project into LeRobot's environment with its own dependencies, as the README
# says (it must keep LeRobot's torch: checked below); again each time, so the editable install
# maps the packages this checkout has now.
TORCH_BEFORE=$("$VENV/bin/python" -c "import torch; print(torch.__version__)")
# Resolved together with LeRobot (the README's line, word for word): an install that leaves a
# dependency conflict (s3fs pulling an fsspec LeRobot's datasets refuses) fails here.
"$VENV/bin/python" -m pip install -q -e '.[pack,s3]' 'lerobot[dataset]==0.6.1' 2> "$VENV/install-project.log" || { cat "$VENV/install-project.log" >&2; exit 1; }
if grep -q "dependency conflicts" "$VENV/install-project.log"; then
    echo "[parity] installing lerobot-shards beside LeRobot left a dependency conflict:" >&2
    cat "$VENV/install-project.log" >&2
    exit 1
fi
TORCH_AFTER=$("$VENV/bin/python" -c "import torch; print(torch.__version__)")
if [ "$TORCH_BEFORE" != "$TORCH_AFTER" ]; then
    echo "[parity] installing lerobot-shards changed LeRobot's torch ($TORCH_BEFORE -> $TORCH_AFTER): the README's journey is broken" >&2
    exit 1
fi
"$VENV/bin/python" -c "import lerobot, torch; print('[parity] lerobot', lerobot.__version__ if hasattr(lerobot, '__version__') else '?', 'torch', torch.__version__)"

# An older LeRobot beside 0.6.1, in a venv of its own that borrows 0.6.1's torch and
# dependencies through a .pth instead of pulling another ~5 GB: beside VENV PACKAGE...
beside() {
    local dir=$1
    shift
    if [ ! -f "$dir/.installed-1" ]; then
        local base deps own
        base=$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)')
        [ -x "$dir/bin/python" ] || "$base" -m venv "$dir"
        deps=$("$VENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')
        own=$("$dir/bin/python" -c 'import site; print(site.getsitepackages()[0])')
        echo "$deps" > "$own/parity-deps.pth"
        "$dir/bin/python" -m pip install -q --no-deps "$@"
        touch "$dir/.installed-1"
    fi
}

# LeRobot 0.4.4 (issue 54): the releases that wrote every v3 dataset of Oct 2025 - Feb 2026
# record the parity matrix's `lerobot-0.4.4-writer` layout.
beside .venv-lerobot044 'lerobot==0.4.4'
.venv-lerobot044/bin/python -c "import lerobot, torch; print('[parity] beside it: lerobot', lerobot.__version__ if hasattr(lerobot, '__version__') else '0.4.4', 'torch', torch.__version__)"

# LeRobot 0.3.3 (issue 67): the last releases that wrote LeRobot v2.1 (per-episode parquet and
# mp4, episodes_stats.jsonl); scripts/parity_v21.py records its v2.1 datasets with it.
beside .venv-lerobot033 'lerobot==0.3.3' jsonlines
.venv-lerobot033/bin/python -c "import lerobot.datasets.lerobot_dataset as d; print('[parity] beside it: lerobot 0.3.3 (writes', d.CODEBASE_VERSION + ')')"
