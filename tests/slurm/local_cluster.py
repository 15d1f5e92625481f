#!/usr/bin/env python3
"""A single-node Slurm cluster in a folder, for tests and for trying `shellsim sweep --slurm`.

Starts munged, slurmctld and slurmd from the Debian packages (slurm-wlm, munge) as the
current user (root: slurmd runs jobs as their submitter), without systemd: a fresh munge key,
the configuration, state, logs and sockets all in FOLDER, the daemons on free loopback ports.
Stops exactly the processes it started, by the process ids they wrote.

    python3 tests/slurm/local_cluster.py start FOLDER    # prints: export SLURM_CONF=...
    SLURM_CONF=FOLDER/slurm.conf sbatch ...
    python3 tests/slurm/local_cluster.py stop FOLDER

From Python: `with LocalCluster(folder) as cluster: cluster.run("sbatch", ...)`.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

DAEMONS = ("munged", "slurmctld", "slurmd")


def missing_programs():
    """The programs a cluster needs that are not installed (scripts/install-deps.sh has them)."""
    needed = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")
    paths = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in needed if shutil.which(p, path=paths) is None]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    def __init__(self, folder, cpus=None):
        self.folder = os.path.abspath(folder)
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = os.path.join(self.folder, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.env["PATH"] = self.env.get("PATH", "") + ":/usr/sbin:/sbin"
        self.host = socket.gethostname().split(".")[0]

    def path(self, *names):
        return os.path.join(self.folder, *names)

    def run(self, *args, check=True, timeout=60):
        """Runs a Slurm command against this cluster; returns its stdout."""
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def start(self, timeout=60):
        for sub in ("munge", "state", "spool", "log"):
            os.makedirs(self.path(sub), mode=0o700, exist_ok=True)
        os.chmod(self.folder, 0o755)  # job steps (as root here) read the configuration
        key = self.path("munge", "munge.key")
        if not os.path.exists(key):
            with open(key, "wb") as f:
                f.write(os.urandom(1024))
            os.chmod(key, 0o400)
        socket_path = self.path("munge", "munge.socket")
        subprocess.run(["munged", "--force", f"--key-file={key}", f"--socket={socket_path}",
                        f"--pid-file={self.path('munge', 'munged.pid')}",
                        f"--log-file={self.path('log', 'munged.log')}",
                        f"--seed-file={self.path('munge', 'munged.seed')}"],
                       env=self.env, check=True, capture_output=True, timeout=timeout)
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        ctld_port, node_port = free_port(), free_port()
        config = f"""# A single-node cluster for tests (tests/slurm/local_cluster.py).
ClusterName=shellsimtest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={node_port}
AuthType=auth/munge
# cred_expire: also how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket={socket_path},cred_expire=5
CryptoType=crypto/munge
SlurmUser={user}
SlurmdUser={user}
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd.pid')}
SlurmctldLogFile={self.path('log', 'slurmctld.log')}
SlurmdLogFile={self.path('log', 'slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
ReturnToService=2
MpiDefault=none
KillWait=5
MinJobAge=600
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(config)
        subprocess.run(["slurmctld", "-i"], env=self.env, check=True, capture_output=True,
                       timeout=timeout)
        subprocess.run(["slurmd"], env=self.env, check=True, capture_output=True, timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run("sinfo", "-h", "-N", "-o", "%t", check=False).strip()
            if state in ("idle", "mix", "alloc"):
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the node did not come up in {timeout} s; logs in {self.path('log')}")

    def pids(self):
        found = {}
        for name, pid_file in (("slurmd", "slurmd.pid"), ("slurmctld", "slurmctld.pid"),
                               ("munged", os.path.join("munge", "munged.pid"))):
            try:
                with open(self.path(pid_file)) as f:
                    found[name] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return found

    def stop(self, timeout=20):
        """Stops the daemons this folder's pid files name: slurmd, slurmctld, then munged."""
        for name, pid in self.pids().items():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv):
    if len(argv) != 3 or argv[1] not in ("start", "stop"):
        print(__doc__)
        return 2
    cluster = LocalCluster(argv[2])
    if argv[1] == "start":
        missing = missing_programs()
        if missing:
            print(f"not installed: {', '.join(missing)} (scripts/install-deps.sh)", file=sys.stderr)
            return 1
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
