#!/usr/bin/env bash
# Install the Debian packages the local Slurm testbed needs, only when some are missing
# (debootstrap: the Slurm 24.11 testbed's Debian trixie root filesystem; prometheus: only for
# promtool, which the tests run on the rendered alert rules -- its daemon is stopped and disabled;
# libslurm-dev: Slurm's headers and library, to build pyslurm for the host's Slurm (make pyslurm);
# docker.io + docker-compose: dockerd 20.10 and compose v1 for the docker test, tests/docker/, which
# starts its own private dockerd -- the system's docker service is stopped and disabled likewise).
# Idempotent: a machine that has them all returns at once without touching apt.
set -euo pipefail

PACKAGES=(slurm-wlm slurmdbd slurm-client munge mariadb-server mariadb-client lua5.1 chromium debootstrap prometheus
          docker.io docker-compose libslurm-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "The testbed needs these Debian packages: ${missing[*]}" >&2
  echo "Run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts the Prometheus server on install; we only want promtool.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
# Nor the system's Docker engine: the docker test runs a private dockerd of its own.
if [[ " ${missing[*]} " == *" docker.io "* ]] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now docker.socket docker.service containerd.service >/dev/null 2>&1 || true
fi
