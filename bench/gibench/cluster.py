"""A private PostgreSQL cluster for the benchmark, started through test/lib.sh's helpers
(initdb/pg_ctl as the non-root PostgreSQL user, socket in the cluster's directory)."""
import os
import shlex
import subprocess
from pathlib import Path

from .paths import ROOT

# Settings of every benchmark cluster; docs/benchmarks.md lists them.
BASE_CONF = {
    "shared_preload_libraries": "'gpuindex'",
    "shared_buffers": "'2GB'",
    "maintenance_work_mem": "'2GB'",
    "work_mem": "'64MB'",
    "jit": "off",
    "autovacuum": "off",              # the scenarios VACUUM explicitly
    "max_wal_size": "'16GB'",
    "checkpoint_timeout": "'1h'",
    "max_connections": "50",
    # pgvector builds IVFFlat and HNSW with parallel workers: give them the machine's
    # cores (PostgreSQL's default, 2, on the 2-core VM; up to 7 next to the device
    # service under max_worker_processes = 8 on a GPU host). gpuivf's build runs its
    # k-means and assignment in the device service, on the GPU when there is one.
    "max_parallel_maintenance_workers": str(min(7, max(2, (os.cpu_count() or 2) - 1))),
}


class Cluster:
    def __init__(self, directory, port, device="auto", extra=None):
        self.dir = Path(directory)
        self.port = int(port)
        self.conf = dict(BASE_CONF, **{"gpuindex.device": device}, **(extra or {}))

    def _lib(self, command, capture=False):
        script = f". {shlex.quote(str(ROOT / 'test' / 'lib.sh'))}; {command}"
        return subprocess.run(["bash", "-c", script], check=True, text=True,
                              capture_output=capture, env=os.environ.copy())

    def running(self):
        pid = self.dir / "data" / "postmaster.pid"
        if not pid.exists():
            return False
        try:
            os.kill(int(pid.read_text().split()[0]), 0)
            return True
        except (OSError, ValueError):
            return False

    def start(self, reuse=False):
        """A fresh cluster; with reuse, the one already in the directory (started
        again if its server is gone, e.g. kept from an earlier call): False then."""
        if reuse and (self.dir / "data" / "PG_VERSION").exists():
            # this run's settings (appended: the last line wins) and this run's
            # gpuindex library: the server starts again either way
            with open(self.dir / "data" / "postgresql.conf", "a") as f:
                f.write(f"port = {self.port}\n")
                for k, v in self.conf.items():
                    f.write(f"{k} = {v}\n")
            mode = "restart -m fast" if self.running() else "start"
            try:
                self._lib(f"as_pg \"pg_ctl -D '{self.dir}/data' -l '{self.dir}/server.log' "
                          f"-w -t 600 {mode} >/dev/null\"")
            except subprocess.CalledProcessError:
                pass
            if self.running():
                return False
        self.stop()
        subprocess.run(["rm", "-rf", str(self.dir)], check=True)
        lines = " ".join(shlex.quote(f"{k} = {v}") for k, v in self.conf.items())
        self._lib(f"cluster_start {shlex.quote(str(self.dir))} {self.port} {lines}")
        return True

    def stop(self):
        if (self.dir / "data").exists():
            self._lib(f"cluster_stop {shlex.quote(str(self.dir))}")

    @property
    def conninfo(self):
        return f"host={self.dir} port={self.port} user=postgres dbname=postgres"

    def env(self, **gucs):
        """Environment for libpq clients (pgbench): PGOPTIONS carries per-session GUCs."""
        env = os.environ.copy()
        env.update(PGHOST=str(self.dir), PGPORT=str(self.port), PGUSER="postgres",
                   PGDATABASE="postgres")
        if gucs:
            env["PGOPTIONS"] = " ".join(f"-c {k}={v}" for k, v in gucs.items())
        return env

    def bin(self, name):
        return str(Path(os.environ.get("PG_BIN") or subprocess.run(
            [os.environ.get("PG_CONFIG", "pg_config"), "--bindir"], check=True, text=True,
            capture_output=True).stdout.strip()) / name)

    def server_log_tail(self, lines=30):
        try:
            return "\n".join((self.dir / "server.log").read_text().splitlines()[-lines:])
        except OSError:
            return ""
