"""A real single-node Slurm cluster for tests: Debian's Slurm 22.05 daemons (munged, mariadbd + slurmdbd for
accounting, slurmctld, slurmd) on this machine, configured in a private temp folder, so sbatch / squeue / scancel /
srun / sacct and submitit (which shells out to them) run jobs for real.

Typical use (pytest: the session fixture `slurm_cluster`, registered in tests/conftest.py):

    def test_x(slurm_cluster, tmp_path):
        job_id = slurm_cluster.sbatch("--wrap", "hostname", "--output", str(tmp_path / "out.txt"))
        assert slurm_cluster.wait(job_id) == "COMPLETED"

or without pytest:

    with running_cluster() as cluster:      # SlurmUnavailable: cannot install; SlurmStartError: did not start
        ...

What it does: installs slurm-wlm + munge (and slurmdbd + mariadb-server for accounting) with apt-get when a binary
is missing (root only; `apt-get update` only when the install fails without it), writes a munge key and socket,
slurm.conf, slurmdbd.conf, a MariaDB data folder, state and spool folders, pid and log files under one temp folder,
picks free ports, starts the daemons in the foreground (their own pids, nothing daemonizes), waits until `sinfo`
shows the node idle, and sets SLURM_CONF (and SLURM_TEST_CLUSTER, a marker) in os.environ, which every Slurm
command and every job inherits. At the end: cancels the jobs left, stops the daemons (SIGTERM, then SIGKILL), kills
any process that still carries the marker (slurmstepd, job steps), puts os.environ back and removes the temp folder.

Accounting is real (slurmdbd on a throwaway MariaDB started with --skip-grant-tables on 127.0.0.1): sacct works, so
submitit's job.state / job.done() see PENDING, RUNNING, COMPLETED, CANCELLED, FAILED as on a production cluster (a
job that dies without a result pickle is seen as done). SlurmCluster(accounting=False) runs without it (sacct then
fails, submitit's job.state stays "UNKNOWN" and job.result() of a cancelled job waits forever).

Also here: module-level functions for submitit jobs (`square`, `CountStarts`), importable by a job's fresh python
(tests/ is a package; `job_setup()` gives the sbatch setup lines that put the repo on its sys.path).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("slurm-wlm", "munge")
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server")
DAEMONS = ("munged", "slurmctld", "slurmd")
ACCOUNTING_DAEMONS = ("mariadbd", "slurmdbd")
COMMANDS = ("sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo", "sacct", "sacctmgr")
SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
MARKER = "SLURM_TEST_CLUSTER"  # in the environment of the daemons and of every job: what teardown sweeps
CLUSTER_NAME = "interptest"
PARTITION = "debug"
START_TIMEOUT = 180.0  # hang guard only: a cold start takes a few seconds
ROOT_PREFIX = "slurm-test-"  # the temp folders: tempfile.gettempdir()/slurm-test-*
KEEP_FILE = "KEEP"  # in a root kept with SLURM_TEST_KEEP: sweep_orphans() leaves it


class SlurmUnavailable(RuntimeError):
    """Slurm is not installed and cannot be (not root, no apt-get, apt-get failed: no network); str() is the
    reason. The fixture skips on it."""


class SlurmStartError(RuntimeError):
    """Slurm is installed but the cluster did not come up (a daemon died, or a step passed the timeout); the message
    holds the daemons' log tails. The fixture lets it error: a broken harness must not pass as a skip."""


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


def ensure_installed(accounting: bool = True) -> None:
    """Install slurm-wlm and munge (and, with `accounting`, slurmdbd and mariadb-server) with apt-get if one of
    their daemons or client commands is missing. Raises SlurmUnavailable with the reason (not root, no apt-get, no
    network)."""
    packages = (*PACKAGES, *ACCOUNTING_PACKAGES) if accounting else PACKAGES
    binaries = (*DAEMONS, *COMMANDS, *(ACCOUNTING_DAEMONS if accounting else ()))
    missing = [b for b in binaries if _which(b) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(missing)} missing) and installing it needs root")
    if _which("apt-get") is None:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(missing)} missing) and there is no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=300"]  # another apt-get (a parallel test session) holds the lock: wait
    install = ["apt-get", *lock, "install", "-y", "--no-install-recommends", *packages]

    def apt(argv: list[str]) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(argv, 1, "", f"{' '.join(argv)}: no answer after {e.timeout:.0f} s")

    out = apt(install)
    if out.returncode != 0:  # stale or empty package lists: update them, once, and try again
        update = apt(["apt-get", *lock, "update"])
        out = apt(install)
        if out.returncode != 0:
            tail = (update.stderr + out.stdout + out.stderr).strip().splitlines()[-5:]
            raise SlurmUnavailable(f"apt-get install {' '.join(packages)} failed: " + " | ".join(tail))
    missing = [b for b in binaries if _which(b) is None]
    if missing:
        raise SlurmUnavailable(f"apt-get installed {' '.join(packages)} but {', '.join(missing)} still missing")


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports (bound on all addresses, then released; the daemons bind them a moment later)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _node_hardware() -> dict[str, str]:
    """`slurmd -C`'s NodeName line as a dict: CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore,
    RealMemory (the machine's real values; a node configured with more than it has is drained)."""
    out = subprocess.run([_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "SLURM_CONF"})
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("NodeName=")), None)
    if line is None:
        raise SlurmStartError(f"slurmd -C printed no NodeName line: {out.stdout!r} {out.stderr!r}")
    return dict(kv.split("=", 1) for kv in line.split())


def _listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def parse_scontrol(line: str) -> dict[str, str]:
    """One `scontrol -o show job` line as a dict. Values may hold spaces (Reason=..., Command=...): a field starts
    where a space is followed by Key=."""
    fields = re.split(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)", line.strip())
    return dict(f.split("=", 1) for f in fields if "=" in f)


class SlurmCluster:
    """One Slurm cluster with one node (this machine, all its CPUs and memory) and one partition.

    Attributes (read them, do not set them):
      root        the temp folder holding everything (slurm.conf, slurmdbd.conf, munge/, mysql/, state/, spool/,
                  one <daemon>.log and <daemon>.stdout per daemon)
      conf        root/slurm.conf: the SLURM_CONF of every command and job
      partition   "debug" (Default=YES, MaxTime=INFINITE)
      cluster_name "interptest"
      node        the node's name (this machine's short hostname)
      cpus        the node's CPUs; memory_mb: its RealMemory (both from `slurmd -C`)
      accounting  whether slurmdbd runs (sacct works)
      ports       {"slurmctld": port, "slurmd": port[, "slurmdbd": port, "mariadbd": port]}
      env         the variables running_cluster() puts in os.environ: SLURM_CONF and the teardown marker
      logs        {daemon: log path}
      start_seconds  how long start() took (config, daemons, node idle)
    """

    def __init__(self, root: Path, partition: str = PARTITION, accounting: bool = True):
        self.root = Path(root)
        self.partition = partition
        self.cluster_name = CLUSTER_NAME
        self.accounting = accounting
        self.conf = self.root / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]
        self.cpus = 0
        self.memory_mb = 0
        self.ports: dict[str, int] = {}
        self.env = {"SLURM_CONF": str(self.conf), MARKER: str(self.root)}
        daemons = (*DAEMONS, *ACCOUNTING_DAEMONS) if accounting else DAEMONS
        self.logs = {d: self.root / f"{d}.log" for d in daemons}
        self.start_seconds = 0.0
        self._procs: dict[str, subprocess.Popen] = {}

    # ------------------------------------------------------------------ lifecycle
    def write_config(self) -> None:
        """Write slurm.conf (and slurmdbd.conf), the munge key and the folders under root; pick the ports."""
        hw = _node_hardware()
        self.cpus, self.memory_mb = int(hw["CPUs"]), int(hw["RealMemory"])
        names = ("slurmctld", "slurmd", *(("slurmdbd", "mariadbd") if self.accounting else ()))
        self.ports = dict(zip(names, _free_ports(len(names))))
        for sub in ("munge", "state", "spool", *(("mysql",) if self.accounting else ())):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # munged: the socket's folders must be executable by all
        (self.root / "munge").chmod(0o755)
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o600)
        hardware = " ".join(f"{k}={hw[k]}" for k in
                            ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
                            if k in hw)
        r, p = self.root, self.ports
        if self.accounting:
            # AccountingStoragePass: the munge socket the clients (sacct, sacctmgr, slurmctld) use towards slurmdbd
            accounting = (f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
                          f"AccountingStoragePort={p['slurmdbd']}\nAccountingStoragePass={r}/munge/munge.socket\n"
                          f"JobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=30")
            dbd = self.root / "slurmdbd.conf"  # slurmdbd reads it from SLURM_CONF's folder; it must be mode 600
            dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={r}/munge/munge.socket
DbdHost={self.node}
DbdAddr=127.0.0.1
DbdPort={p['slurmdbd']}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={p['mariadbd']}
StorageUser=root
StorageLoc=slurm_acct_db
PidFile={r}/slurmdbd.pid
LogFile={self.logs['slurmdbd']}
DebugLevel=info
""")
            dbd.chmod(0o600)
        else:
            accounting = "AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none"
        self.conf.write_text(f"""\
# single-node test cluster (tests/slurm.py)
ClusterName={self.cluster_name}
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={p['slurmctld']}
SlurmdPort={p['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.socket
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={self.logs['slurmctld']}
SlurmdLogFile={self.logs['slurmd']}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start a submitted batch job at the next 1 s tick (default: batch jobs may wait 3 s), and a job whose BeginTime
# passed within 1 s (default: the backfill pass every 30 s, see release_requeued)
SchedulerParameters=batch_sched_delay=0,bf_interval=1
MpiDefault=none
ReturnToService=2
JobRequeue=1
{accounting}
JobCompType=jobcomp/none
# short timeouts: a cancelled or requeued job is SIGKILLed 2 s after its SIGTERM; finished jobs stay in
# `scontrol show job` for 300 s (MinJobAge)
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=10
KillWait=2
InactiveLimit=0
MinJobAge=300
Waittime=0
MaxArraySize=1001
NodeName={self.node} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")

    def start(self, timeout: float = START_TIMEOUT) -> SlurmCluster:
        """Write the config; start munged, (mariadbd, slurmdbd, register the cluster,) slurmctld and slurmd; wait
        until the node is idle. Raises SlurmStartError (with the daemons' log tails) when a daemon dies or a step
        is not done by `timeout` (all steps together), after stopping what it started."""
        t0 = time.monotonic()

        def left() -> float:
            return timeout - (time.monotonic() - t0)

        self.write_config()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env.update(self.env)
        munge, r = self.root / "munge", self.root
        try:
            self._spawn("munged", [_which("munged"), "-F", f"--key-file={munge}/munge.key",
                                   f"--socket={munge}/munge.socket", f"--pid-file={munge}/munged.pid",
                                   f"--seed-file={munge}/munged.seed", f"--log-file={self.logs['munged']}"], env)
            self._wait_for(lambda: (munge / "munge.socket").exists(), left(), "munged's socket")
            if self.accounting:
                # a throwaway MariaDB: empty data folder, no grant tables (any user, no password), small InnoDB files
                self._spawn("mariadbd", [
                    _which("mariadbd"), "--no-defaults", f"--datadir={r}/mysql", "--user=root", "--skip-grant-tables",
                    "--bind-address=127.0.0.1", f"--port={self.ports['mariadbd']}", f"--socket={r}/mysql/mysqld.sock",
                    f"--pid-file={r}/mariadbd.pid", f"--log-error={self.logs['mariadbd']}", "--skip-log-bin",
                    "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=4M", "--innodb-lock-wait-timeout=900",
                    "--innodb-data-file-path=ibdata1:4M:autoextend",
                    "--innodb-temp-data-file-path=ibtmp1:4M:autoextend"], env)
                self._wait_for(lambda: _listening(self.ports["mariadbd"]), left(), "mariadbd's port")
                self._spawn("slurmdbd", [_which("slurmdbd"), "-D"], env)
                self._wait_for(lambda: _listening(self.ports["slurmdbd"]), left(), "slurmdbd's port")
                self._wait_for(self._register_cluster, left(), f"cluster {self.cluster_name} in slurmdbd")
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i"], env)  # -i: ignore (no) saved state
            self._spawn("slurmd", [_which("slurmd"), "-D", "-N", self.node], env)
            self._wait_for(lambda: self.node_state() == "idle", left(), "the node idle")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _register_cluster(self) -> bool:
        out = self.run("sacctmgr", "-i", "add", "cluster", self.cluster_name, check=False, timeout=30)
        return out.returncode == 0 or "already exists" in out.stdout + out.stderr

    def _spawn(self, name: str, argv: list, env: dict[str, str]) -> None:
        out = open(self.root / f"{name}.stdout", "ab")
        try:
            self._procs[name] = subprocess.Popen([str(a) for a in argv], env=env, stdout=out, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.root,
                                                 preexec_fn=_die_with_parent)
        finally:
            out.close()

    def _wait_for(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = {n: p.returncode for n, p in self._procs.items() if p.poll() is not None}
            if dead:
                raise SlurmStartError(f"{', '.join(dead)} exited ({dead}) while waiting for {what}\n{self.log_tails()}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise SlurmStartError(f"no {what} after {timeout:.0f} s\n{self.log_tails()}")
            time.sleep(0.2)

    def log_tails(self, lines: int = 15) -> str:
        """The last lines of each daemon's log (and stdout), for error messages."""
        out = []
        for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.stdout")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self) -> None:
        """Cancel every job, stop the daemons (SIGTERM, then SIGKILL after 10 s) and kill what still carries this
        cluster's marker (slurmstepd, job processes). Safe to call twice."""
        if self._procs.get("slurmctld") and self._procs["slurmctld"].poll() is None:
            with contextlib.suppress(Exception):
                self.cancel_all(wait=15)
        for name in reversed(list(self._procs)):  # the reverse of the start order: slurmd first, munged last
            proc = self._procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self._procs.clear()
        self.kill_leftovers()

    def leftovers(self) -> list[int]:
        """Pids of processes (not this one) whose environment carries this cluster's marker."""
        return [pid for pid, root, _ in _marked_processes() if root == str(self.root)]

    def kill_leftovers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.leftovers()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 5
            while pids and time.monotonic() < deadline:
                time.sleep(0.1)
                pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
            if not pids:
                return

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ commands
    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a Slurm command (sbatch, squeue, scontrol, ...) against this cluster; text output."""
        env = {**os.environ, **self.env}
        out = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
        return out

    def sbatch(self, *args: str) -> str:
        """sbatch --parsable ARGS... -> the job id ("123"; an array's base id)."""
        return self.run("sbatch", "--parsable", *args).stdout.strip().split(";")[0]

    def node_state(self) -> str:
        """sinfo's state of the node ("idle", "mixed", "allocated", "down*", ...), "" when slurmctld does not
        answer yet."""
        out = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", check=False, timeout=30)
        return out.stdout.strip() if out.returncode == 0 else ""

    def squeue(self, *args: str) -> list[dict[str, str]]:
        """Jobs still queued or running (squeue: pending, running, completing): [{"id", "array_id", "task",
        "state", "reason", "name"}], array tasks one by one (-r). Extra args filter (e.g. "-j", "12")."""
        fmt = "%i|%F|%K|%T|%r|%j"
        out = self.run("squeue", "-h", "-r", "-o", fmt, *args).stdout
        keys = ("id", "array_id", "task", "state", "reason", "name")
        return [dict(zip(keys, line.split("|", 5))) for line in out.splitlines() if line.strip()]

    def jobs(self, job_id: str | int | None = None) -> list[dict[str, str]]:
        """`scontrol -o show job [ID]`, one dict per job or array task (JobId, ArrayJobId, ArrayTaskId, JobState,
        Reason, ExitCode, Restarts, StdOut, ...): queued, running and finished jobs (for MinJobAge = 300 s).
        An unknown id gives []."""
        argv = ["scontrol", "-o", "show", "job"] + ([str(job_id)] if job_id is not None else [])
        out = self.run(*argv, check=False)
        if out.returncode != 0:
            if "Invalid job id" in out.stderr:
                return []
            raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
        return [parse_scontrol(line) for line in out.stdout.splitlines() if "JobId=" in line]

    def sacct(self, job_id: str | int, fields: str = "JobID,JobName,State,ExitCode,NodeList,Submit,Start,End"
              ) -> list[dict[str, str]]:
        """`sacct -X -P -j ID -o FIELDS` (accounting only): one dict per job allocation or array task (-X: no
        .batch/.0 step lines), keys as `fields`. A job shows here a moment after slurmctld sends its record (it
        may lag a running job's state by a second or two); [] when slurmdbd has none yet."""
        if not self.accounting:
            raise RuntimeError("this cluster runs without accounting (SlurmCluster(accounting=False)): no sacct")
        out = self.run("sacct", "-X", "-P", "-n", "-j", str(job_id), "-o", fields).stdout
        keys = fields.split(",")
        return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line.strip()]

    def state(self, job_id: str | int) -> str:
        """The JobState of a job ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", ...); of an array:
        its tasks' states joined with "," when they differ. "" when slurmctld does not know the id."""
        states = sorted({j["JobState"] for j in self.jobs(job_id)})
        return ",".join(states)

    def wait(self, job_id: str | int, timeout: float = 120,
             final: tuple[str, ...] = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                                       "BOOT_FAIL", "DEADLINE", "PREEMPTED")) -> str:
        """Poll until every task of the job is in a final state; return the state (see state()). Raises
        TimeoutError with the job's record after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs(job_id)
            if jobs and all(j["JobState"] in final for j in jobs):
                return ",".join(sorted({j["JobState"] for j in jobs}))
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout} s: {jobs}")
            time.sleep(0.25)

    def release_requeued(self) -> list[str]:
        """Make requeued jobs eligible in 2 s: Slurm holds a requeued batch job PENDING with Reason=BeginTime for
        ~120 s (its BeginTime is set ahead, as on any cluster); `scontrol update JobId=.. StartTime=now+2` for
        each such job (Restarts > 0). Not `now`: slurmd revokes the killed run's credential and compares whole
        seconds, so a run started within the same second is refused ("Job credential revoked") and the job FAILS.
        Returns the ids released (array tasks as "12_0"); call it while waiting for a requeue."""
        released = []
        for job in self.squeue("-t", "PENDING"):
            if job["reason"] != "BeginTime":
                continue
            (record,) = self.jobs(job["id"]) or [{}]
            try:  # once per requeue: not again while it waits out the 2 s
                wait = (datetime.fromisoformat(record["EligibleTime"]) - datetime.now()).total_seconds()
            except (KeyError, ValueError):
                wait = 0.0
            if record.get("Restarts", "0") != "0" and wait > 3:
                out = self.run("scontrol", "update", f"JobId={job['id']}", "StartTime=now+2", check=False)
                if out.returncode == 0:
                    released.append(job["id"])
        return released

    def cancel_all(self, wait: float = 15) -> None:
        """scancel every job of the partition, SIGKILL their processes (batch scripts included: no KillWait
        grace) and wait (up to `wait` s) until squeue shows none."""
        self.run("scancel", "-p", self.partition, check=False)
        self.run("scancel", "--full", "--signal=KILL", "-p", self.partition, check=False)
        deadline = time.monotonic() + wait
        while self.squeue() and time.monotonic() < deadline:
            time.sleep(0.2)

    def job_setup(self) -> list[str]:
        """Lines for submitit's slurm_setup: make the repo (tests.slurm's functions) importable in the job."""
        return [f'export PYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}"']


def _die_with_parent() -> None:
    """In a daemon's child process before exec: SIGTERM it when the test process dies (even by SIGKILL, when
    stop() never runs). Linux prctl(PR_SET_PDEATHSIG); a no-op where it is missing."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _marked_processes() -> Iterator[tuple[int, str, dict[bytes, bytes]]]:
    """(pid, marker value = a cluster's root, environment) of every process carrying MARKER, but this one."""
    me, key = os.getpid(), MARKER.encode() + b"="
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if key not in environ:
            continue
        env = dict(kv.split(b"=", 1) for kv in environ.split(b"\0") if b"=" in kv)
        if MARKER.encode() in env:
            yield int(entry.name), env[MARKER.encode()].decode(errors="replace"), env


def _alive(pid_file: Path, name: str) -> bool:
    try:
        pid = int(pid_file.read_text().split()[0])
        return name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError, IndexError):
        return False


def sweep_orphans() -> list[int]:
    """What a test process killed outright (SIGKILL: stop() never ran) left behind: its daemons die with it
    (PR_SET_PDEATHSIG) but not its running jobs, nor its temp folder. Kills (SIGKILL) the job processes and
    slurmstepd of clusters whose slurmctld is gone, and removes their /tmp/slurm-test-* folders when nothing
    refers to them any more (not younger than 60 s, not kept with SLURM_TEST_KEEP). A cluster that is up (another
    test session) is left alone. Returns the pids killed."""
    killed, roots_in_use = [], set()
    for pid, root, env in list(_marked_processes()):
        job_process = b"SLURM_JOB_ID" in env or _comm(pid).startswith("slurmstepd")
        if job_process and not _alive(Path(root) / "slurmctld.pid", "slurmctld"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        else:
            roots_in_use.add(root)
    for root in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*"):
        with contextlib.suppress(OSError):
            if (str(root) not in roots_in_use and not (root / KEEP_FILE).exists()
                    and time.time() - root.stat().st_mtime > 60 and not _alive(root / "slurmctld.pid", "slurmctld")):
                shutil.rmtree(root, ignore_errors=True)
    return killed


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@contextlib.contextmanager
def running_cluster(root: Path | None = None, timeout: float = START_TIMEOUT, accounting: bool = True
                    ) -> Iterator[SlurmCluster]:
    """Install (if needed) and start a cluster, with its SLURM_CONF and marker in os.environ, inherited SLURM_*
    variables (e.g. of an enclosing real Slurm job) removed; stop it and restore os.environ after. `root`: an empty
    folder (default: a new temp folder /tmp/slurm-test-*, removed after unless SLURM_TEST_KEEP is set). Raises
    SlurmUnavailable (cannot install) or SlurmStartError (installed, did not come up)."""
    ensure_installed(accounting)
    sweep_orphans()
    own = root is None
    root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX)) if own else Path(root)
    saved = dict(os.environ)
    cluster = SlurmCluster(root, accounting=accounting)
    try:
        cluster.start(timeout)
        for key in [k for k in os.environ if k.startswith("SLURM_")]:
            del os.environ[key]
        os.environ.update(cluster.env)
        yield cluster
    finally:
        cluster.stop()
        os.environ.clear()
        os.environ.update(saved)
        if own and os.environ.get("SLURM_TEST_KEEP"):  # SLURM_TEST_KEEP=1: keep the logs, to debug
            (root / KEEP_FILE).touch()
        elif own:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running SlurmCluster for the whole session (see the class), SLURM_CONF set in os.environ meanwhile. Skips
    the test with the reason when Slurm cannot be installed here (not root, apt-get without network); errors
    (SlurmStartError, with the daemons' logs) when it is installed but does not come up."""
    try:
        with running_cluster() as cluster:
            yield cluster
    except SlurmUnavailable as e:
        pytest.skip(f"no Slurm cluster: {e}")


# ---------------------------------------------------------------------------------------- functions for jobs

def square(x: int) -> int:
    """A submitit task: x * x."""
    return x * x


class CountStarts:
    """A checkpointable submitit task (the protocol of submitit.helpers.Checkpointable: a `checkpoint` method
    returning the DelayedSubmission to requeue). Each start appends "SLURM_JOB_ID SLURM_RESTART_COUNT checkpoints"
    to `marker`; the first start sleeps `first_sleep_s` (to be interrupted), a later one returns the number of
    starts. checkpoint() hands over a copy with checkpoints + 1, so the marker shows which object ran."""

    def __init__(self, marker: str, first_sleep_s: float = 300.0, checkpoints: int = 0):
        self.marker, self.first_sleep_s, self.checkpoints = marker, first_sleep_s, checkpoints

    def __call__(self) -> int:
        with open(self.marker, "a") as f:
            f.write(f"{os.environ.get('SLURM_JOB_ID')} {os.environ.get('SLURM_RESTART_COUNT', '0')} "
                    f"{self.checkpoints}\n")
        starts = len(Path(self.marker).read_text().splitlines())
        if starts == 1:
            time.sleep(self.first_sleep_s)
        return starts

    def checkpoint(self, *args, **kwargs):
        import submitit

        return submitit.helpers.DelayedSubmission(CountStarts(self.marker, self.first_sleep_s, self.checkpoints + 1),
                                                  *args, **kwargs)
