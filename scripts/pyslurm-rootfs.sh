#!/usr/bin/env bash
# The pyslurm arm of the contract suite on a Slurm the host's Python cannot load (24.11: libslurm
# 24.11 is Debian trixie's), run where that Slurm lives, as a site would on its Slurm host:
# inside the testbed's Debian root filesystem of that version.
#
#   scripts/pyslurm-rootfs.sh [VERSION]        (default 24.11; its testbed must be up:
#                                              slurm-fair testbed up --slurm VERSION)
#
# 1. installs libslurm-dev, python3-dev, python3-venv and a compiler into the root filesystem;
# 2. inside it (through the testbed's chroot, which binds the checkout and the cache at the same
#    paths): a virtualenv in the root filesystem (/usr/local/slurm-fair-venv) with this checkout and
#    pytest, then scripts/build-pyslurm.sh for that Slurm (cached like on the host, keyed by
#    Slurm and Python versions);
# 3. runs there, against the running testbed: the contract suite's pyslurm arm
#    (SLURM_FAIR_TEST_SLURM_CONF: the suite's "site" Slurm), then both backends' snapshots
#    compared field by field and the chaos suite's pyslurm arm (the testbed is found up and
#    reused; SLURM_FAIR_TESTBED_CONFIG as outside), printing pytest's summaries.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-24.11}"
[ $# -gt 0 ] && shift
dir="${here}/.testbed-${version}"
root="${dir}/rootfs"
conf="${dir}/etc/slurm.conf"
host_py="${here}/.venv/bin/python"
if [ ! -f "${root}/.slurm-fair-rootfs" ] || [ ! -f "$conf" ]; then
  echo "pyslurm-rootfs: no Slurm ${version} testbed in ${dir} (slurm-fair testbed up --slurm ${version})" >&2
  exit 2
fi

start=$SECONDS
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

if [ ! -x "${root}/usr/local/slurm-fair-venv/bin/python" ]; then
  inside /usr/bin/python3 -m venv /usr/local/slurm-fair-venv
fi
inside /usr/local/slurm-fair-venv/bin/python -m pip install -q --upgrade pip
inside /usr/local/slurm-fair-venv/bin/python -m pip install -q -e "${here}" pytest hypothesis
inside "${here}/scripts/build-pyslurm.sh" --python /usr/local/slurm-fair-venv/bin/python
echo "pyslurm-rootfs: ready in $((SECONDS - start)) s; the contract suite's pyslurm arm on Slurm ${version}:"
cd "$here"
inside /usr/bin/env SLURM_FAIR_TEST_SLURM_CONF="$conf" \
  /usr/local/slurm-fair-venv/bin/python -m pytest -m slurm -p no:cacheprovider -q -k pyslurm \
  "${here}/tests/slurm/test_contract.py" "$@"
echo "pyslurm-rootfs: both backends compared, and the chaos suite's pyslurm arm, on Slurm ${version}:"
inside /usr/local/slurm-fair-venv/bin/python -m pytest -m slurm --slurm-versions "$version" -p no:cacheprovider -q \
  -k "pyslurm or agree" "${here}/tests/slurm/test_backends_agree.py" "${here}/tests/controller/test_pilot_real.py" "$@"
