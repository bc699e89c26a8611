"""Slurm versions of the testbed: the host's own, or a Debian root filesystem made and cached.

Debian bookworm ships Slurm 22.05 (the host's packages: ``scripts/system-packages.sh``). Newer
versions come from another Debian suite's own packages, installed into a root filesystem under
the testbed directory (``<dir>/rootfs``) by ``debootstrap --variant=minbase`` and ``apt-get``
inside it (about 40 s the first time, then cached: a later ``up`` only checks the marker file).
Every Slurm, munge and MariaDB program of such a testbed runs inside it through the wrappers
in ``<dir>/bin/`` (:mod:`slurm_fair.testbed.chroot`), so both versions run side by side.

A root filesystem is made in ``rootfs.partial`` and renamed into place only when complete: an
interrupted build is started again, never used half-made.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import atomic
from ..errors import TestbedError
from . import chroot

#: environment variable naming the Debian mirror debootstrap and apt use
MIRROR_ENV = "SLURM_FAIR_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: where debootstrap keeps its per-suite scripts
DEBOOTSTRAP_SCRIPTS = "/usr/share/debootstrap/scripts"

#: what the testbed runs, programs first: the wrappers made in <dir>/bin/
PROGRAMS = (
    "munged", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld", "slurmd",
    "sacctmgr", "scontrol", "sinfo", "squeue", "sbatch", "scancel", "sacct", "sprio", "sshare",
    "srun", "salloc", "sstat", "sreport", "sdiag", "python3",
)


#: a file in every wrapper directory, so a testbed of the host's version can drop them from PATH
WRAPPERS_MARK = ".slurm-fair-wrappers"


def without_wrappers(path: str) -> list[str]:
    """The entries of a PATH value that are not some testbed's wrapper directory."""
    return [p for p in path.split(os.pathsep) if p and not os.path.isfile(os.path.join(p, WRAPPERS_MARK))]


@dataclass(frozen=True)
class SlurmVersion:
    """One Slurm the testbed can run: the host's (``suite`` empty) or a Debian suite's."""

    name: str  # "22.05"
    suite: str  # Debian suite of the root filesystem ("" = the host's packages)
    port_shift: int  # added to every port of the description, so versions run side by side
    packages: tuple[str, ...] = ()
    #: debootstrap script to use when the host's debootstrap has none named after the suite
    #: (bookworm's 1.0.128 knows trixie but not forky; every Debian suite since 2005 uses "sid")
    script: str = "sid"

    @property
    def host(self) -> bool:
        return not self.suite


_PACKAGES = (
    "slurm-wlm", "slurmdbd", "slurm-client", "munge", "mariadb-server", "mariadb-client", "python3-minimal",
)

VERSIONS: dict[str, SlurmVersion] = {
    "22.05": SlurmVersion("22.05", "", 0),
    "24.11": SlurmVersion(
        "24.11", "trixie", 1000,
        _PACKAGES,
    ),
    "26.05": SlurmVersion("26.05", "forky", 2000, _PACKAGES),
}
DEFAULT_VERSION = "22.05"


def version(name: str) -> SlurmVersion:
    try:
        return VERSIONS[name]
    except KeyError:
        raise TestbedError(
            f"unknown Slurm version {name!r} for the testbed; known: {', '.join(VERSIONS)}"
        ) from None


def is_ready(root: Path, v: SlurmVersion) -> bool:
    marker = root / chroot.MARKER
    try:
        return marker.read_text().split()[0] == v.name
    except (OSError, IndexError):
        return False


def ensure(root: Path, v: SlurmVersion, say: Callable[[str], None], timeout_s: float = 900.0) -> bool:
    """Make the root filesystem of ``v`` at ``root`` unless it is there; True if it was made."""
    if v.host or is_ready(root, v):
        return False
    if os.geteuid() != 0:
        raise TestbedError("making the testbed's root filesystem needs root (debootstrap, chroot)")
    if shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None:
        raise TestbedError(
            f"Slurm {v.name} runs from a Debian {v.suite} root filesystem made with debootstrap, "
            "which is not installed; run scripts/system-packages.sh as root"
        )
    mirror = os.environ.get(MIRROR_ENV, DEFAULT_MIRROR)
    partial = root.with_name(root.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    if root.exists():  # made for another version, or without its marker: make it again
        shutil.rmtree(root)
    partial.parent.mkdir(parents=True, exist_ok=True)
    say(f"making a Debian {v.suite} root filesystem for Slurm {v.name} in {root} (once, ~40 s)")
    argv = ["debootstrap", "--variant=minbase", v.suite, str(partial), mirror]
    if not (Path(DEBOOTSTRAP_SCRIPTS) / v.suite).exists():
        argv.append(str(Path(DEBOOTSTRAP_SCRIPTS) / v.script))
    _run(argv, timeout_s, "debootstrap")
    policy = partial / "usr/sbin/policy-rc.d"  # packages must not start their services
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    say(f"installing Slurm {v.name} and its daemons inside it")
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
    _run(_inside(partial, ["apt-get", "install", "-y", "-q", "--no-install-recommends", *v.packages]),
         timeout_s, "apt-get install", env=env)
    got = _run(["chroot", str(partial), "slurmctld", "-V"], 60, "slurmctld -V", env=env).strip()
    if v.name not in got:
        raise TestbedError(f"the {v.suite} root filesystem has {got!r}, not Slurm {v.name}")
    (partial / "var/cache/apt/archives").mkdir(parents=True, exist_ok=True)
    for deb in (partial / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    (partial / chroot.MARKER).write_text(f"{v.name} {got}\n")
    partial.rename(root)
    return True


def _inside(root: Path, argv: Sequence[str]) -> list[str]:
    """``argv`` run by chroot into ``root`` with a ``/proc`` of its own, mounted in a private mount
    namespace (gone with the command): forky's MariaDB postinst calls a systemd tool (the one
    that makes its runtime directories), which refuses to work without ``/proc``."""
    script = 'mount -t proc proc "$1/proc" && root="$1" && shift && exec chroot "$root" "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", str(root), *argv]


def _run(argv: Sequence[str], timeout_s: float, what: str, env: dict[str, str] | None = None) -> str:
    """Run a build step in its own process group: a timeout or Ctrl-C stops all of it."""
    proc = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True, env=env,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise TestbedError(f"{what} timed out after {timeout_s:.0f}s") from None
        raise
    if proc.returncode != 0:
        tail = "\n".join("    " + line for line in out.strip().splitlines()[-12:])
        raise TestbedError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return out


def find_program(root: Path, name: str) -> str | None:
    """Absolute path (inside the root filesystem) of one of its programs, or None."""
    for d in ("usr/sbin", "usr/bin", "sbin", "bin"):
        if (root / d / name).exists():
            return "/" + d + "/" + name
    return None


def write_wrappers(bin_dir: Path, root: Path, v: SlurmVersion, bind: Sequence[Path] = ()) -> None:
    """``<dir>/bin/<program>``: run the root filesystem's program through chroot.py.

    Inside the root filesystem (a job calling ``squeue``, where ``<dir>/bin`` is on PATH too)
    a wrapper runs the program directly instead of entering again. ``bind``: host directories
    to see inside besides the top-level ones (the testbed directory, wherever it is).
    """
    binds = ":".join(str(p) for p in bind)
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / WRAPPERS_MARK).write_text(f"Slurm {v.name} wrappers of the slurm-fair testbed\n")
    helper = Path(chroot.__file__).resolve()
    for name in PROGRAMS:
        inside = find_program(root, name)
        if inside is None:
            raise TestbedError(f"{name} is missing from the root filesystem {root}; remove it to make it again")
        text = (
            "#!/bin/sh\n"
            f"# Slurm {v.name} testbed: {name} from the Debian {v.suite} root filesystem {root}\n"
            f"[ -e /{chroot.MARKER} ] && exec {inside} \"$@\"\n"
            f"exec {_q(sys.executable)} -I -S {_q(str(helper))} {_q(str(root))} {_q(binds)} {inside} \"$@\"\n"
        )
        path = bin_dir / name
        if not path.is_file() or path.read_text() != text:
            atomic.write_text(path, text, mode=0o755)


def _q(s: str) -> str:
    return shlex.quote(s)
