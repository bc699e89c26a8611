#!/usr/bin/env bash
# The package on every Python it supports, as a site would get it (issue 31).
#
#   scripts/ci-pythons.sh wheel VERSION...  install dist/*.whl (make dist) into a clean virtualenv
#                                           per version, in a directory away from the checkout,
#                                           and run the smoke set from there
#   scripts/ci-pythons.sh unit VERSION...   the unit tests (no testbed, no docker) on each version,
#                                           from a virtualenv of its own (.venv-pyX.Y)
#
# An interpreter is found at run time: pythonX.Y on PATH, else pyenv's (`pyenv root`, or
# $PYENV_ROOT) newest X.Y.*. A version this host lacks is skipped with a line saying so; with
# REQUIRE_PYTHONS=1 that is a failure instead.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

find_python() {  # VERSION -> an interpreter's path on stdout, or nothing
    local v=$1 root cand
    if cand=$(command -v "python$v" 2>/dev/null) && "$cand" -c 'import venv' 2>/dev/null; then
        echo "$cand"; return
    fi
    root=${PYENV_ROOT:-}
    if [[ -z $root ]] && command -v pyenv >/dev/null 2>&1; then root=$(pyenv root); fi
    [[ -z $root && -d $HOME/.pyenv ]] && root=$HOME/.pyenv
    [[ -n $root ]] || return 0
    for cand in $(ls -d "$root/versions/$v".* 2>/dev/null | sort -t. -k3,3n -r); do
        if [[ -x $cand/bin/python$v ]]; then echo "$cand/bin/python$v"; return; fi
    done
}

skip_or_fail() {  # VERSION
    if [[ ${REQUIRE_PYTHONS:-0} == 1 ]]; then
        echo "FAIL: Python $1 not found (PATH, pyenv) and REQUIRE_PYTHONS=1" >&2; exit 1
    fi
    echo "SKIPPED: Python $1: no python$1 on PATH nor in pyenv"
}

# Slurm's client commands as scripts/recorded-slurm: what a real Slurm 24.11 printed (a recording
# shipped inside the wheel), so `snapshot` and `report` run the installed package's real adapter
# and parsers end to end without a cluster.
make_slurm_stubs() {  # BINDIR
    local cmd
    mkdir -p "$1"
    for cmd in sacct sinfo squeue sprio sacctmgr scontrol; do ln -sf "$REPO/scripts/recorded-slurm" "$1/$cmd"; done
}

smoke() {  # VENV WORKDIR: the smoke set, run from WORKDIR with the venv's slurm-fair
    local venv=$1 work=$2 sf share
    sf=$venv/bin/slurm-fair
    share=$venv/share/slurm-fair
    cd "$work"
    SLURM_FAIR_RECORDING=$("$venv/bin/python" -c \
        'from slurm_fair.slurm.fake import recordings_dir; print(recordings_dir() / "testbed-24.11")')
    export SLURM_FAIR_RECORDING
    make_slurm_stubs "$work/slurm-bin"
    set -x
    [[ $("$sf" --version) == "slurm-fair, version $VERSION" ]]
    "$sf" policies >policies.txt
    grep -q '^oef' policies.txt
    "$sf" simulate -q --policy oef --policy max-throughput --synthetic 12 --tenants 2 \
        --cluster v100=4,k80=4 --max-duration-h 1 --json sim.json
    "$venv/bin/python" -c 'import json,sys; d=json.load(open("sim.json")); sys.exit(not d)'
    printf '[controller]\nstate_dir = "%s/state"\n[report]\nwindow_days = 1\n' "$work" >slurm-fair.toml
    PATH=$work/slurm-bin:$PATH "$sf" snapshot --config slurm-fair.toml --json >problem.json
    "$sf" solve --input problem.json --policy oef -o alloc.json
    grep -q '"allocation"' alloc.json
    "$sf" render-config --config "$share/conf/slurm-fair.toml" --inventory "$share/conf/testbed.toml" \
        --output-dir deploy
    test -s deploy/job_submit.lua && test -s deploy/gres.conf
    PATH=$work/slurm-bin:$PATH "$sf" report --config slurm-fair.toml \
        --since 2026-11-25T05:00:00 --until 2026-11-25T07:00:00 >report.txt
    grep -q Tenants report.txt
    PATH=$work/slurm-bin:$PATH "$sf" report --config slurm-fair.toml \
        --since 2026-11-25T05:00:00 --until 2026-11-25T07:00:00 --format html -o report.html
    grep -q '<html' report.html
    set +x
    cd "$REPO"
}

wheel_one() {  # VERSION: the wheel into a clean virtualenv on that Python, the smoke set from there
    local v=$1 py tmp t0=$SECONDS
    py=$(find_python "$v")
    if [[ -z $py ]]; then skip_or_fail "$v"; return 3; fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/slurm-fair-wheel-$v.XXXXXX")
    echo "== wheel on Python $v ($py) in $tmp"
    "$py" -m venv "$tmp/venv"
    "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel_file[highs]" 2>&1 \
        | { grep -v "^WARNING: Location" || true; }
    mkdir "$tmp/work"
    smoke "$tmp/venv" "$tmp/work"
    rm -rf "$tmp"
    echo "== wheel on Python $v: smoke set passed ($((SECONDS - t0)) s)"
}

wheel() {
    local v
    wheel_file=$(ls "$REPO"/dist/slurm_fair-*.whl 2>/dev/null | head -1)
    [[ -n $wheel_file ]] || { echo "no wheel in dist/: run make dist first" >&2; exit 1; }
    VERSION=$(basename "$wheel_file" | cut -d- -f2)
    side_by_side wheel_one "$@"
    echo "wheel: smoke set passed on $passed of $# Python versions"
}

unit_one() {  # VERSION: the unit tests on that Python, from a virtualenv of its own
    local v=$1 py venv t0=$SECONDS
    py=$(find_python "$v")
    if [[ -z $py ]]; then skip_or_fail "$v"; return 3; fi
    venv=$REPO/.venv-py$v
    echo "== unit tests on Python $v ($py)"
    if [[ ! -f $venv/.installed || $venv/.installed -ot setup.cfg ]]; then
        rm -rf "$venv"
        "$py" -m venv "$venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test,highs]'
        touch "$venv/.installed"
    fi
    "$venv/bin/pytest" -q -p no:cacheprovider -m "not slurm and not docker" ${PYTEST_ARGS:-}
    echo "== unit tests on Python $v passed ($((SECONDS - t0)) s)"
}

unit() {
    side_by_side unit_one "$@"
}

# FUNCTION VERSION...: FUNCTION for every version at once (each mostly waits on pip or runs on a
# core of its own), each into a log printed whole when all are done, in the order given; a
# skipped version (exit 3) is not a failure. Ctrl-C or SIGTERM stops them all (their temporary
# directories are under TMPDIR). Sets `passed`; exits 1 naming the versions that failed.
side_by_side() {
    local fn=$1 v rc failed=() logs
    shift
    logs=$(mktemp -d "${TMPDIR:-/tmp}/slurm-fair-pythons.XXXXXX")
    declare -A pids
    trap 'for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null; done; rm -rf "$logs"; exit 130' INT TERM
    set -m  # each version in a process group of its own, so a stop reaches pip and pytest too
    for v in "$@"; do
        ( set -e; "$fn" "$v" ) >"$logs/$v.log" 2>&1 </dev/null &
        pids[$v]=$!
    done
    set +m
    passed=0
    for v in "$@"; do
        rc=0
        wait "${pids[$v]}" || rc=$?
        cat "$logs/$v.log"
        case $rc in
            0) passed=$((passed + 1)) ;;
            3) ;;
            *) echo "FAILED: Python $v (exit $rc)"; failed+=("$v") ;;
        esac
    done
    trap - INT TERM
    rm -rf "$logs"
    if [[ ${#failed[@]} -gt 0 ]]; then echo "FAILED on Python ${failed[*]}" >&2; exit 1; fi
}

case ${1:-} in
    wheel) shift; wheel "$@" ;;
    unit) shift; unit "$@" ;;
    *) echo "usage: $0 wheel|unit VERSION..." >&2; exit 2 ;;
esac
