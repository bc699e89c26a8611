#!/usr/bin/env bash
# The pyslurm arm of the contract suite on a Slurm the host's Python cannot load (24.11: libslurm
# 24.11 is Debian trixie's), run where that Slurm lives, as a site would on its Slurm host:
# inside the testbed's Debian root filesystem of that version. `make test` runs it after pytest.
#
#   scripts/pyslurm-rootfs.sh [VERSION] [PYTEST ARGS...]     (default 24.11)
#
# 0. without pyslurm's sources for that Slurm ($PYSLURM_VENDOR_DIR, default ../shared/vendor/pyslurm
#    next to the checkout) it says so and exits 0: nothing to build, the arm is skipped;
# 1. brings the testbed of that version up when it is not (and takes it down at the end, then);
# 2. installs libslurm-dev, python3-dev, python3-venv and a compiler into the root filesystem;
# 3. inside it (through the testbed's chroot, which binds the checkout and the cache at the same
#    paths): a virtualenv in the root filesystem (/usr/local/slurm-fair-venv) with this checkout and
#    pytest (again only when setup.cfg or pyproject.toml changed), then scripts/build-pyslurm.sh
#    for that Slurm: cached like on the host, keyed by Slurm and Python versions and the sources'
#    hash, so only the first run on a machine builds (minutes), later ones install the wheel;
# 4. runs there, against the running testbed: the contract suite's pyslurm arm
#    (SLURM_FAIR_TEST_SLURM_CONF: the suite's "site" Slurm), then both backends' snapshots
#    compared field by field, the site factors of the priority factors RPC against sprio's,
#    the accounts and QOS kept across snapshots, slurmctld's "no change since" answer (every
#    change shows in the next snapshot), and the chaos suite's pyslurm arm (the testbed
#    is found up and reused; SLURM_FAIR_TESTBED_CONFIG as outside);
# 5. counts what ran (pytest's JUnit reports): it fails unless each of the six ran tests with
#    backend=pyslurm and none of them was skipped (a skip here would hide a missing pyslurm).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-24.11}"
[ $# -gt 0 ] && shift
dir="${here}/.testbed-${version}"
root="${dir}/rootfs"
conf="${dir}/etc/slurm.conf"
host_py="${here}/.venv/bin/python"
sf="${here}/.venv/bin/slurm-fair"
vendor="${PYSLURM_VENDOR_DIR:-${here}/../shared/vendor/pyslurm}"
if ! ls "${vendor}/pyslurm-${version}."*.tar.gz >/dev/null 2>&1; then
  echo "pyslurm-rootfs: SKIPPED the pyslurm arm on Slurm ${version}: no pyslurm-${version}.*.tar.gz in ${vendor} (pyslurm's sources are not part of the checkout)"
  exit 0
fi

start=$SECONDS
brought_up=0
if ! "$sf" testbed status --slurm "$version" >/dev/null 2>&1; then
  "$sf" testbed up --slurm "$version"
  brought_up=1
fi
reports="$(mktemp -d "${here}/.pyslurm-rootfs.XXXXXX")"
cleanup() {
  rm -rf "$reports"
  if [ "$brought_up" = 1 ]; then "$sf" testbed down --slurm "$version" || true; fi
}
trap cleanup EXIT
if [ ! -f "${root}/.slurm-fair-rootfs" ] || [ ! -f "$conf" ]; then
  echo "pyslurm-rootfs: no Slurm ${version} testbed in ${dir} (slurm-fair testbed up --slurm ${version})" >&2
  exit 2
fi

echo "pyslurm-rootfs: build tools into the ${version} root filesystem"
DEBIAN_FRONTEND=noninteractive chroot "$root" /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C \
  apt-get install -y -q --no-install-recommends libslurm-dev python3-dev python3-venv gcc libc6-dev >/dev/null

# pip inside trusts what the host's pip trusts: the host's CA bundle (PIP_CERT, else the system's)
# is copied into the root filesystem (a host behind a TLS-inspecting proxy has its CA there only)
cert="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$cert" ]; then
  mkdir -p "${root}/usr/local/share/slurm-fair"
  cp "$cert" "${root}/usr/local/share/slurm-fair/host-ca.crt"
  cert=/usr/local/share/slurm-fair/host-ca.crt
fi

inside() {  # a command inside the root filesystem, with the checkout and the cache bound
  "$host_py" -I -S "${here}/slurm_fair/testbed/chroot.py" "$root" "" \
    /usr/bin/env PATH=/usr/local/slurm-fair-venv/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME="$HOME" \
    PIP_CERT="$cert" SSL_CERT_FILE="$cert" REQUESTS_CA_BUNDLE="$cert" "$@"
}

venv=/usr/local/slurm-fair-venv
if [ ! -x "${root}${venv}/bin/python" ]; then
  inside /usr/bin/python3 -m venv "$venv"
fi
# the checkout's dependencies again only when what declares them changed (the stamp holds their hash)
deps="$(cat "${here}/setup.cfg" "${here}/pyproject.toml" | sha256sum | cut -c1-16)"
stamp="${root}${venv}/.slurm-fair-deps"
if [ "$(cat "$stamp" 2>/dev/null)" != "$deps" ]; then
  inside "${venv}/bin/python" -m pip install -q --upgrade pip
  inside "${venv}/bin/python" -m pip install -q -e "${here}" pytest hypothesis
  echo "$deps" > "$stamp"
fi
inside "${here}/scripts/build-pyslurm.sh" --python "${venv}/bin/python"
echo "pyslurm-rootfs: ready in $((SECONDS - start)) s; the contract suite's pyslurm arm on Slurm ${version}:"
cd "$here"
inside /usr/bin/env SLURM_FAIR_TEST_SLURM_CONF="$conf" \
  "${venv}/bin/python" -m pytest -m slurm -p no:cacheprovider -q -k pyslurm --junitxml "${reports}/contract.xml" \
  "${here}/tests/slurm/test_contract.py" "$@"
echo "pyslurm-rootfs: both backends compared, and the chaos suite's pyslurm arm, on Slurm ${version}:"
inside "${venv}/bin/python" -m pytest -m slurm --slurm-versions "$version" -p no:cacheprovider -q \
  -k "pyslurm or agree" --junitxml "${reports}/agree-chaos.xml" \
  "${here}/tests/slurm/test_backends_agree.py" "${here}/tests/slurm/test_libslurm_prio_real.py" \
  "${here}/tests/slurm/test_dbd_cache_real.py" "${here}/tests/slurm/test_pyslurm_nochange_real.py" \
  "${here}/tests/controller/test_pilot_real.py" "$@"
"$host_py" "${here}/scripts/junit_counts.py" --version "$version" --took $((SECONDS - start)) \
  "contract=${reports}/contract.xml" "agree=${reports}/agree-chaos.xml:test_backends_agree" \
  "prio=${reports}/agree-chaos.xml:test_libslurm_prio_real" "kept=${reports}/agree-chaos.xml:test_dbd_cache_real" \
  "nochange=${reports}/agree-chaos.xml:test_pyslurm_nochange_real" \
  "chaos=${reports}/agree-chaos.xml:test_pilot_real"
