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
# A version of CI_SPLIT_VERSIONS (default 22.05, the longest lane) runs as two lanes instead,
# slurm-V-a and slurm-V-b, each on a testbed of its own: `--slurm-lane b` runs the tests
# tests/slurm-lane-b.txt names (balanced by measured durations, docs/performance.md "CI time"),
# `--slurm-lane a` every other one, so a new test file lands in a. The b lane's testbed is the
# same description with every port moved by CI_SPLIT_PORT_SHIFT (default 500; the versions' own
# shifts are multiples of 1000) in the state directory <the default one>-b. Lane a first lists
# the whole selection (pytest --collect-only), both write JUnit reports, and when both have run
# scripts/lane_split_check.py checks that every collected test ran in exactly one half (a
# summary row, split-V, fails otherwise).
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
#   CI_SPLIT_VERSIONS=22.05       the versions run as two lanes ("" : none)
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
split_versions=" ${CI_SPLIT_VERSIONS-22.05} "
shift_b=${CI_SPLIT_PORT_SHIFT:-500}
# the b lanes' testbeds: the default state directory's name plus -b (a version's own suffix,
# -24.11, then follows), every port moved by shift_b
dir_b="$("$VENV/bin/python" -c 'from slurm_fair.testbed.layout import default_dir; print(default_dir())')-b"
env_b=(env "SLURM_FAIR_TESTBED_DIR=$dir_b" "SLURM_FAIR_TESTBED_PORT_SHIFT=$shift_b")

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
split=()
for v in "${versions[@]}"; do
    sel=(-m slurm --slurm-versions "$v")
    # the first lane runs the tests of no version too; the others only their version's
    [[ $first == 1 ]] || sel+=(-k "slurm$v")
    pyslurm_arm=""
    if [[ $rootfs_versions == *" $v "* ]]; then
        pyslurm_arm="; $(q scripts/pyslurm-rootfs.sh "$v")"
    fi
    if [[ $split_versions == *" $v "* ]]; then
        # the whole selection first (what the split check compares with), then half a; half b
        # on its own testbed; each half's JUnit report for the check
        collect="rc=0; $(q "$PYTEST" --collect-only -q -p no:cacheprovider "${sel[@]}" "${extra[@]}") \
>$(q "$logdir/slurm-$v.collected") || rc=\$?; [ \$rc = 0 ] || [ \$rc = 5 ] || exit \$rc"
        lane "slurm-$v-a" "$collect; $(pytest_line "${sel[@]}" --slurm-lane a --junitxml "$logdir/slurm-$v-a.xml")$pyslurm_arm"
        lane "slurm-$v-b" "export $(q "${env_b[@]:1}"); $(pytest_line "${sel[@]}" --slurm-lane b --junitxml "$logdir/slurm-$v-b.xml")"
        split+=("$v")
    else
        lane "slurm-$v" "$(pytest_line "${sel[@]}")$pyslurm_arm"
    fi
    first=0
done
lane docker "$(pytest_line -m docker)"

# which testbeds were up before: an interrupted run takes down only the others
testbeds=()  # "VERSION" or "VERSION b" (a b lane's)
for v in "${versions[@]}"; do
    testbeds+=("$v")
    [[ $split_versions != *" $v "* ]] || testbeds+=("$v b")
done
tb_cmd() {  # TESTBED WORDS...: slurm-fair testbed WORDS for that testbed
    local tb=$1
    shift
    if [[ $tb == *" b" ]]; then "${env_b[@]}" "$SF" testbed "$@" --slurm "${tb% b}"
    else "$SF" testbed "$@" --slurm "$tb"; fi
}
declare -A was_up
for tb in "${testbeds[@]}"; do
    if tb_cmd "$tb" status >/dev/null 2>&1; then was_up[$tb]=1; fi
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
    for tb in "${testbeds[@]}"; do
        [[ -n ${was_up[$tb]:-} ]] && continue
        if tb_cmd "$tb" status >/dev/null 2>&1; then
            echo "ci-lanes: taking down the Slurm $tb testbed this run brought up" >&2
            tb_cmd "$tb" down >&2 || true
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

# every test of a split version ran in exactly one of its two lanes
for v in "${split[@]}"; do
    a=slurm-$v-a b=slurm-$v-b
    [[ -n ${status[$a]:-} && -n ${status[$b]:-} ]] || continue  # CI_LANES left one out
    name=split-$v
    order+=("$name")
    took[$name]=0
    if [[ ${status[$a]} != passed || ${status[$b]} != passed ]]; then
        status[$name]="not checked: a lane failed"
    elif [[ -s $logdir/slurm-$v.collected && -s $logdir/$a.xml && -s $logdir/$b.xml ]] \
        && "$VENV/bin/python" scripts/lane_split_check.py --name "slurm-$v" "$logdir/slurm-$v.collected" \
            "$logdir/$a.xml" "$logdir/$b.xml"; then
        status[$name]=passed
    else
        status[$name]="FAILED: a test dropped or run twice"
    fi
done

failed=0
echo "ci-lanes: summary (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for name in "${order[@]}"; do
    printf '  %-16s %-40s %5d s\n' "$name" "${status[$name]}" "${took[$name]}"
    [[ ${status[$name]} == passed ]] || failed=1
done
if [[ $failed == 1 ]]; then
    echo "ci-lanes: FAILED; lane logs in $logdir" >&2
    exit 1
fi
rm -rf "$logdir"
