"""A throwaway single-node SLURM cluster for tests: Debian's slurm-wlm and munge, as root.

``SlurmCluster(root).start()`` writes a private ``slurm.conf`` (free loopback ports, state and
logs under ``root``, ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``), starts
its own ``munged`` on a private socket and key, then ``slurmctld`` and ``slurmd``, and waits
until the node is idle. Commands run with ``cluster.env`` (``SLURM_CONF``) so they talk to this
cluster only. ``stop()`` cancels every job and stops the daemons. ``skip_reason()`` says why a
machine cannot run one (not root, packages missing): ``scripts/setup_env.sh`` installs them
when it runs as root, as CI does.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.loopback import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def skip_reason() -> str | None:
    """Why this machine cannot run a test cluster, or None."""
    if os.geteuid() != 0:
        return "a test SLURM cluster runs its daemons as root (CI is root)"
    missing = [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]
    if missing:
        return f"SLURM/munge not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
    if not Path("/etc/munge/munge.key").exists() and shutil.which("mungekey") is None:
        return "no munge key and no mungekey to make one"
    return None


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmCluster:
    """One controller and one node (``CPUS`` CPUs) on 127.0.0.1, all state under ``root``."""

    CPUS = 2
    MEMORY_MB = 8000

    def __init__(self, root: Path):
        self.root = Path(root)
        self.node = "lstest-node"
        self.host = socket.gethostname().split(".")[0]
        self.env = {**os.environ, "SLURM_CONF": str(self.root / "slurm.conf")}
        for name in ("SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_JOB_ID"):
            self.env.pop(name, None)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> SlurmCluster:
        for sub in ("state", "spool", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        munge = self.root / "munge"
        munge.chmod(0o755)
        key = munge / "munge.key"
        if Path("/etc/munge/munge.key").exists():
            shutil.copy("/etc/munge/munge.key", key)
        else:
            subprocess.run([_binary("mungekey"), "--create", f"--keyfile={key}"], check=True)
        key.chmod(0o600)
        subprocess.run(
            [
                _binary("munged"),
                "--force",
                f"--socket={munge / 'sock'}",
                f"--key-file={key}",
                f"--log-file={munge / 'log'}",
                f"--pid-file={munge / 'pid'}",
                f"--seed-file={munge / 'seed'}",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        self._write_conf()
        conf = str(self.root / "slurm.conf")
        subprocess.run([_binary("slurmctld"), "-f", conf, "-i"], check=True, env=self.env, timeout=60)
        subprocess.run([_binary("slurmd"), "-f", conf, "-N", self.node], check=True, env=self.env, timeout=60)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run(["sinfo", "-h", "-n", self.node, "-o", "%T"], check=False).stdout.strip()
            if state.startswith("idle"):
                return self
            time.sleep(0.5)
        raise RuntimeError(f"the test cluster's node did not come up ({state!r}); logs in {self.root}")

    def _write_conf(self) -> None:
        root = self.root
        (root / "slurm.conf").write_text(f"""\
ClusterName=lerobotshards
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root / "munge" / "sock"}
CredType=cred/munge
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "slurmctld.log"}
SlurmdLogFile={root / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerParameters=sched_interval=1
ReturnToService=2
MpiDefault=none
MaxArraySize=1001
MinJobAge=3600
KillWait=5
MessageTimeout=20
NodeName={self.node} NodeHostname={self.host} NodeAddr=127.0.0.1 CPUs={self.CPUS} RealMemory={self.MEMORY_MB} State=UNKNOWN
PartitionName=test Nodes={self.node} Default=YES MaxTime=60 State=UP
""")

    def stop(self) -> None:
        self.run(["scancel", "--full", "--user=root"], check=False)
        # Jobs outliving the daemons would keep the machine's cores busy for the next tests.
        deadline = time.monotonic() + 60
        while self.run(["squeue", "-h"], check=False).stdout.strip() and time.monotonic() < deadline:
            time.sleep(1)
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/pid"):
            path = self.root / pid_file
            try:
                os.kill(int(path.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass

    # -- jobs -------------------------------------------------------------------------------
    def run(
        self, args: list[str], *, check: bool = True, cwd: Path | None = None, env: dict | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        """Run a command against this cluster (``SLURM_CONF`` set), text output captured."""
        return subprocess.run(
            args, capture_output=True, text=True, check=check, cwd=cwd, timeout=timeout, env={**self.env, **(env or {})}
        )

    def states(self, job: str, *, reasons: dict[str, str] | None = None) -> dict[str, str]:
        """``{job or array task id: state}`` of every task of ``job``; the controller's reason
        for each goes into ``reasons`` when given."""
        out = self.run(["scontrol", "-o", "show", "job", job], check=False).stdout
        states = {}
        for line in out.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            task = fields.get("ArrayTaskId")
            name = f"{fields['JobId']}" if task is None else f"{fields.get('ArrayJobId')}_{task}"
            states[name] = fields.get("JobState", "?")
            if reasons is not None:
                reasons[name] = fields.get("Reason", "")
        return states

    def wait(self, jobs: list[str], timeout: float = 900) -> dict[str, str]:
        """Wait (bounded) until every task of ``jobs`` has finished; return their states.

        Raises:
            TimeoutError: some task still pending or running after ``timeout`` seconds
                (names them, with the controller's reason).
            RuntimeError: at once, a task that can never start because a job it depends on
                failed (``DependencyNeverSatisfied``): waiting would only burn the timeout.
        """
        deadline = time.monotonic() + timeout
        while True:
            states: dict[str, str] = {}
            reasons: dict[str, str] = {}
            for job in jobs:
                states.update(self.states(job, reasons=reasons))
            if states and all(state in FINISHED for state in states.values()):
                return states
            stuck = [
                name for name, state in states.items() if state == "PENDING" and reasons.get(name) == "DependencyNeverSatisfied"
            ]
            if stuck:
                raise RuntimeError(f"{stuck} can never start: a job they depend on failed; states: {states}")
            if time.monotonic() > deadline:
                queue = self.run(["squeue", "-h", "-o", "%i %T %r"], check=False).stdout
                raise TimeoutError(f"jobs still running after {timeout:.0f} s: {queue}")
            time.sleep(1)
