"""A private Docker engine for one test: its own containerd and dockerd, all state under one directory.

``PrivateDocker(root)`` starts ``containerd`` (own socket, root and state directories, empty
configuration) and ``dockerd`` (own socket, ``--data-root``, ``--exec-root``, ``--pidfile``, an
empty ``daemon.json``) under ``root``, each in its own process group. Nothing of the host's
engine is used or touched: not ``/var/lib/docker``, not ``/run/containerd``, not
``/etc/docker/daemon.json``.

Host network: the daemon runs with ``--iptables=false --ip-forward=false --ip-masq=false
--bridge=none`` (no docker0, no iptables rule, the host's ``ip_forward`` left as it is) and takes
its networks from a /20 of ``NETWORK_POOL`` no host route and no other private engine uses (two
tests at once do not collide). Containers reach each other on their compose bridge; nothing
routes them anywhere else. ``stop()`` stops the daemons (TERM, then KILL of each process group),
kills any leftover shim of this containerd by its pid, deletes the bridges that appeared in the
pool, unmounts what is still mounted under ``root`` and may be called any number of times; the
test calls it from a finaliser, from ``atexit`` and on SIGTERM/SIGHUP (see conftest.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: address pool of the private daemons' networks, unlikely to collide with anything; each engine
#: takes a /20 of it that no host address or route overlaps (a /24 per compose network)
NETWORK_POOL = "172.30.0.0/16"
PROGRAMS = ("dockerd", "containerd", "runc", "docker")


class DockerUnavailable(Exception):
    """The private engine cannot run here (the reason is the message)."""


def which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin")


def client_env() -> dict[str, str]:
    """The environment of docker/compose clients: none of the caller's Docker, Compose or Python
    settings (Debian's docker-compose v1 is a Python program: the test's PYTHONPATH must not
    reach it)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("DOCKER_", "COMPOSE_")) and k not in ("PYTHONPATH", "PYTHONHOME")}


def unavailable_reason() -> str | None:
    """Why a private dockerd cannot run on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "a private dockerd needs root"
    missing = [p for p in PROGRAMS if which(p) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/system-packages.sh installs docker.io)"
    if not Path("/sys/fs/cgroup").is_dir() or not any(Path("/sys/fs/cgroup").iterdir()):
        return "no cgroup file system at /sys/fs/cgroup"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay file system"
    return None


def _bridges() -> dict[str, list[str]]:
    """Host bridge interfaces and their IPv4 addresses."""
    try:
        out = subprocess.run(["ip", "-j", "addr", "show", "type", "bridge"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {i["ifname"]: [a["local"] for a in i.get("addr_info", []) if a.get("family") == "inet"]
            for i in json.loads(out or "[]")}


def _used_networks() -> list[ipaddress.IPv4Network]:
    try:
        out = subprocess.run(["ip", "-4", "-j", "route", "show", "table", "all"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    nets = []
    for r in json.loads(out or "[]"):
        dst = r.get("dst", "")
        if dst and dst != "default":
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.ip_network(dst if "/" in dst else dst + "/32", strict=False))
    return nets


def free_pool() -> str:
    """A /20 of NETWORK_POOL that no route of the host and no running dockerd's pool overlaps."""
    used = _used_networks()
    for pid in _pids_mentioning("--default-address-pool"):
        with contextlib.suppress(OSError, ValueError):
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode().split("\0")
            for arg in argv:
                if arg.startswith("base="):
                    used.append(ipaddress.ip_network(arg[5:].split(",")[0], strict=False))
    for sub in ipaddress.ip_network(NETWORK_POOL).subnets(new_prefix=20):
        if not any(sub.overlaps(u) for u in used):
            return str(sub)
    raise DockerUnavailable(f"no free /20 left in {NETWORK_POOL}")


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) + "/"
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def _pids_mentioning(text: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(d.name))
    return pids


class PrivateDocker:
    """containerd + dockerd under ``root``; ``env`` points a docker/compose client at them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sock = root / "docker.sock"
        self.data_root = root / "data"
        self.exec_root = root / "exec"
        self.pidfile = root / "docker.pid"
        self.ctd_sock = root / "containerd.sock"
        self.procs: list[subprocess.Popen] = []
        self.logs: list = []
        self.bridges_before: set[str] = set()
        self.stopped = False
        self.lock = None
        self.pool = NETWORK_POOL
        if len(str(self.ctd_sock)) + len(".ttrpc") >= 104:
            raise DockerUnavailable(f"socket path too long for a unix socket: {self.ctd_sock}")

    @property
    def env(self) -> dict[str, str]:
        env = client_env()
        env.update(DOCKER_HOST=f"unix://{self.sock}", DOCKER_CONFIG=str(self.root / "client"))
        return env

    def _spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "ab")
        self.logs.append(log)
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        self.procs.append(proc)
        return proc

    def start(self, timeout_s: float = 60.0) -> None:
        reap_stale()
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock = open(self.root / "lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for d in (self.data_root, self.exec_root, self.root / "containerd", self.root / "client"):
            d.mkdir(parents=True, exist_ok=True)
        (self.root / "client" / "config.json").write_text("{}\n")
        (self.root / "containerd.toml").write_text("version = 2\n")
        (self.root / "daemon.json").write_text("{}\n")
        self.bridges_before = set(_bridges())
        self.pool = free_pool()
        ctd = self._spawn("containerd", [
            which("containerd") or "containerd", "--config", str(self.root / "containerd.toml"),
            "--address", str(self.ctd_sock), "--root", str(self.root / "containerd" / "root"),
            "--state", str(self.exec_root / "containerd-state"), "--log-level", "warn",
        ])
        self._wait(lambda: self.ctd_sock.exists(), ctd, "containerd", timeout_s)
        dockerd = self._spawn("dockerd", [
            which("dockerd") or "dockerd", "--config-file", str(self.root / "daemon.json"),
            "--host", f"unix://{self.sock}", "--containerd", str(self.ctd_sock),
            "--data-root", str(self.data_root), "--exec-root", str(self.exec_root),
            "--pidfile", str(self.pidfile), "--storage-driver", "overlay2",
            "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none",
            "--default-address-pool", f"base={self.pool},size=24", "--log-level", "warn",
        ])
        self._wait(self._ping, dockerd, "dockerd", timeout_s)

    def _ping(self) -> bool:
        if not self.sock.exists():
            return False
        proc = subprocess.run([which("docker") or "docker", "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, text=True, timeout=20, env=self.env)
        return proc.returncode == 0

    def _wait(self, ready, proc: subprocess.Popen, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DockerUnavailable(f"{what} exited ({proc.returncode}): {self.log_tail(what)}")
            if ready():
                return
            time.sleep(0.3)
        raise DockerUnavailable(f"{what} did not start within {timeout_s:.0f}s: {self.log_tail(what)}")

    def log_tail(self, what: str, lines: int = 8) -> str:
        try:
            return " | ".join((self.root / f"{what}.log").read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""

    def docker(self, *args: str, timeout_s: float = 120.0, check: bool = True,
               input: str | None = None) -> subprocess.CompletedProcess:
        return run([which("docker") or "docker", *args], env=self.env, timeout_s=timeout_s,
                   check=check, input=input)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop both daemons and remove what they left on the host; idempotent."""
        if self.stopped:
            return
        self.stopped = True
        for proc in reversed(self.procs):  # dockerd first, then containerd
            _stop_group(proc, timeout_s)
        for pid in self._container_pids() + _pids_mentioning(str(self.ctd_sock)) + _pids_mentioning(str(self.exec_root)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        pool = ipaddress.ip_network(self.pool)
        for name, addrs in _bridges().items():
            if name not in self.bridges_before and any(ipaddress.ip_address(a) in pool for a in addrs):
                subprocess.run(["ip", "link", "delete", name], capture_output=True, timeout=20)
        for point in _mounts_under(self.root):
            subprocess.run(["umount", "-l", point], capture_output=True, timeout=20)
        for log in self.logs:
            log.close()
        if self.lock is not None:
            self.lock.close()

    def _container_pids(self) -> list[int]:
        """Processes in the cgroups of this engine's containers (left when a daemon was killed)."""
        ids = [d.name for d in (self.data_root / "containers").glob("*") if len(d.name) == 64]
        if not ids:
            return []
        pids = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                cg = (d / "cgroup").read_text()
            except OSError:
                continue
            if any(i in cg for i in ids):
                pids.append(int(d.name))
        return pids

    def remove_state(self) -> None:
        """Delete the data root etc. (only after stop(): nothing may be mounted any more)."""
        if _mounts_under(self.root):
            return
        for d in (self.data_root, self.exec_root, self.root / "containerd"):
            shutil.rmtree(d, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """What of this engine still runs or exists on the host (empty after a clean stop)."""
        out = [f"process {p.pid} ({p.args[0]})" for p in self.procs if p.poll() is None]
        out += [f"process {pid}" for pid in _pids_mentioning(str(self.ctd_sock)) + self._container_pids()]
        pool = ipaddress.ip_network(self.pool)
        out += [f"bridge {n}" for n, addrs in _bridges().items()
                if n not in self.bridges_before and any(ipaddress.ip_address(a) in pool for a in addrs)]
        out += [f"mount {m}" for m in _mounts_under(self.root)]
        return out


def reap_stale() -> list[Path]:
    """Stop the private engines whose test is gone (their lock is free); the roots stopped."""
    roots = set()
    for pid in _pids_mentioning("--exec-root") + _pids_mentioning("containerd.sock"):
        try:
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for i, arg in enumerate(argv[:-1]):
            if arg in (b"--exec-root", b"--address", b"-address"):
                root = Path(argv[i + 1].decode()).parent
                if (root / "lock").exists() and (root / "containerd.sock").exists():
                    roots.add(root)
    stale = []
    live = []
    for root in sorted(roots):
        with open(root / "lock", "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                live.append(root)
    for root in sorted(set(roots) - set(live)):
        with open(root / "lock", "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its test still runs
        eng = PrivateDocker(root)
        if live:  # their bridges are in the same pool: leave every bridge alone
            eng.bridges_before = set(_bridges())
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((root / "docker.pid").read_text()), signal.SIGKILL)
        eng.stop()
        eng.remove_state()
        stale.append(root)
    return stale


def _stop_group(proc: subprocess.Popen, timeout_s: float) -> None:
    if proc.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything left of its group
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def run(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout_s: float = 120.0,
        check: bool = True, input: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a client command in its own process group; a timeout kills the whole group."""
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=dict(env) if env is not None else None, cwd=cwd)
    try:
        out, err = proc.communicate(input=input, timeout=timeout_s)
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    result = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}:\n{out[-3000:]}\n{err[-3000:]}")
    return result
