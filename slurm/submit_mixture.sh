#!/bin/bash
# Submit a whole mixture: validate the sources file, one array task per dataset (split into
# arrays of at most MAX_ARRAY tasks), and the final `mixture create` job after all of them.
#
#   slurm/submit_mixture.sh sources.txt s3://bucket/mix [pack options, e.g. --video hevc]
#
# Environment: THROTTLE (max tasks running at once, default 64), MAX_ARRAY (default 1000,
# keep below the cluster's MaxArraySize), SBATCH_ARGS (extra sbatch options for the array,
# word-split, e.g. "--partition=cpu --time=04:00:00"), MIXTURE_CREATE_ARGS (options of the final
# `mixture create`, word-split, e.g. "--allow-partial" to write the mixture without the datasets
# that failed: without it the final job fails and writes nothing when any is left out), PYTHON, VIDEO.
# Prints the array job ids and the final job id.
set -euo pipefail
if (( $# < 2 )); then
    echo "usage: $0 SOURCES_FILE DST [pack options...]" >&2
    exit 2
fi
SOURCES=$1
DST=$2
shift 2
PYTHON=${PYTHON:-.venv/bin/python}
THROTTLE=${THROTTLE:-64}
MAX_ARRAY=${MAX_ARRAY:-1000}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
n=$("$PYTHON" -m lerobot_shards mixture sources --count "$SOURCES")   # exits 2 with line numbers on a bad file
if (( n == 0 )); then
    echo "$SOURCES lists no dataset" >&2
    exit 2
fi
mkdir -p logs
export SOURCES DST PYTHON
jobs=()
for (( offset = 0; offset < n; offset += MAX_ARRAY )); do
    last=$(( n - offset < MAX_ARRAY ? n - offset - 1 : MAX_ARRAY - 1 ))
    # shellcheck disable=SC2086  # SBATCH_ARGS is word-split on purpose
    jid=$(INDEX_OFFSET=$offset sbatch --parsable ${SBATCH_ARGS:-} --array="0-${last}%${THROTTLE}" \
        "$here/pack_mixture.sbatch" "$@")
    jobs+=("${jid%%;*}")
    echo "array $((offset))..$((offset + last)): job ${jid%%;*}"
done
deps=$(IFS=:; echo "${jobs[*]}")
# The final job reads DST too: give it the same --storage-options as the packs.
create_args=()
args=("$@")
for (( i = 0; i < ${#args[@]}; i++ )); do
    case "${args[i]}" in
        --storage-options) create_args+=(--storage-options "${args[i + 1]:-}") ;;
        --storage-options=*) create_args+=("${args[i]}") ;;
    esac
done
# shellcheck disable=SC2206  # MIXTURE_CREATE_ARGS is word-split on purpose
create_args+=(${MIXTURE_CREATE_ARGS:-})
final=$(sbatch --parsable --dependency="afterany:${deps}" "$here/mixture_create.sbatch" ${create_args[@]+"${create_args[@]}"})
echo "mixture create: job ${final%%;*} (after ${deps})"
