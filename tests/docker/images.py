"""What the docker test builds from, offline: the base image, the wheels and the build context.

* **Base image** ``debian:bookworm``: a ``debootstrap --variant=minbase bookworm`` root file
  system with every Debian package docker/Dockerfile wants (its ``ARG PACKAGES``) installed by
  apt-get inside it (``policy-rc.d`` forbids starting services), packed as a tar and imported
  with ``docker import``. So the image build itself needs no network. Cached as
  ``<cache>/base-bookworm-<key>.tar``; the key hashes the package list, the mirror and
  ``BASE_FORMAT``; a tar older than ``BASE_MAX_AGE_DAYS`` (security updates) or of another key
  is made again. About 40 s plus the download of the packages.
* **Wheels**: slurm-fair's dependencies (``install_requires`` and the ``highs`` extra of
  setup.cfg, plus setuptools and wheel to build slurm-fair itself) as wheels for the image's
  Python 3.11, made with ``pip wheel`` on the host (PyPI or the pip cache), cached as
  ``<cache>/wheels-<key>/``. The slurm-fair wheel is built fresh from the copy of the source on
  every run (``--no-index``).
* **Build context**: a copy of what ``.dockerignore`` lets through, plus docker-compose.yml, in
  the test directory, with the wheels in ``docker/wheels/``: the repository is never written.

The cache lives in ``$SLURM_FAIR_DOCKER_CACHE``, else ``/var/cache/slurm-fair/docker`` (root),
else ``$XDG_CACHE_HOME/slurm-fair/docker`` (``~/.cache``).
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .daemon import run

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "docker" / "Dockerfile"
MIRROR_ENV = "SLURM_FAIR_DEBIAN_MIRROR"  # the testbed's variable (slurm_fair.testbed.rootfs)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_FORMAT = "1"
BASE_MAX_AGE_DAYS = 30
#: what the build context holds (besides docker-compose.yml): .dockerignore's exceptions
CONTEXT = ("setup.cfg", "pyproject.toml", "README.md", "slurm_fair", "templates", "conf", "docker",
           ".dockerignore", "docker-compose.yml")
IMAGE_PYTHON = (3, 11)  # Debian bookworm's python3


def cache_dir() -> Path:
    if os.environ.get("SLURM_FAIR_DOCKER_CACHE"):
        return Path(os.environ["SLURM_FAIR_DOCKER_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/slurm-fair/docker")
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "slurm-fair" / "docker"


def dockerfile_packages() -> list[str]:
    """The Debian packages of docker/Dockerfile's ``ARG PACKAGES="..."``."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    m = re.search(r'^ARG PACKAGES="([^"]*)"', text, re.M)
    if not m:
        raise AssertionError("docker/Dockerfile has no ARG PACKAGES=\"...\" line")
    return sorted(m.group(1).split())


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _fresh(path: Path) -> bool:
    return path.exists() and time.time() - path.stat().st_mtime < BASE_MAX_AGE_DAYS * 86400


@contextlib.contextmanager
def _cache_lock():
    """One test at a time makes or replaces what is in the cache."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def base_tar(say: Callable[[str], None], timeout_s: float = 900.0) -> Path:
    """The cached base root file system tar, made when missing or stale."""
    with _cache_lock():
        return _base_tar(say, timeout_s)


def _base_tar(say: Callable[[str], None], timeout_s: float) -> Path:
    packages = dockerfile_packages()
    mirror = os.environ.get(MIRROR_ENV, DEFAULT_MIRROR)
    cache = cache_dir()
    tar = cache / f"base-bookworm-{_key(BASE_FORMAT, mirror, *packages)}.tar"
    if _fresh(tar):
        return tar
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("base-bookworm-*.tar"):
        old.unlink()
    work = cache / "rootfs.partial"
    shutil.rmtree(work, ignore_errors=True)
    say(f"making the base image's root file system (debootstrap bookworm + {len(packages)} packages) in {cache}")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
    try:
        run(["debootstrap", "--variant=minbase", "bookworm", str(work), mirror], env=env, timeout_s=timeout_s)
        policy = work / "usr/sbin/policy-rc.d"  # packages must not start their services
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        run(["chroot", str(work), "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
            env={**env, "DEBIAN_FRONTEND": "noninteractive"}, timeout_s=timeout_s)
        for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for f in (work / sub).glob("*"):
                if f.is_file():
                    f.unlink()
        partial = tar.with_suffix(".tar.partial")
        run(["tar", "-C", str(work), "--numeric-owner", "-cf", str(partial), "."], timeout_s=300)
        partial.rename(tar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tar


def _requirements() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    reqs = [ln.split("#")[0].strip() for ln in cfg["options"]["install_requires"].splitlines()]
    reqs += [ln.split("#")[0].strip() for ln in cfg["options.extras_require"]["highs"].splitlines()]
    return sorted(r for r in reqs if r) + ["setuptools>=64", "wheel"]


def wheelhouse(say: Callable[[str], None], timeout_s: float = 900.0) -> Path:
    """The cached wheels of slurm-fair's dependencies (for the image's Python 3.11)."""
    with _cache_lock():
        return _wheelhouse(say, timeout_s)


def _wheelhouse(say: Callable[[str], None], timeout_s: float) -> Path:
    if sys.version_info[:2] != IMAGE_PYTHON:
        raise RuntimeError(f"the wheels are made with this Python; it must be {IMAGE_PYTHON} like the image's")
    reqs = _requirements()
    cache = cache_dir()
    out = cache / f"wheels-{_key('1', sys.platform, *reqs)}"
    if (out / ".complete").exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("wheels-*"):
        shutil.rmtree(old, ignore_errors=True)
    say(f"making the wheels of slurm-fair's dependencies in {out} (pip wheel)")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(out), *reqs], timeout_s=timeout_s)
    (out / ".complete").write_text(" ".join(reqs) + "\n")
    return out


def build_context(dest: Path, wheels: Path) -> Path:
    """A copy of the build context with the wheels (deps + a fresh slurm-fair wheel) in docker/wheels/."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.whl", "*.egg-info", "build")
    dest.mkdir(parents=True)
    for name in CONTEXT:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    target = dest / "docker" / "wheels"
    target.mkdir(parents=True, exist_ok=True)
    for whl in wheels.glob("*.whl"):
        os.link(whl, target / whl.name) if whl.stat().st_dev == target.stat().st_dev else shutil.copy2(whl, target)
    build = dest.parent / (dest.name + "-wheel")
    shutil.copytree(dest, build, ignore=shutil.ignore_patterns("wheels"))
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--find-links", str(wheels),
         "--wheel-dir", str(target), str(build)], timeout_s=300)
    shutil.rmtree(build, ignore_errors=True)
    return dest
