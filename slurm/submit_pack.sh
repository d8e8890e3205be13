#!/bin/bash
# Submit one dataset as PARTS array tasks plus the dependent finalize job.
#
#   slurm/submit_pack.sh SRC DST PARTS [pack options...]           # SRC: path or URL
#   REPO_ID=org/name [REVISION=v1] slurm/submit_pack.sh - DST PARTS [pack options...]
#
# Environment: SBATCH_ARGS (extra sbatch options, word-split), PYTHON, VIDEO.
set -euo pipefail
if (( $# < 3 )); then
    echo "usage: $0 SRC|- DST PARTS [pack options...]" >&2
    exit 2
fi
if [[ "$1" != "-" ]]; then export SRC=$1; fi
export DST=$2
PARTS=$3
shift 3
if ! [[ "$PARTS" =~ ^[1-9][0-9]*$ ]]; then
    echo "PARTS must be a positive integer, got '$PARTS'" >&2
    exit 2
fi
export PARTS
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p logs
# shellcheck disable=SC2086
jid=$(sbatch --parsable ${SBATCH_ARGS:-} --array="0-$((PARTS - 1))" "$here/pack.sbatch" "$@")
jid=${jid%%;*}
echo "pack array: job $jid ($PARTS parts)"
final=$(sbatch --parsable --dependency="afterok:${jid}" "$here/finalize.sbatch")
echo "finalize: job ${final%%;*} (afterok:${jid})"
