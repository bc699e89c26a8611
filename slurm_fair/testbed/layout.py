"""Where everything of one testbed lives: a single state directory, nothing outside it.

```
<dir>/etc/    slurm.conf gres.conf slurmdbd.conf (600) my.cnf munge.key (400) db.pass (600)
<dir>/run/    pid files, munge.sock, mysql.sock
<dir>/log/    one log per daemon (slurmd-<node>.log)
<dir>/spool/  slurmctld state, slurmd-<node> spool dirs
<dir>/mysql/  MariaDB datadir
<dir>/dev/<node>/nvidia0..N   plain files standing in for GPU devices (gres.conf File=)
<dir>/rootfs/ <dir>/bin/     another Slurm version only: its Debian root filesystem, and the
                              wrappers that run its programs inside it (testbed/rootfs.py)
```
Unix socket paths are limited to 107 bytes; :meth:`Layout.check` says so early.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..errors import TestbedError
from ..templating import repo_root
from . import rootfs

#: environment variable overriding the default state directory
DIR_ENV = "SLURM_FAIR_TESTBED_DIR"
_SOCKET_MAX = 107


@dataclass(frozen=True)
class Layout:
    """Paths of one testbed state directory."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def bin(self) -> Path:
        """Wrappers running the root filesystem's programs (a testbed of another Slurm version)."""
        return self.root / "bin"

    @property
    def rootfs(self) -> Path:
        """The Debian root filesystem of a testbed of another Slurm version (made once, cached)."""
        return self.root / "rootfs"

    @property
    def dev(self) -> Path:
        return self.root / "dev"

    @property
    def mysql_data(self) -> Path:
        return self.root / "mysql"

    @property
    def ctld_state(self) -> Path:
        return self.spool / "slurmctld"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_key(self) -> Path:
        return self.etc / "munge.key"

    @property
    def munge_socket(self) -> Path:
        return self.run / "munge.sock"

    @property
    def plan_file(self) -> Path:
        """The plan file the testbed's own job_submit.lua reads (a controller writes it with
        ``[controller].plan_file``)."""
        return self.run / "slurm-fair-plan.json"

    @property
    def mysql_socket(self) -> Path:
        return self.run / "mysql.sock"

    @property
    def my_cnf(self) -> Path:
        return self.etc / "my.cnf"

    def pid_file(self, daemon: str) -> Path:
        """Pid file of a daemon; ``slurmd:NODE`` maps to Slurm's ``slurmd-%n.pid``."""
        return self.run / f"{daemon.replace(':', '-')}.pid"

    def log_file(self, daemon: str) -> Path:
        return self.log / f"{daemon.replace(':', '-')}.log"

    def node_dev(self, node: str) -> Path:
        return self.dev / node

    def device_files(self, node: str, count: int) -> list[Path]:
        return [self.node_dev(node) / f"nvidia{i}" for i in range(count)]

    def db_password(self) -> str:
        """The slurmdbd database password: made once per testbed, kept in etc/db.pass (600)."""
        path = self.etc / "db.pass"
        if not path.exists():
            self.etc.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(12))
        return path.read_text().strip()

    def check(self) -> None:
        """Fail early on a directory whose socket paths would be too long for AF_UNIX."""
        for sock in (self.munge_socket, self.mysql_socket):
            if len(str(sock)) > _SOCKET_MAX:
                raise TestbedError(
                    f"testbed directory {self.root} is too deep: socket path {sock} exceeds "
                    f"{_SOCKET_MAX} bytes; choose a shorter --dir"
                )

    def make_dirs(self) -> None:
        for d in (self.etc, self.run, self.log, self.spool, self.ctld_state, self.dev):
            d.mkdir(parents=True, exist_ok=True)
        # munged refuses group/other-writable directories for its socket and key
        for d in (self.root, self.etc, self.run, self.log):
            d.chmod(0o755)


def default_dir(slurm: str | None = None) -> Path:
    """$SLURM_FAIR_TESTBED_DIR, else ``.testbed/`` in the repo root (source checkout) or cwd.

    Another Slurm version than the default gets a sibling of its own (``.testbed-24.11``), so
    both versions run at once from the same checkout.
    """
    if env := os.environ.get(DIR_ENV):
        found = Path(env).resolve()
    else:
        root = repo_root()
        base = root if (root / "templates").is_dir() else Path.cwd()
        found = (base / ".testbed").resolve()
    if slurm and slurm != rootfs.DEFAULT_VERSION:
        found = found.with_name(f"{found.name}-{slurm}")
    return found
