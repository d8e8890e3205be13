#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian machine: FFmpeg shared libraries (for torchcodec),
# the project venv in .venv, and the project installed into it with the CPU pins.
#   scripts/setup_env.sh         what a user needs (make install, make demo): pack, decode, s3
#   scripts/setup_env.sh test    also the test and benchmark tools (make test): pytest, moto, ruff, matplotlib
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${1:-user}
case "$PROFILE" in
    user) EXTRAS="pack,decode,s3" ;;
    test) EXTRAS="all" ;;
    *) echo "[setup] unknown profile $PROFILE (user or test)" >&2; exit 2 ;;
esac
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

have_ffmpeg_libs() {
    # torchcodec 0.13 dlopens libavcodec/libavformat/libavutil/libswscale (FFmpeg 4-8).
    # Read the cache once: `ldconfig -p | grep -q` under pipefail fails on SIGPIPE.
    local cache
    cache=$(ldconfig -p 2>/dev/null || true)
    for lib in libavcodec libavformat libavutil libswscale; do
        case "$cache" in *"$lib.so."*) ;; *) return 1 ;; esac
    done
}

if ! have_ffmpeg_libs; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
        echo "[setup] FFmpeg shared libraries missing: installing Debian's ffmpeg with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        APT_UPDATED=1
        apt-get install -y -qq ffmpeg >/dev/null
    else
        echo "[setup] FFmpeg shared libraries (libavcodec, libavformat, libswscale) are missing." >&2
        echo "[setup] Install them as root, e.g.: apt-get update && apt-get install -y ffmpeg" >&2
        echo "[setup] (torchcodec needs them; without them the reader falls back to PyAV.)" >&2
    fi
fi

# Test-only system tools (make test): the test tier that needs them skips, saying why, without them.
if [ "$PROFILE" = test ]; then
    # The SLURM tests start a throwaway single-node cluster (tests/slurm_cluster.py): Debian's
    # slurm-wlm and munge. Installed when we are root (CI is); the tests skip, saying why, otherwise.
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
            echo "[setup] slurm-wlm/munge missing: installing them with apt-get (for the SLURM cluster tests)"
            export DEBIAN_FRONTEND=noninteractive
            if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
            apt-get install -y -qq slurm-wlm munge >/dev/null
        else
            echo "[setup] slurm-wlm and munge are not installed: the SLURM cluster tests will be skipped" >&2
        fi
    fi

    # The preview's browser test renders the page in Debian's headless Chromium
    # (tests/tools/test_preview.py). Installed when we are root (CI is); the test skips, saying why, otherwise.
    if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
            echo "[setup] chromium missing: installing it with apt-get (for the preview's browser test)"
            export DEBIAN_FRONTEND=noninteractive
            if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; APT_UPDATED=1; fi
            apt-get install -y -qq chromium >/dev/null || echo "[setup] could not install chromium: the browser test will be skipped" >&2
        else
            echo "[setup] chromium is not installed: the preview's browser test will be skipped" >&2
        fi
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed-$PROFILE"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-cpu.txt -nt "$stamp" ]; then
    echo "[setup] installing lerobot-shards [$EXTRAS] and its dependencies into $VENV (a few minutes the first time)"
    started=$(date +%s)
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # One log line per package (pip's own bars are useless in a CI log); pip's exit status
    # still decides (pipefail).
    "$VENV/bin/python" -m pip install --progress-bar off -c constraints-cpu.txt -e ".[$EXTRAS]" \
        | { grep -E '^(Collecting|Successfully installed)' | sed 's/^/[setup] pip: /' || true; }
    echo "[setup] installed in $(( $(date +%s) - started )) s"
    touch "$stamp"
fi
"$VENV/bin/python" -c "import torch, av, pyarrow, duckdb; print('[setup] ok: torch', torch.__version__, '| av', av.__version__)"
