"""Everything ``up`` writes before a daemon starts: programs checked, the state directory filled.

Fake GPU devices, the munge key, the rendered configs, job_submit.lua, the saved description
(so ``down``/``status`` of a private testbed find its ports), MariaDB's data directory and the
accounting database. Nothing here starts or stops a process (that is :mod:`.cluster`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from ..deploy.render import render_template
from ..errors import ConfigError, Finding, TestbedError
from ..templating import repo_root
from . import procs, rootfs
from .config import TestbedConfig
from .layout import Layout

#: the description saved by the last ``up`` in a state directory
SAVED_CONFIG = "testbed.json"


def check_binaries(version: rootfs.SlurmVersion, layout: Layout, say: Callable[[str], None] = lambda _m: None) -> None:
    """The programs the testbed runs exist: the host's, or another version's root filesystem
    (built on first use) and its wrappers."""
    if not version.host:
        rootfs.ensure(layout.rootfs, version, say)
        rootfs.write_wrappers(layout.bin, layout.rootfs, version, (layout.root,))
        return
    needed = ["munged", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld",
              "slurmd", "sacctmgr", "scontrol", "sinfo"]
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
    missing = [b for b in needed if shutil.which(b, path=path) is None]
    if missing:
        raise TestbedError(
            f"missing programs: {', '.join(missing)}; run scripts/system-packages.sh as root"
        )
    if "/usr/sbin" not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = path  # daemons live in /usr/sbin, not on every user's PATH


def config_changed(layout: Layout, rendered: Mapping[str, str]) -> bool:
    """Whether a rendered config differs from the one in the state directory."""
    for name, text in rendered.items():
        path = layout.etc / name
        if not path.is_file() or path.read_text() != text:
            return True
    return False


def prepare_dir(config: TestbedConfig, layout: Layout, rendered: Mapping[str, str]) -> None:
    """Directories, fake GPU devices, munge key, rendered configs, the saved description."""
    L = layout
    L.make_dirs()
    for node in config.nodes:
        L.node_dev(node.name).mkdir(parents=True, exist_ok=True)
        for f in L.device_files(node.name, node.device_count):
            f.touch()
    if not L.munge_key.exists():
        fd = os.open(L.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(1024))
    for name, text in rendered.items():
        path = L.etc / name
        path.write_text(text)
        path.chmod(0o600 if name == "slurmdbd.conf" else 0o644)
    if config.job_submit_lua and not config.job_submit_script:
        (L.etc / "job_submit.lua").write_text(render_template(
            "deploy/job_submit.lua.j2", {"plan_path": str(L.plan_file), "max_age_s": 180, "site_job_submit": ""}))
    elif config.job_submit_lua:
        script = Path(config.job_submit_script)
        if not script.is_absolute():
            script = repo_root() / script
        if not script.is_file():
            raise ConfigError(
                config.source, [Finding("cluster.job_submit_script", f"{script} not found")]
            )
        shutil.copyfile(script, L.etc / "job_submit.lua")
    raw = dict(config.raw) or {}
    (L.root / SAVED_CONFIG).write_text(json.dumps(raw, indent=1))


def init_mariadb(layout: Layout, program: Callable[[str], str], timeout: float) -> None:
    """MariaDB's data directory, once (before its first start). Made beside it and renamed into
    place when ``mariadb-install-db`` succeeded: an install cut short (a timeout, a crash of its
    bootstrap server) leaves no half-made directory that the next ``up`` would take for a whole
    one and start MariaDB on, without its system tables (every login refused, in CI once)."""
    data = layout.mysql_data
    if (data / "mysql").is_dir():
        return
    fresh = data.with_name(data.name + ".init")
    shutil.rmtree(fresh, ignore_errors=True)
    procs.run(
        [program("mariadb-install-db"), f"--defaults-file={layout.my_cnf}", f"--datadir={fresh}",
         "--skip-test-db", "--auth-root-authentication-method=socket"],
        timeout=timeout,
    )
    shutil.rmtree(data, ignore_errors=True)  # nothing of ours: no system tables were there
    fresh.rename(data)


def create_database(layout: Layout, program: Callable[[str], str]) -> None:
    """slurmdbd's database and user (idempotent; the password is the state directory's own)."""
    pw = layout.db_password()
    stmts = ["CREATE DATABASE IF NOT EXISTS slurm_acct_db"]
    for host in ("127.0.0.1", "localhost"):
        stmts += [
            f"CREATE USER IF NOT EXISTS 'slurm'@'{host}' IDENTIFIED BY '{pw}'",
            f"ALTER USER 'slurm'@'{host}' IDENTIFIED BY '{pw}'",
            f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{host}'",
        ]
    sql = "; ".join(stmts) + ";"
    procs.run([program("mariadb"), f"--defaults-file={layout.my_cnf}", "-uroot", "-e", sql], timeout=30)
