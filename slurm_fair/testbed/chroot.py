"""Run one program inside a testbed's Debian root filesystem, with this host's data at the same paths.

``python -I -S chroot.py ROOT BIND PROGRAM [ARG...]`` (what the wrappers in ``<dir>/bin/`` do;
BIND: more host directories to bind at the same path, ``:``-separated, e.g. a testbed
directory under ``/var``):

1. a private mount namespace of its own (``unshare(CLONE_NEWNS)``, ``/`` made recursively
   private), so every mount below exists only for this process and what it starts: nothing
   is ever mounted on the host, and nothing is left mounted when the last process of it exits
   (``testbed down`` has nothing to unmount);
2. the host's ``/proc``, ``/sys``, ``/dev``, every top-level directory that is not part of the
   operating system (``/tmp``, ``/home``, ``/root``, ``/srv``, a checkout's own tree...),
   and ``/etc/passwd``, ``/etc/group``, ``/etc/hosts`` bound into ROOT at the same paths, so
   the testbed's state directory, job scripts, output files and users are what they are
   outside;
3. ``chroot(ROOT)``, the same working directory (``/`` if it is not visible inside), then
   ``exec`` of PROGRAM with the environment unchanged: the pid stays the wrapper's, so the
   testbed finds and stops a daemon started this way like any other.

Only the standard library, and no import of slurm_fair: it runs with ``-I -S`` before anything
else, once per Slurm command, so it must start fast. User text is passed as argv, never to a
shell. Linux only; needs CAP_SYS_ADMIN (the testbed runs as root).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

#: top-level directories that belong to the root filesystem's own operating system
OS_DIRS = frozenset({
    "bin", "boot", "etc", "lib", "lib32", "lib64", "libx32", "sbin", "usr", "var", "run",
    "proc", "sys", "dev", "lost+found",
})
#: the host's kernel views, bound recursively
KERNEL_DIRS = ("proc", "sys", "dev")
#: host files bound over the root filesystem's own: the same users, groups and names
HOST_FILES = ("etc/passwd", "etc/group", "etc/hosts")
#: a file every root filesystem made by the testbed carries (wrappers test it to avoid nesting)
MARKER = ".slurm-fair-rootfs"


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
    return libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _bind(libc: ctypes.CDLL, source: str, target: str, recursive: bool) -> None:
    flags = MS_BIND | (MS_REC if recursive else 0)
    _check(libc.mount(source.encode(), target.encode(), None, flags, None), f"bind {source} -> {target}")


def host_dirs(extra: tuple[str, ...] = ()) -> list[str]:
    """Absolute host directories to bind: non-OS top-level ones, plus ``extra`` not under them."""
    dirs = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if name in OS_DIRS or os.path.islink(path) or not os.path.isdir(path):
            continue
        dirs.append(path)
    for path in extra:
        path = os.path.normpath(path)
        if path.count("/") < 2 or not os.path.isdir(path):  # never over a whole top-level directory
            continue
        if not any(path == d or path.startswith(d + "/") for d in dirs):
            dirs.append(path)
    return dirs


def enter(root: str, extra: tuple[str, ...] = ()) -> None:
    """Private mount namespace, the binds above, chroot(root); the working directory kept."""
    root = os.path.realpath(root)
    if not os.path.isfile(os.path.join(root, MARKER)):
        raise OSError(2, f"{root} is not a testbed root filesystem (no {MARKER})")
    cwd = os.getcwd() if os.path.isdir(".") else "/"
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    for path in host_dirs(extra):
        target = root + path
        os.makedirs(target, exist_ok=True)
        _bind(libc, path, target, recursive=True)
    for name in KERNEL_DIRS:
        target = os.path.join(root, name)
        os.makedirs(target, exist_ok=True)
        _bind(libc, "/" + name, target, recursive=True)
    for name in HOST_FILES:
        source, target = "/" + name, os.path.join(root, name)
        if os.path.isfile(source):
            if not os.path.exists(target):
                open(target, "a").close()
            _bind(libc, source, target, recursive=False)
    os.chroot(root)
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: chroot.py ROOT BIND PROGRAM [ARG...]\n")
        return 2
    root, program, args = argv[1], argv[3], argv[4:]
    extra = tuple(p for p in argv[2].split(":") if p.startswith("/"))
    try:
        enter(root, extra)
        os.execvp(program, [program, *args])
    except OSError as exc:
        sys.stderr.write(f"slurm-fair testbed: cannot run {program} in {root}: {exc}\n")
        return 126
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
