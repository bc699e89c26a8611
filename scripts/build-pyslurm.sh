#!/usr/bin/env bash
# Build pyslurm for this host's Slurm once, cache the wheel outside the checkout, install it.
#
#   scripts/build-pyslurm.sh [--python PY] [--source DIR|TARBALL] [--check]
#
# pyslurm is compiled against one Slurm release's headers (its major.minor is Slurm's: pyslurm
# 22.5.x for Slurm 22.05, 24.11.x for 24.11) and PyPI carries only the newest, so a site builds it
# from pyslurm's own sources for its Slurm. This script does that the same way every time:
#   - Slurm's version comes from slurm_version.h (SLURM_INCLUDE_DIR, default /usr/include);
#   - the source is --source (a pyslurm checkout or release tarball), else the tarball in
#     $PYSLURM_VENDOR_DIR (default ../shared/vendor/pyslurm next to the checkout) whose version
#     matches that Slurm's major.minor;
#   - the wheel is cached in ${SLURM_FAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-fair}/pyslurm/
#     under a key of pyslurm version + Slurm version + Python tag + the sources' sha256, built on
#     every core in a throw-away build
#     environment (Cython>=0.29.37,<3, Cython 3 on Python 3.13; setuptools<70; about 4.5 min on one
#     core) only when the key
#     is missing, under a lock so two runs never build it twice;
#   - the wheel is then installed (no dependencies) into PY (default .venv/bin/python).
# --check only says whether a cached wheel exists (exit 0) or not (exit 1), building nothing.
# Exit 3 when there is nothing to build from (no source given, no matching vendored tarball) or no
# Slurm headers: callers such as `make test` go on without pyslurm and its tests skip, saying so.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
PY="${here}/.venv/bin/python"
SOURCE=""
CHECK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --source) SOURCE="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "build-pyslurm: unknown argument: $1" >&2; exit 2 ;;
  esac
done

inc="${SLURM_INCLUDE_DIR:-/usr/include}"
hdr="${inc}/slurm/slurm_version.h"
if [ ! -f "$hdr" ]; then
  echo "build-pyslurm: no Slurm headers at ${hdr} (Debian: apt-get install libslurm-dev; or set SLURM_INCLUDE_DIR)" >&2
  exit 3
fi
# SLURM_VERSION_NUMBER is 0xMMmmuu (slurm_version.h has no version string in every release).
num="$(sed -n 's/^#define SLURM_VERSION_NUMBER \(0x[0-9a-fA-F]*\).*/\1/p' "$hdr")"
if [ -z "$num" ]; then
  echo "build-pyslurm: no SLURM_VERSION_NUMBER in ${hdr}" >&2
  exit 3
fi
slurm_major=$(( (num >> 16) & 0xff )); slurm_minor=$(( (num >> 8) & 0xff )); slurm_micro=$(( num & 0xff ))
slurm_version="$(printf '%d.%02d.%d' "$slurm_major" "$slurm_minor" "$slurm_micro")"

if [ -z "${SLURM_LIB_DIR:-}" ]; then
  for d in "/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo none)" /usr/lib64 /usr/lib /usr/local/lib; do
    if [ -e "$d/libslurm.so" ]; then SLURM_LIB_DIR="$d"; break; fi
  done
fi
if [ -z "${SLURM_LIB_DIR:-}" ]; then
  echo "build-pyslurm: no libslurm.so found (Debian: apt-get install libslurm-dev; or set SLURM_LIB_DIR)" >&2
  exit 3
fi
export SLURM_LIB_DIR SLURM_INCLUDE_DIR="$inc"

if [ -z "$SOURCE" ]; then
  vendor="${PYSLURM_VENDOR_DIR:-${here}/../shared/vendor/pyslurm}"
  SOURCE="$(ls -1 "${vendor}/pyslurm-${slurm_major}.${slurm_minor}."*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -z "$SOURCE" ]; then
    echo "build-pyslurm: no pyslurm ${slurm_major}.${slurm_minor}.x source for Slurm ${slurm_version} in ${vendor}; give --source" >&2
    exit 3
  fi
fi
if [ -d "$SOURCE" ]; then
  pyslurm_version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$SOURCE/pyslurm/__version__.py")"
else
  base="$(basename "$SOURCE")"; base="${base%.tar.gz}"; pyslurm_version="${base#pyslurm-}"
fi
case "$pyslurm_version" in
  "${slurm_major}.${slurm_minor}."*) ;;
  *) echo "build-pyslurm: pyslurm ${pyslurm_version} does not match Slurm ${slurm_version} (want ${slurm_major}.${slurm_minor}.x)" >&2; exit 2 ;;
esac

pytag="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
cache="${SLURM_FAIR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-fair}/pyslurm"
# the sources' own hash is in the key: a changed tarball or checkout is built again, never mistaken
# for the cached one (a checkout: every file but .git's, by path and content)
if [ -d "$SOURCE" ]; then
  srchash="$(cd "$SOURCE" && find . -type f -not -path './.git/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum)"
else
  srchash="$(sha256sum < "$SOURCE")"
fi
key="pyslurm-${pyslurm_version}-slurm-${slurm_version}-${pytag}-src-${srchash:0:12}"
mkdir -p "$cache"

find_wheel() { ls -1 "${cache}/${key}/"pyslurm-*.whl 2>/dev/null | head -n 1 || true; }

if [ "$CHECK" = 1 ]; then
  w="$(find_wheel)"; [ -n "$w" ] && { echo "$w"; exit 0; }; exit 1
fi

exec 9>"${cache}/.lock"
flock 9
wheel="$(find_wheel)"
if [ -z "$wheel" ]; then
  echo "build-pyslurm: building pyslurm ${pyslurm_version} for Slurm ${slurm_version} (${pytag}) from ${SOURCE}; takes minutes, once"
  start=$(date +%s)
  work="$(mktemp -d "${cache}/.build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  if [ -d "$SOURCE" ]; then
    cp -r "$SOURCE" "$work/src"
  else
    mkdir "$work/src" && tar xzf "$SOURCE" -C "$work/src" --strip-components=1
  fi
  "$PY" -m venv "$work/env"
  "$work/env/bin/python" -m pip install -q --upgrade pip
  # Cython 0.29 where it can (pyslurm's releases are made with it); Python 3.13 needs Cython 3,
  # which refuses one typo of pyslurm 24.11.0's sources (an f-string "{spec)}" in
  # core/job/submission.pyx, dead code for us): corrected in the build's copy, nowhere else
  if "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 13))'; then
    cython='Cython>=3.0.10'
    sed -i 's/PYSLURM_JOBDESC_{spec)}/PYSLURM_JOBDESC_{spec}/' "$work/src/pyslurm/core/job/submission.pyx"
  else
    cython='Cython>=0.29.37,<3'
  fi
  "$work/env/bin/python" -m pip install -q "$cython" 'setuptools<70' wheel
  # on every core: Cython's translation (PYSLURM_BUILD_JOBS: 24.11's setup.py reads it, 22.5's does not)
  # and the C compiler (setuptools' build_ext "parallel", from the build copy's setup.cfg)
  jobs="$(nproc 2>/dev/null || echo 1)"
  printf '\n[build_ext]\nparallel = %s\n' "$jobs" >> "$work/src/setup.cfg"
  (cd "$work/src" && PYSLURM_BUILD_JOBS="$jobs" "$work/env/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$work/out" . )
  mkdir -p "${cache}/${key}.tmp" && mv "$work/out/"pyslurm-*.whl "${cache}/${key}.tmp/"
  rm -rf "${cache:?}/${key}" && mv "${cache}/${key}.tmp" "${cache}/${key}"
  wheel="$(find_wheel)"
  echo "build-pyslurm: built ${wheel} in $(( $(date +%s) - start )) s"
else
  echo "build-pyslurm: cached ${wheel}"
fi
flock -u 9

"$PY" -m pip install -q --no-deps --force-reinstall "$wheel"
echo "build-pyslurm: pyslurm ${pyslurm_version} installed into $("$PY" -c 'import sys; print(sys.prefix)')"
