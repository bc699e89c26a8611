#!/usr/bin/env bash
# The pytest stage of `make test` (after ruff, mypy and the pyslurm build), split into lanes that
# run side by side. Most of the suite waits on Slurm (a job to start, a daemon to come back, a
# controller cycle) rather than computing, and each Slurm version's testbed has its own ports
# (the version's port shift), state directory and root filesystem, so the versions need not queue
# behind each other. Every test still runs, exactly once, in one of:
#
#   unit          pytest -m "not slurm and not docker"   (the CPU-bound part; -n with pytest-xdist
#                 when CI_UNIT_WORKERS > 1, default 2)
#   slurm-V       pytest -m slurm --slurm-versions V for each version V of --slurm-versions'
#                 default ($SLURM_FAIR_TEST_VERSIONS, else all the testbed knows); the first
#                 version's lane also runs the real tests of no version (private testbeds on free
#                 ports); each lane then runs scripts/pyslurm-rootfs.sh V when V is in PYSLURM_ROOTFS
#   docker        pytest -m docker (the compose cluster in a private dockerd)
#
# Each lane runs in its own process group under a time limit (CI_LANE_TIMEOUT seconds, default
# 3600) and writes a log; a lane's log is printed whole when it ends, so the output reads lane by
# lane, and a summary names every lane with its result and time. Ctrl-C or SIGTERM interrupts
# every lane (SIGINT: pytest tears its testbeds down), waits for them, then takes down any
# testbed that was not up before this script started. Extra arguments go to every pytest.
#
#   CI_LANES="unit slurm-22.05"   run only these lanes (default: all)
#   SLURM_FAIR_TEST_VERSIONS=22.05,24.11   the versions, hence the lanes (not --slurm-versions in
#                                 the extra arguments: every lane would then run those versions)
#   CI_HEARTBEAT_S=300            how often a line names the lanes still running
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VENV=${VENV:-.venv}
PYTEST=$VENV/bin/pytest
SF=$VENV/bin/slurm-fair
TIMEOUT=${CI_LANE_TIMEOUT:-3600}
WORKERS=${CI_UNIT_WORKERS:-2}
extra=("$@")

mapfile -t versions < <("$VENV/bin/python" - <<'EOF'
import os
from slurm_fair.testbed.rootfs import VERSIONS
wanted = os.environ.get("SLURM_FAIR_TEST_VERSIONS", ",".join(VERSIONS))
print("\n".join(v.strip() for v in wanted.split(",") if v.strip()))
EOF
)
rootfs_versions=" ${PYSLURM_ROOTFS:-} "

logdir=$(mktemp -d "${TMPDIR:-/tmp}/slurm-fair-ci.XXXXXX")
declare -A cmd pid start status took
order=()

lane() {  # NAME COMMAND: a lane is one bash command line
    if [[ -n ${CI_LANES:-} && " $CI_LANES " != *" $1 "* ]]; then return; fi
    order+=("$1")
    cmd[$1]=$2
}

q() { printf '%q ' "$@"; }  # quote words for a lane's command line

# pytest's command line in a lane. With extra arguments (a path, a -k) a lane may select nothing:
# pytest's "no tests collected" (exit 5) then passes; in the full run it fails the lane, as any
# lane that ran nothing would be a split gone wrong.
pytest_line() {  # PYTEST ARGS... (nice=1: at a lower priority)
    local run=("$PYTEST")
    [[ -z ${nice:-} ]] || run=(nice -n 10 "$PYTEST")
    if [[ ${#extra[@]} -gt 0 ]]; then
        echo "rc=0; $(q "${run[@]}" "$@" "${extra[@]}") || rc=\$?; [ \$rc = 0 ] || [ \$rc = 5 ] || exit \$rc"
    else
        q "${run[@]}" "$@"
    fi
}

xdist=()
if [[ $WORKERS -gt 1 ]] && "$VENV/bin/python" -c 'import xdist' 2>/dev/null; then
    xdist=(-n "$WORKERS")
fi
# niced: the unit tests compute, the real tests wait on Slurm daemons that must get a core when
# they wake (the tests bound how long Slurm may take to start a job)
lane unit "$(nice=1 pytest_line -m "not slurm and not docker" "${xdist[@]}")"
first=1
for v in "${versions[@]}"; do
    sel=(-m slurm --slurm-versions "$v")
    # the first lane runs the tests of no version too; the others only their version's
    [[ $first == 1 ]] || sel+=(-k "slurm$v")
    line="$(pytest_line "${sel[@]}")"
    if [[ $rootfs_versions == *" $v "* ]]; then
        line+="; $(q scripts/pyslurm-rootfs.sh "$v")"
    fi
    lane "slurm-$v" "$line"
    first=0
done
lane docker "$(pytest_line -m docker)"

# which testbeds were up before: an interrupted run takes down only the others
declare -A was_up
for v in "${versions[@]}"; do
    if "$SF" testbed status --slurm "$v" >/dev/null 2>&1; then was_up[$v]=1; fi
done

interrupted=0
stop_lanes() {
    interrupted=1
    trap '' INT TERM
    echo "ci-lanes: interrupted: stopping the lanes still running" >&2
    for name in "${order[@]}"; do
        [[ -n ${status[$name]:-} ]] || kill -INT -- "-${pid[$name]}" 2>/dev/null || true
    done
    local deadline=$((SECONDS + 120))
    for name in "${order[@]}"; do
        [[ -n ${status[$name]:-} ]] && continue
        while kill -0 "${pid[$name]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 1; done
        kill -KILL -- "-${pid[$name]}" 2>/dev/null || true
    done
    for v in "${versions[@]}"; do
        [[ -n ${was_up[$v]:-} ]] && continue
        if "$SF" testbed status --slurm "$v" >/dev/null 2>&1; then
            echo "ci-lanes: taking down the Slurm $v testbed this run brought up" >&2
            "$SF" testbed down --slurm "$v" >&2 || true
        fi
    done
    echo "ci-lanes: lane logs in $logdir" >&2
    exit 130
}
trap stop_lanes INT TERM

set -m  # every lane in a process group of its own (SIGINT reaches pytest and its children)
for name in "${order[@]}"; do
    start[$name]=$SECONDS
    timeout -s INT -k 120 "$TIMEOUT" bash -c "set -e; ${cmd[$name]}" >"$logdir/$name.log" 2>&1 </dev/null &
    pid[$name]=$!
    echo "ci-lanes: $name started: ${cmd[$name]}"
done
set +m

left=${#order[@]}
beat=$((SECONDS + ${CI_HEARTBEAT_S:-300}))
while ((left > 0)); do
    sleep 2 &
    wait $! || true
    if ((SECONDS >= beat)); then  # a line now and then, so a long lane is seen to move
        beat=$((SECONDS + ${CI_HEARTBEAT_S:-300}))
        for name in "${order[@]}"; do
            [[ -n ${status[$name]:-} ]] && continue
            echo "ci-lanes: $name running ($((SECONDS - start[$name])) s): $(tail -c 2000 "$logdir/$name.log" \
                | tr '\r' '\n' | grep -v '^[[:space:]]*$' | tail -1 | cut -c1-100)"
        done
    fi
    for name in "${order[@]}"; do
        [[ -n ${status[$name]:-} ]] && continue
        kill -0 "${pid[$name]}" 2>/dev/null && continue
        rc=0
        wait "${pid[$name]}" || rc=$?
        took[$name]=$((SECONDS - start[$name]))
        if [[ $rc == 0 ]]; then status[$name]=passed
        elif [[ $rc == 124 ]]; then status[$name]="FAILED: timed out after $TIMEOUT s"
        else status[$name]="FAILED (exit $rc)"; fi
        left=$((left - 1))
        echo "===================== lane $name: ${status[$name]} (${took[$name]} s) ====================="
        cat "$logdir/$name.log"
        echo "===================== end of lane $name: ${status[$name]} ====================="
    done
done
trap - INT TERM

failed=0
echo "ci-lanes: summary (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for name in "${order[@]}"; do
    printf '  %-14s %-40s %5d s\n' "$name" "${status[$name]}" "${took[$name]}"
    [[ ${status[$name]} == passed ]] || failed=1
done
if [[ $failed == 1 ]]; then
    echo "ci-lanes: FAILED; lane logs in $logdir" >&2
    exit 1
fi
rm -rf "$logdir"
