"""The pyslurm backend without pyslurm: its conversion replayed from a real recording, its choice
of backend, its writes' routing and errors against a stand-in module, the build script's refusals.

``recorded_pyslurm.json`` holds, from one moment of a busy 22.05 testbed, pyslurm's raw records
and the command line's snapshot (``test_backends_agree.py`` with ``SLURM_FAIR_RECORD_PYSLURM``):
the conversion must give exactly the command line's jobs, nodes and partitions.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from slurm_fair.errors import JobGone, SlurmCommandError, SlurmUnavailable
from slurm_fair.slurm import backend_info
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.pyslurm_port import PyslurmPort, _slurm_error, choose, major_minor
from slurm_fair.slurm.pyslurm_records import (
    array_tasks, jobs_from, node_count, node_record, node_state, partition_record,
)

from pyslurm_recording import as_plain

HERE = Path(__file__).parent
REPO = HERE.parents[1]
RECORDED = json.loads((HERE / "recorded_pyslurm.json").read_text())


def _by(items, key):
    return {x[key]: x for x in items}


def test_recorded_jobs_convert_to_exactly_the_command_lines_jobs():
    raw = RECORDED["pyslurm"]
    users = raw["users"]
    records = {r["job_id"]: r for r in raw["jobs"]}
    jobs = as_plain(list(jobs_from(records, ("PENDING", "RUNNING"), lambda uid: users[str(uid)],
                                   site=raw["site_factors"])))
    cli = RECORDED["cli"]["jobs"]
    assert len(cli) >= 45 and {j["state"] for j in cli} == {"PENDING", "RUNNING"}
    assert _by(jobs, "job_id") == _by(cli, "job_id")
    assert any("_" in j["job_id"] for j in cli)  # the pending array's tasks, one job each
    assert {j["site_factor"] for j in cli} >= {None, 0, -300}  # held/waiting, eligible, set


def test_recorded_nodes_and_partitions_convert_to_the_command_lines():
    raw = RECORDED["pyslurm"]
    parts = [partition_record(p) for p in raw["partitions"]]
    tiers = {p.name: p.priority_tier for p in parts}
    nodes = [as_plain(node_record(n, raw["complete_states"][n["name"]], tiers)) for n in raw["nodes"]]
    cli = RECORDED["cli"]["nodes"]
    for n in nodes + cli:
        n["partitions"] = sorted(n["partitions"])  # sinfo's own order
    assert _by(nodes, "name") == _by(cli, "name")
    assert any(sum(n["gpus_used"].values()) for n in cli)
    assert _by(as_plain(parts), "name") == _by(RECORDED["cli"]["partitions"], "name")


def test_an_ended_job_of_the_record_is_left_out_like_squeue_does():
    records = {r["job_id"]: r for r in RECORDED["pyslurm"]["jobs"]}
    assert any(r["job_state"] == "CANCELLED" for r in records.values())
    ids = {j.job_id for j in jobs_from(records, ("PENDING", "RUNNING"), str)}
    assert not ids & {str(r["job_id"]) for r in records.values() if r["job_state"] == "CANCELLED"}
    assert len(list(jobs_from(records, (), str))) > len(ids)  # no states: every record


@pytest.mark.parametrize("text,tasks", [("1-5", [1, 2, 3, 4, 5]), ("0-6:2", [0, 2, 4, 6]), ("1,3,7-8", [1, 3, 7, 8]),
                                        ("2-4%1", [2, 3, 4]), ("9", [9])])
def test_array_task_lists_expand_as_squeue_r_prints_them(text, tasks):
    assert array_tasks(text) == tasks


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 20), st.integers(1, 5)), min_size=1, max_size=6))
def test_array_task_ranges_with_steps_are_expanded_exactly(ranges):
    text = ",".join(f"{lo}-{lo + n}:{step}" for lo, n, step in ranges)
    want = [t for lo, n, step in ranges for t in range(lo, lo + n + 1, step)]
    assert array_tasks(text) == want


def test_node_count_follows_squeue():
    assert node_count({"num_nodes": 1, "req_nodes": ["v100-[1-2]"]}, pending=True) == 2
    assert node_count({"num_nodes": 3, "req_nodes": []}, pending=True) == 3
    # one node asked, 8 CPUs of 2 per task, 2 tasks per node: squeue says (4+1)//2 nodes
    assert node_count({"num_nodes": 1, "num_cpus": 8, "cpus_per_task": 2, "ntasks_per_node": 2}, pending=True) == 2
    assert node_count({"num_nodes": 9, "nodes": "k80-1,p100-[1-2]"}, pending=False) == 3


def test_node_state_keeps_computed_mixed_and_every_flag():
    assert node_state("MIXED", "ALLOCATED+DRAIN") == "mixed+drain"
    assert node_state("IDLE", "IDLE+NOT_RESPONDING+MAINTENANCE") == "idle+not_responding+maintenance"
    assert node_state("DOWN+DRAIN", "") == "down+drain"


def test_partition_lists_all_and_limits_mean_what_scontrol_says():
    p = partition_record({"name": "x", "nodes": "a-[1-2]", "state": "DOWN", "priority_tier": 5,
                          "allowed_accounts": ["physics"], "denied_accounts": ["ALL"], "allowed_qos": ["ALL"],
                          "denied_qos": ["sfnone"], "allowed_groups": ["root"], "max_time": 90,
                          "max_nodes": "UNLIMITED", "is_default": False})
    assert (p.nodes, p.state, p.priority_tier, p.allow_accounts, p.deny_accounts, p.allow_qos, p.deny_qos,
            p.max_time_min, p.max_nodes) == (("a-1", "a-2"), "DOWN", 5, frozenset({"physics"}), frozenset(),
                                             None, frozenset({"sfnone"}), 90, None)


# --- the choice of backend ------------------------------------------------------------------------
class _Runner:
    """Answers scontrol --version; counts the calls of every other command; ``broken_conf``:
    scontrol cannot load Slurm's configuration (as without any slurm.conf)."""

    def __init__(self, version: str = "slurm 22.05.8", broken_conf: bool = False) -> None:
        self.version, self.calls, self.broken_conf = version, [], broken_conf
        self.env = {"SLURM_CONF": "/etc/slurm/slurm.conf"}

    def run(self, argv, job_id=None):
        self.calls.append(list(argv))
        if argv[:2] == ["scontrol", "--version"]:
            return self.version + "\n"
        if argv[:3] == ["scontrol", "show", "hostnames"] and self.broken_conf:
            raise SlurmCommandError(list(argv), 1, "scontrol: fatal: Could not establish a configuration source")
        return ""


def _cli(version="slurm 22.05.8") -> SlurmCli:
    return SlurmCli(runner=_Runner(version))  # type: ignore[arg-type]


def test_cli_backend_is_the_commands_and_says_so():
    cli = _cli()
    assert choose(cli, "cli") is cli and backend_info(cli) == {"backend": "cli", "note": "cli"}


@pytest.mark.parametrize("backend", ["auto", "pyslurm"])
def test_without_pyslurm_auto_and_pyslurm_fall_back_to_the_commands_saying_why(monkeypatch, backend):
    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.installed_version", lambda: None)
    warned: list[str] = []
    port = choose(_cli(), backend, warned.append)
    assert isinstance(port, SlurmCli) and "not installed" in backend_info(port)["note"]
    assert (len(warned) == 1) == (backend == "pyslurm")  # asked for by name: a warning


def test_a_version_mismatch_is_a_warning_and_the_commands_never_a_crash(monkeypatch):
    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.installed_version", lambda: "22.5.3")
    warned: list[str] = []
    port = choose(_cli("slurm 24.11.5"), "auto", warned.append)
    assert isinstance(port, SlurmCli)
    assert len(warned) == 1 and "22.5.3 does not match slurm 24.11.5" in warned[0]
    assert "does not match" in backend_info(port)["note"]


def test_a_pyslurm_that_does_not_load_is_a_warning_too(monkeypatch):
    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.installed_version", lambda: "22.5.3")

    def broken(conf):
        raise ImportError("libslurm.so.38: cannot open shared object file")

    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.load_pyslurm", broken)
    warned: list[str] = []
    port = choose(_cli(), "pyslurm", warned.append)
    assert isinstance(port, SlurmCli) and "does not load" in warned[0] and "libslurm.so.38" in warned[0]


def test_a_configuration_libslurm_cannot_load_keeps_pyslurm_out_of_the_process(monkeypatch):
    """libslurm exits the whole process on a slurm.conf it cannot load (no SLURM_CONF, no file,
    no DNS record): scontrol is asked first, and pyslurm is never imported."""
    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.installed_version", lambda: "22.5.3")

    def never(conf):
        raise AssertionError("pyslurm imported")

    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.load_pyslurm", never)
    warned: list[str] = []
    port = choose(SlurmCli(runner=_Runner(broken_conf=True)), "auto", warned.append)  # type: ignore[arg-type]
    assert isinstance(port, SlurmCli) and "configuration does not load" in warned[0]
    assert "Could not establish a configuration source" in warned[0]


def test_matching_pyslurm_is_taken_and_says_why(monkeypatch):
    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.installed_version", lambda: "22.5.3")
    monkeypatch.setattr("slurm_fair.slurm.pyslurm_port.load_pyslurm", lambda conf: _FakePyslurm())
    port = choose(_cli(), "auto")
    assert isinstance(port, PyslurmPort)
    assert backend_info(port) == {"backend": "pyslurm", "note": "auto: pyslurm 22.5.3 matches slurm 22.05.8"}


def test_major_minor_reads_both_spellings():
    assert major_minor("22.5.3") == major_minor("slurm-wlm 22.05.8") == (22, 5)
    assert major_minor("24.11.0") == major_minor("slurm 24.11.5") == (24, 11)
    assert major_minor("") is None


# --- writes through a stand-in pyslurm ------------------------------------------------------------
class _RPCError(Exception):
    def __init__(self, errno=1, msg=""):
        super().__init__(msg)
        self.errno, self.msg = errno, msg


class _FakePyslurm:
    """Records what the port asks pyslurm for; jobs listed in ``gone`` answer as Slurm does."""

    RPCError = _RPCError
    __version__ = "22.5.3"

    def __init__(self, gone=()):
        self.sent: list[tuple] = []
        self.gone = set(gone)
        fake = self

        class Desc:
            def __init__(self, **kw):
                self.kw = kw

        class Job:
            def __init__(self, job_id):
                self.job_id = job_id

            def _check(self):
                if self.job_id in fake.gone:
                    raise _RPCError(2017, "Invalid job id specified")

            def modify(self, desc):
                self._check()
                fake.sent.append(("modify", self.job_id, desc.kw))

            def hold(self, mode=None):
                self._check()
                fake.sent.append(("hold", self.job_id))

            def release(self):
                self._check()
                fake.sent.append(("release", self.job_id))

            def requeue(self):
                self._check()
                fake.sent.append(("requeue", self.job_id))

            @staticmethod
            def load(job_id):
                if job_id in fake.gone:
                    raise _RPCError(2017, "Invalid job id specified")
                return SimpleNamespace(state_reason="JobHeldUser", state="PENDING", priority=0, start_time=0)

        self.Job, self.JobSubmitDescription = Job, Desc
        self.api = SimpleNamespace(slurm_init=lambda conf: None, slurm_fini=lambda: None)


def _port(gone=()):
    ps = _FakePyslurm(gone)
    return PyslurmPort(_cli(), module=ps, conf="/etc/slurm/slurm.conf"), ps


def test_job_writes_go_through_pyslurm_and_zero_is_a_real_value():
    port, ps = _port()
    port.set_nice("12", 0)
    port.set_priority("12", 4242)
    assert port.update_jobs(["12", "13"], {"SiteFactor": "0", "Partition": "v100"}) == {}
    port.update_job("14", {"ReqNodeList": "v100-[1-2]", "QOS": "normal"})
    assert ps.sent == [
        ("modify", 12, {"nice": "0"}),  # a string: pyslurm 22.5 skips a false value, "0" is not
        ("modify", 12, {"priority": 4242}),
        ("modify", 12, {"site_factor": "0", "partitions": "v100"}),
        ("modify", 13, {"site_factor": "0", "partitions": "v100"}),
        ("modify", 14, {"required_nodes": "v100-[1-2]", "qos": "normal"}),
    ]
    assert port.cli.runner.calls == []  # the commands were not used


def test_what_pyslurm_cannot_write_goes_through_scontrol():
    port, ps = _port()
    port.update_job("14", {"ReqNodeList": ""})  # a clear: pyslurm would send "unchanged"
    port.set_nice("7_3", 5)  # an array task: pyslurm updates by numeric id only
    port.set_priority("15", None)  # back to multifactor; the user's hold is put back with uhold
    calls = [c for c in port.cli.runner.calls if c[0] == "scontrol" and c[1] != "--version"]
    assert calls == [["scontrol", "update", "JobId=14", "ReqNodeList="],
                     ["scontrol", "update", "JobId=7_3", "Nice=5"],
                     ["scontrol", "uhold", "15"]]
    assert ps.sent == [("hold", 15), ("release", 15)]


def test_bad_values_are_refused_before_anything_is_sent():
    port, ps = _port()
    for bad in ({"Nice": "7\nPriority=1"}, {"Priority": "high"}, {"Account": "x"}):
        with pytest.raises(ValueError):
            port.update_jobs(["12"], bad)
    with pytest.raises(ValueError):
        port.update_job("12", {"QOS": "a b"})
    with pytest.raises(ValueError):
        port.hold("12; rm -rf /")
    assert ps.sent == []


def test_many_jobs_take_scontrols_job_list_a_few_take_pyslurm():
    port, ps = _port()
    many = [str(100 + i) for i in range(20)]
    assert port.update_jobs(many, {"SiteFactor": "-5"}) == {}
    assert ps.sent == []  # one scontrol call for the list
    assert [c for c in port.cli.runner.calls if c[1] == "update"] == [
        ["scontrol", "update", "JobId=" + ",".join(many), "SiteFactor=-5"]]
    assert port.update_jobs(many[:3], {"SiteFactor": "-5"}) == {}
    assert [s[1] for s in ps.sent] == [100, 101, 102]


def test_a_job_gone_is_named_and_the_others_are_written():
    port, ps = _port(gone={13})
    failed = port.update_jobs(["12", "13", "14"], {"Nice": "3"})
    assert set(failed) == {"13"} and isinstance(failed["13"], JobGone)
    assert [s[1] for s in ps.sent] == [12, 14]
    with pytest.raises(JobGone):
        port.hold("13")
    with pytest.raises(JobGone):
        port.job_outlook("13")


def test_pyslurm_errors_map_to_the_same_tree_as_the_commands():
    assert isinstance(_slurm_error(_RPCError(2017, "Invalid job id specified"), "update", "5"), JobGone)
    assert isinstance(_slurm_error(_RPCError(1007, "Unable to contact slurm controller (connect failure)"), "job"),
                      SlurmUnavailable)
    err = _slurm_error(_RPCError(2009, "Invalid partition name specified"), "update", "5")
    assert isinstance(err, SlurmCommandError) and "Invalid partition name" in str(err)


# --- the build script -----------------------------------------------------------------------------
def _script(tmp_path, *args, **env):
    base = {**os.environ, "SLURM_FAIR_CACHE": str(tmp_path / "cache"), **env}
    return subprocess.run([str(REPO / "scripts" / "build-pyslurm.sh"), *args], env=base, capture_output=True,
                          text=True, timeout=60)


def _headers(tmp_path, number: str) -> Path:
    inc = tmp_path / "include"
    (inc / "slurm").mkdir(parents=True)
    (inc / "slurm" / "slurm_version.h").write_text(f"#define SLURM_VERSION_NUMBER {number}\n")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libslurm.so").write_text("")
    return inc


def test_build_script_says_when_there_is_nothing_to_build_from(tmp_path):
    inc = _headers(tmp_path, "0x160508")
    out = _script(tmp_path, SLURM_INCLUDE_DIR=str(inc), SLURM_LIB_DIR=str(tmp_path / "lib"),
                  PYSLURM_VENDOR_DIR=str(tmp_path / "none"))
    assert out.returncode == 3 and "no pyslurm 22.5.x source for Slurm 22.05.8" in out.stderr
    out = _script(tmp_path, SLURM_INCLUDE_DIR=str(tmp_path / "missing"))
    assert out.returncode == 3 and "no Slurm headers" in out.stderr


def test_build_script_refuses_a_pyslurm_of_another_slurm_and_reports_the_cache(tmp_path):
    inc = _headers(tmp_path, "0x180b05")  # 24.11.5
    src = tmp_path / "pyslurm-22.5.3.tar.gz"
    src.write_text("")
    out = _script(tmp_path, "--source", str(src), SLURM_INCLUDE_DIR=str(inc), SLURM_LIB_DIR=str(tmp_path / "lib"))
    assert out.returncode == 2 and "does not match Slurm 24.11.5 (want 24.11.x)" in out.stderr
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "pyslurm-24.11.0.tar.gz").write_text("")
    out = _script(tmp_path, "--check", SLURM_INCLUDE_DIR=str(inc), SLURM_LIB_DIR=str(tmp_path / "lib"),
                  PYSLURM_VENDOR_DIR=str(vendor))
    assert out.returncode == 1  # not built yet: --check builds nothing
    sources = hashlib.sha256(b"").hexdigest()[:12]  # the key holds the sources' own hash
    key = tmp_path / "cache" / "pyslurm" / "pyslurm-24.11.0-slurm-24.11.5-cp{}{}-src-{}".format(
        *os.sys.version_info[:2], sources)
    key.mkdir(parents=True)
    (key / "pyslurm-24.11.0-cp-linux_x86_64.whl").write_text("")
    out = _script(tmp_path, "--check", "--python", os.sys.executable, SLURM_INCLUDE_DIR=str(inc),
                  SLURM_LIB_DIR=str(tmp_path / "lib"), PYSLURM_VENDOR_DIR=str(vendor))
    assert out.returncode == 0 and out.stdout.strip().endswith(".whl")
    (vendor / "pyslurm-24.11.0.tar.gz").write_text("changed")  # other sources: not the cached wheel
    out = _script(tmp_path, "--check", "--python", os.sys.executable, SLURM_INCLUDE_DIR=str(inc),
                  SLURM_LIB_DIR=str(tmp_path / "lib"), PYSLURM_VENDOR_DIR=str(vendor))
    assert out.returncode == 1


def _junit(path: Path, cases: dict[str, str]) -> Path:
    """A pytest-style JUnit report: test name -> "passed", "skipped" or "failure"."""
    body = "".join(
        f'<testcase classname="tests.slurm.test_contract" name="{n}">'
        + ("" if r == "passed" else f'<{r} message="x"/>') + "</testcase>" for n, r in cases.items())
    path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


def test_the_rootfs_arm_counts_what_ran_and_fails_on_a_skip_or_nothing(tmp_path):
    """scripts/junit_counts.py (the 24.11 pyslurm arm's last step): a skipped or missing pyslurm
    test fails the arm even though pytest itself exits 0 on skips."""
    def run(*reports):
        return subprocess.run([os.sys.executable, str(REPO / "scripts" / "junit_counts.py"), "--version", "24.11",
                               *reports], capture_output=True, text=True, timeout=60)

    good = _junit(tmp_path / "good.xml", {"a[slurmsite-pyslurm]": "passed", "b[slurmsite-pyslurm]": "passed"})
    out = run(f"contract={good}")
    assert out.returncode == 0 and "contract: 2 passed, 0 failed, 0 skipped" in out.stdout
    skipped = _junit(tmp_path / "skip.xml", {"a": "passed", "b": "skipped"})
    assert run(f"contract={good}", f"chaos={skipped}").returncode == 1
    assert run(f"contract={_junit(tmp_path / 'none.xml', {})}").returncode == 1
    assert run(f"contract={good}:test_pilot_real").returncode == 1  # no test of that module ran
    failed = _junit(tmp_path / "fail.xml", {"a": "failure"})
    assert "1 failed" in run(f"contract={failed}").stdout


# --- which backend: shown by snapshot, run --json and the metrics -------------------------------
def test_snapshot_run_json_and_metrics_say_which_backend(tmp_path, monkeypatch):
    import urllib.request

    from click.testing import CliRunner

    from slurm_fair import cli as sf_cli
    from slurm_fair.commands.run import serve_metrics
    from slurm_fair.slurm.fake import FakeSlurm

    fake = FakeSlurm.from_recording("testbed-22.05")
    fake.backend, fake.backend_note = "pyslurm", "auto: pyslurm 22.5.3 matches slurm-wlm 22.05.8"
    for mod in ("run", "snapshot", "report"):
        monkeypatch.setattr(f"slurm_fair.commands.{mod}.make_port", lambda config, env=None: fake)
    cfg = tmp_path / "slurm-fair.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "state"}"\naudit_log = "{tmp_path / "a.jsonl"}"\n'
                   '[slurm]\nbackend = "auto"\n')
    runner = CliRunner()
    out = runner.invoke(sf_cli.cli, ["run", "--once", "--json", "--dry-run", "--config", str(cfg)],
                        standalone_mode=False)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["slurm_backend"] == {"backend": "pyslurm", "note": fake.backend_note}
    out = runner.invoke(sf_cli.cli, ["snapshot", "--config", str(cfg)], terminal_width=200)
    assert out.output.splitlines()[0] == f"Slurm backend: pyslurm ({fake.backend_note})"
    out = runner.invoke(sf_cli.cli, ["snapshot", "--json", "--config", str(cfg)])
    assert json.loads(out.output)["gpu_types"]  # nothing but the PROBLEM.json
    out = runner.invoke(sf_cli.cli, ["metrics", "--config", str(cfg)])
    assert out.exit_code == 0, out.output
    assert 'slurm_fair_slurm_backend_info{backend="pyslurm"} 1.0' in out.output.splitlines()
    server = serve_metrics("127.0.0.1", 0, tmp_path / "state" / "state.sqlite", lambda: {"backend": "cli", "note": "cli"})
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'slurm_fair_slurm_backend_info{backend="cli"} 1.0' in text.splitlines()


def test_the_pyslurm_port_has_every_method_of_the_port():
    """A method added to the Protocol reaches both backends (mypy sees only what is called)."""
    from slurm_fair.slurm.port import SlurmPort
    from slurm_fair.slurm.pyslurm_port import PyslurmPort

    wanted = {n for n, v in vars(SlurmPort).items() if not n.startswith("_") and callable(v)}
    assert wanted and not wanted - set(dir(PyslurmPort))
