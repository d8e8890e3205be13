"""The field fuzzer over everything a dataset, pack, mixture or checkpoint says about itself
(issue 48): every node of every such file is mutated (``tests/field_fuzz.py``) and must end in
one of our named errors at ``check``/``pack``/open/resume, or in samples equal to the honest
ones, within a memory bound, in a worker process (``tests/scripts/field_fuzz_worker.py``).

Two passes, both deterministic: a sweep that mutates every node of every target at least once
(kinds taken in turn, so each kind meets each shape of node), and hypothesis drawing further
(node, value) pairs with a fixed seed and budget. ``make fuzz`` runs the full product (every
node x every kind) and a longer hypothesis run, and keeps what it finds in
``tests/fuzz_regressions.json``, which this test replays. No wall-clock figure is asserted:
the output counts mutations per target.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.field_fuzz import (
    CROSS_KINDS,
    CROSS_TARGET,
    JSON_KINDS,
    TABLE_KINDS,
    TABLE_TARGETS,
    TARGETS,
    Mutation,
    full_product,
    sweep,
)
from tests.memory_probe import HOSTILE_PEAK_BYTES, limit_address_space

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = ROOT / "tests" / "fuzz_regressions.json"
# What one mutation's run may peak at in the worker (torch, pyarrow, PyAV and a tiny pack take
# ~450 MiB): an expansion a hostile field could cause is GiBs. The one budget of
# docs/SECURITY.md, also enforced as an address-space limit on the worker (RLIMIT_AS).
PEAK_LIMIT_KB = HOSTILE_PEAK_BYTES // 1024
HYPOTHESIS_EXAMPLES = int(os.environ.get("LEROBOT_SHARDS_FIELD_FUZZ_EXAMPLES", "60"))
# make fuzz: every node x every kind, and what fails is kept in the regressions file.
FULL = os.environ.get("LEROBOT_SHARDS_FIELD_FUZZ_FULL") == "1"
HANG_S = 600


def _seed() -> int:
    """Which kind each node meets in the sweep (``make test``): from the commit, so each commit
    covers another slice of node x kind; ``LEROBOT_SHARDS_FIELD_FUZZ_SEED`` reproduces a run
    (the session summary prints the seed)."""
    given = os.environ.get("LEROBOT_SHARDS_FIELD_FUZZ_SEED")
    if given:
        return int(given)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        head = ""
    return int(head[:8], 16) if head[:8].isalnum() and len(head) >= 8 else 0


SEED = _seed()


class Worker:
    """The worker process, one request at a time."""

    def __init__(self, workdir: Path):
        # The worker's warnings go to a file: a pipe nobody reads until the worker dies fills up
        # (64 KiB) and blocks the worker's next warning, which looked like a hang.
        self.stderr_path = workdir / "worker.stderr"
        self._stderr = open(self.stderr_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "scripts" / "field_fuzz_worker.py"), str(workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            preexec_fn=limit_address_space,
        )
        self.counts: Counter = Counter()
        self.outcomes: Counter = Counter()

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], HANG_S)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            self.process.wait(timeout=60)
            raise AssertionError(f"the worker died or hung on {request}:\n{self.stderr_path.read_text(errors='replace')[-4000:]}")
        return json.loads(line)

    def run(self, mutation: Mutation) -> dict:
        record = self.ask({"op": "run", "mutation": mutation.to_json()})
        self.counts[mutation.target if mutation.target != CROSS_TARGET else f"cross:{mutation.path[0]}"] += 1
        self.outcomes[record["outcome"]] += 1
        return record

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self._stderr.close()


def problem(record: dict, mutation: Mutation) -> str | None:
    """Why a mutation's run breaks the contract (a named error or equal samples, within the
    memory bound), or None."""
    if record["outcome"] not in ("error", "equal"):
        trace = record.get("trace", "").strip().splitlines()
        return f"{mutation.describe()}: {record['outcome']}: {record.get('error', '')[:300]}" + (
            f" (at {trace[-3].strip()[:200]})" if len(trace) >= 3 else ""
        )
    if record["outcome"] == "error" and record.get("error", "").startswith("ResourceLimitError"):
        # A limit of the worker's own (its address space, threads) is our budget, not a verdict
        # on the input: a hostile field must be refused before it costs that much, and an honest
        # re-encode must fit (x265 once hung here, then was refused for room).
        return f"{mutation.describe()}: the worker hit its own limit: {record['error'][:300]}"
    if record.get("peak_reset") is False:
        return f"{mutation.describe()}: the worker could not reset its peak (/proc/self/clear_refs), so no peak was measured"
    if record["peak_kb"] >= PEAK_LIMIT_KB:
        return f"{mutation.describe()}: peak {record['peak_kb'] / 1024:.0f} MiB"
    return None


def check(record: dict, mutation: Mutation) -> None:
    found = problem(record, mutation)
    assert found is None, f"{found} (LEROBOT_SHARDS_FIELD_FUZZ_SEED={SEED} reproduces)"


def run_all(worker: Worker, mutations: list[Mutation]) -> None:
    """Run every mutation; the failures are listed together (and, under make fuzz, kept as
    regression cases)."""
    failures = []
    for mutation in mutations:
        found = problem(worker.run(mutation), mutation)
        if found:
            failures.append((mutation, found))
    if failures and FULL:
        kept = json.loads(REGRESSIONS.read_text()) if REGRESSIONS.exists() else []
        known = {json.dumps(c, sort_keys=True) for c in kept}
        kept += [m.to_json() for m, _ in failures if json.dumps(m.to_json(), sort_keys=True) not in known]
        REGRESSIONS.write_text(json.dumps(kept, indent=1) + "\n")
    assert not failures, f"{len(failures)} of {len(mutations)} mutations broke the contract:\n" + "\n".join(
        f for _, f in failures[:10]
    )


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    process = Worker(tmp_path_factory.mktemp("field-fuzz"))
    yield process
    process.close()
    # Counted mutations per file type, for the session's summary (tests/conftest.py prints them;
    # no wall-clock figure is asserted).
    record = {"counts": dict(process.counts), "outcomes": dict(process.outcomes), "seed": SEED}
    (Path(os.environ["LEROBOT_SHARDS_FUZZ_COUNTS"]) / f"{os.getpid()}.json").write_text(json.dumps(record))


@pytest.fixture(scope="module")
def paths(worker) -> dict[str, list[tuple]]:
    return {target: [tuple(p) for p in found] for target, found in worker.ask({"op": "paths"})["paths"].items()}


@pytest.mark.parametrize("target", TARGETS)
def test_every_node_of_every_file_is_mutated_and_refused_by_name_or_read_equal(worker, paths, target):
    kinds = TABLE_KINDS if target in TABLE_TARGETS else JSON_KINDS
    if FULL:
        mutations = full_product(target, paths[target], kinds)
    else:
        mutations = sweep(target, paths[target], kinds, offset=TARGETS.index(target) + SEED)
    assert len(mutations) >= len(paths[target]) > 0
    run_all(worker, mutations)


def test_changes_across_files_read_as_lerobot_reads_them_or_are_refused_by_name(worker, paths):
    """Issue 54: a change made consistently across a source's files (rows against the video's
    frame times, a declared type against its column, the episodes table against the rows, the
    tasks file of each LeRobot release, stats against sense) must give what the LeRobot
    reference reads of the changed source (samples and ``meta.stats``), or a named error; every
    kind meets every place the worker lists, and the summary counts them per kind."""
    places = paths[CROSS_TARGET]
    assert {p[0] for p in places} == set(CROSS_KINDS)
    mutations = [Mutation(CROSS_TARGET, place, "cross") for place in places]
    run_all(worker, mutations)


def _values():
    """Values a hypothesis draw puts in a node's place: every JSON type, edge numbers included."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
        st.text(max_size=40),
    )
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=8
    )


@settings(
    max_examples=HYPOTHESIS_EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)
@given(data=st.data())
def test_hypothesis_draws_nodes_and_values(worker, paths, data):
    target = data.draw(st.sampled_from([t for t in TARGETS if t not in TABLE_TARGETS]), label="target")
    path = data.draw(st.sampled_from(paths[target]), label="path")
    mutation = Mutation(target, path, "value", value=data.draw(_values(), label="value"))
    check(worker.run(mutation), mutation)


def test_the_regressions_make_fuzz_found_stay_fixed(worker):
    cases = json.loads(REGRESSIONS.read_text()) if REGRESSIONS.exists() else []
    run_all(worker, [Mutation.from_json(case) for case in cases])
