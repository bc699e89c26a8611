"""Every option of ``simulate``, ``solve`` and ``testbed replay`` given what a careless or hostile
user types (issue 18): refused at parse time with exit 2 and one message naming the option,
before any run, solve or testbed action (``--round-s nan`` and ``--round-s 1e-9`` once ran for
ever), within a time bound, nothing left in TMPDIR.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from .bounded import bounded, scratch
from .harness import assert_refused, run

TRACE = ("tenant,job_id,job_type,gpus,total_steps,arrival_s\n"
         "a,1,ResNet-50 (batch size 32),1,1000,0\nb,1,A3C,2,500,60\n")
PROBLEM = '{"gpu_types": {"v100": 4}, "jobs": [{"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1}}]}'

#: what no float option accepts
NOT_FLOATS = ["nan", "NaN", "inf", "-inf", "1e400", "-1e400", "abc", "", "1_0", "١", "0x10", "1e", "--", "5\n6"]
#: float options -> NOT_FLOATS plus their own out-of-range values
FLOATS = {
    ("simulate", "--round-s"): ["0", "-1", "1e-9", "0.5", "1e300"],
    ("simulate", "--restart-s"): ["-1", "1e300", "86401"],
    ("simulate", "--requeue-hold-s"): ["-1", "1e300"],
    ("simulate", "--fork-sync"): ["-0.1", "1", "2"],
    ("simulate", "--horizon-h"): ["0", "-1", "1e300"],
    ("simulate", "--rate"): ["0", "-1", "1e-9", "1e300"],
    ("simulate", "--max-duration-h"): ["0", "-1", "1e300", "1e-12", "0.0001"],
    ("simulate", "--node-speed-spread"): ["-0.1", "1", "5"],
    ("solve", "--time-limit"): ["0", "-1", "0.01", "1e300"],
    ("replay", "--time-scale"): ["0", "-1", "1e-9", "1e300"],
    ("replay", "--timeout"): ["0", "-1", "1e300"],
    ("replay", "--round-s"): ["0", "-1", "1e-9"],
}
#: what no integer option accepts: int() reads Unicode digits and underscores, Integer does not
NOT_INTS = ["٣", "２", "1_0", "١٠", " 1_0", "+", ""]
#: integer options -> values they refuse (beyond NOT_INTS)
INTS = {
    ("simulate", "--seed"): ["-1", "1e3", "1.5", "nan", "9" * 40, "abc"],
    ("simulate", "--synthetic"): ["0", "-1", "10000000", "1.5", "nan"],
    ("simulate", "--tenants"): ["0", "-1", "1.5", "nan", "9" * 40],
    ("simulate", "--max-jobs"): ["0", "-1", "1.5", "nan"],
    ("simulate", "--gpus-per-node"): ["0", "-1", "10000000", "nan"],
    ("simulate", "--resolve-every"): ["0", "-1", "1.5"],
}
#: option items parsed by the command -> values they refuse
SPECS = {
    "--cluster": ["v100=٤", "v100=1e3", "v100=-1", "v100=10000000", "v100=4\nk80=4", "v100=0", "=4", "v100", ":::",
                  "1:2", "v100=4,v100=4", "v100=0x4", "v100=4x0", "v100=99999999999999999999999999x1",
                  "a" * 5000 + "=1", "a100=4", "v100=nan", "v100=inf", "v100=1_000", " ", ""],
    "--policy-option": ["hops.lambda=nan", "hops.lambda=inf", "hops.lambda=1e400", "hops.nope=1", "nope.x=1",
                        "hops.lambda", "hops.lambda=abc", "=1", "hops.lambda=1e9", "",
                        "hops.lambda=2"],  # a policy that is not run (only fifo is)
    "--weight": ["a=nan", "a=inf", "a=0", "a=-1", "a=1e9", "a=1e-9", "=1", "a", "a=x", "a=١",
                 "zzz=2", "a\n=2", "\u2028=2"],  # not a tenant of the trace; not a tenant name
    "--window": ["nan:5", "5:nan", "5:1", "-1:5", "abc", "5", "1e400:", "١:5", "5:5", ""],
    "--node-speed": ["v100-1=nan", "v100-1=0", "v100-1=-1", "v100-1=1e400", "v100-1=1e9", "v100-1", "nope=1"],
}


def _argv(command: str, option: str, value: str, work: Path) -> list[str]:
    trace, problem = work / "t.csv", work / "p.json"
    trace.write_text(TRACE)
    problem.write_text(PROBLEM)
    if command == "solve":
        return ["solve", "--input", problem, "--policy", "fifo", option, value]
    if command == "replay":  # click refuses before any testbed is touched
        return ["testbed", "replay", "--trace", trace, "--policy", "fifo", "--time-scale", "60",
                "--dir", work / "nowhere", option, value]
    argv = ["simulate", "--policy", "fifo", "--trace", trace, "--cluster", "v100=4,k80=4", "-q", "--no-fairness-checks"]
    if option == "--node-speed":
        argv += ["--gpus-per-node", "2"]
    if option == "--cluster":
        argv = [a for a in argv if a != "v100=4,k80=4" and a != "--cluster"]
    return argv + [option, value]


class Started(AssertionError):
    """A refused option let a testbed replay start."""


def _no_testbed(*args: object, **kwargs: object) -> None:
    raise Started("the replay reached the testbed")


def _refused(command: str, option: str, value: str, needle: str) -> None:
    with scratch() as work, bounded(60), mock.patch("slurm_fair.commands.replay.Testbed", _no_testbed):
        rc, out, err = run(_argv(command, option, value, work))
        assert_refused(rc, err, needle)
        assert out == ""
        assert not (work / "nowhere").exists()


@settings(max_examples=scaled(250), deadline=None)
@given(st.sampled_from(sorted(FLOATS)).flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(NOT_FLOATS + FLOATS[k]))))
def test_float_options_are_finite_and_in_range(case: tuple[tuple[str, str], str]) -> None:
    (command, option), value = case
    _refused(command, option, value, option)


@settings(max_examples=scaled(120), deadline=None)
@given(st.sampled_from(sorted(INTS)).flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(NOT_INTS + INTS[k]))))
def test_integer_options_are_in_range(case: tuple[tuple[str, str], str]) -> None:
    (command, option), value = case
    _refused(command, option, value, option)


@settings(max_examples=scaled(150), deadline=None)
@given(st.sampled_from(sorted(SPECS)).flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(SPECS[k]))))
def test_option_items_name_the_option(case: tuple[str, str]) -> None:
    option, value = case
    needle = {"--policy-option": "", "--cluster": ""}.get(option, option)
    _refused("simulate", option, value, needle)


@settings(max_examples=scaled(40), deadline=None)
@given(st.text(max_size=30))
def test_any_cluster_spec_is_a_cluster_or_refused(spec: str) -> None:
    with scratch() as work, bounded(60):
        argv = _argv("simulate", "--cluster", spec, work)
        rc, _, err = run(argv)
        assert rc in (0, 2) and "Traceback" not in err
        if rc == 2:
            assert_refused(rc, err)


# --- the probes of issue 18, one by one ------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "1e-9"])
def test_round_s_that_ran_forever_is_refused(value: str) -> None:
    _refused("simulate", "--round-s", value, "--round-s")


def test_a_run_of_too_many_rounds_is_refused_before_it_starts(tmp_path: Path) -> None:
    with scratch() as work, bounded(30):
        rc, _, err = run(["simulate", "--policy", "fifo", "--synthetic", "20000", "--cluster", "v100=1",
                          "--round-s", "1", "-q"])
        assert_refused(rc, err, "rounds", "--round-s", "--horizon-h")
        del work


@pytest.mark.parametrize("option, value, needle", [
    ("--json", "nodir/x.json", "directory nodir does not exist"),
    ("--plot", "x.xyz", "unknown picture format"),
    ("--plot", "nodir/x.png", "directory nodir does not exist"),
    ("--save-workload", "/dev/null", "not a regular file"),
    ("-o", "/proc/x", "cannot write"),
])
def test_output_paths_are_checked_before_the_run(option: str, value: str, needle: str, monkeypatch) -> None:
    """Refused at once: a run of 10^6 jobs would take hours, the check must come first."""
    import slurm_fair.commands.simulate as cmd

    monkeypatch.setattr(cmd.scenario, "build", lambda *a: pytest.fail("the run started"))
    with scratch() as work:
        monkeypatch.chdir(work)
        rc, _, err = run(["simulate", "--policy", "fifo", "--synthetic", "5", "--cluster", "v100=4", "-q",
                          option, value])
        assert_refused(rc, err, value, needle)


@pytest.mark.parametrize("value", ["٨٠", "8_0", "٨0", "65536", "-1"])
def test_run_metrics_port_reads_ascii_digits_only(value: str) -> None:
    """``run --metrics-port ٨٠`` listened on port 80: refused when options are parsed (no
    configuration is read, no Slurm reached)."""
    with scratch(), bounded(30):
        rc, _, err = run(["run", "--once", "--metrics-port", value])
        assert_refused(rc, err, "--metrics-port")


def test_every_integer_option_of_every_command_is_an_ascii_integer() -> None:
    """No command declares an integer option with click's int types (they read ``٣`` and ``1_0``)."""
    import click

    from slurm_fair.cli import cli
    from slurm_fair.inputs import Integer

    ctx = click.Context(cli)
    found = []

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, f"{path} {name}")
            return
        for param in cmd.params:
            assert not isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)), \
                f"{path} {param.opts}: {param.type!r} (use inputs.Integer / inputs.FiniteFloat)"
            if isinstance(param.type, Integer):
                found.append(param.opts[0])

    walk(cli, "slurm-fair")
    assert {"--synthetic", "--seed", "--tenants", "--metrics-port"} <= set(found)


def test_synthetic_jobs_never_have_zero_steps() -> None:
    """The shortest --max-duration-h (one second) still draws jobs of at least MIN_STEPS, and
    the saved workload is a trace simulate reads back; no numpy warning is printed."""
    import warnings

    with scratch() as work, bounded(60), warnings.catch_warnings():
        warnings.simplefilter("error")
        saved = work / "w.csv"
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--synthetic", "8", "--cluster", "v100=8,k80=8",
                          "--max-duration-h", str(1 / 3600), "--save-workload", saved])
        assert rc == 0, err
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", saved, "--cluster", "v100=8,k80=8"])
        assert rc == 0, err


def test_a_weight_for_a_synthetic_tenant_not_drawn_is_accepted() -> None:
    """``--weight tenant-4=2`` with ``--tenants 4`` names a tenant of --synthetic even when no
    job of it happens to be drawn; ``tenant-5`` is refused with the list."""
    with scratch(), bounded(60):
        base = ["simulate", "--policy", "fifo", "-q", "--synthetic", "1", "--tenants", "4", "--cluster", "v100=8"]
        rc, _, err = run([*base, "--weight", "tenant-4=2"])
        assert rc == 0, err
        rc, _, err = run([*base, "--weight", "tenant-5=2"])
        assert_refused(rc, err, "tenant-5", "tenant-1, tenant-2, tenant-3, tenant-4")
