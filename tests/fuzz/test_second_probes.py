"""Issue 18's second round of probes: hostile and careless inputs not in the first tables.

A reviewer probed again after the first fixes and found 16 more ways past the README's promise
(a file name too long for the file system, an output onto the command's own input, a foreign
SQLite file as the state store, duplicate JSON keys, non-ASCII digits in integer options, ...);
each test names its probe and failed before its fix. Commands that need Slurm read a FakeSlurm
(the recordings shipped with the package), patched in where the commands build their port, so
no Slurm is reached.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path

import pytest

from slurm_fair.slurm.fake import FakeSlurm
from .bounded import bounded, scratch
from .harness import assert_refused, assert_untouched, run, snapshot_dir

REPO = Path(__file__).resolve().parents[2]
PROBLEM = {
    "gpu_types": {"v100": 4, "k80": 4},
    "tenants": {"a": {"weight": 1}, "b": {"weight": 2}},
    "jobs": [
        {"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 2.0, "k80": 1.0}},
        {"id": "j2", "tenant": "b", "gpus": 2, "throughput": {"v100": 3.0, "k80": 1.0}},
    ],
}
TRACE = ("tenant,job_id,job_type,gpus,total_steps,arrival_s\n"
         "a,1,ResNet-50 (batch size 32),1,12000,0\nb,2,ResNet-50 (batch size 32),1,12000,10\n")
INVENTORY = """[cluster]
name = "c1"
[gpu_types.v100]
nodes = "gpu[1-2]"
gpus_per_node = 4
files = "/dev/nvidia[0-3]"
[tenants.physics]
fairshare = 1
"""


@pytest.fixture
def fake_slurm(monkeypatch):
    """Every command's port is a FakeSlurm loaded from a recording of the testbed."""
    import slurm_fair.commands.explain as explain_cmd
    import slurm_fair.commands.report as report_cmd
    import slurm_fair.commands.revert as revert_cmd
    import slurm_fair.commands.run as run_cmd
    import slurm_fair.commands.snapshot as snapshot_cmd

    for mod in (run_cmd, report_cmd, revert_cmd, explain_cmd, snapshot_cmd):
        monkeypatch.setattr(mod, "make_port", lambda config: FakeSlurm.from_recording("testbed-22.05"))


def _config(work: Path, **controller: str) -> Path:
    text = (REPO / "conf" / "slurm-fair.toml").read_text()
    lines = []
    values = {"state_dir": str(work / "state"), "audit_log": str(work / "audit.jsonl"), **controller}
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip()
        if key in values:
            line = f'{key} = "{values.pop(key)}"'
        lines.append(line)
    path = work / "slurm-fair.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# --- tracebacks ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["solve", "--input", "{problem}", "--policy", "fifo", "-o", "{long}"],
    ["simulate", "--policy", "fifo", "-q", "--trace", "{trace}", "--cluster", "v100=2", "--json", "{long}"],
    ["simulate", "--policy", "fifo", "-q", "--trace", "{trace}", "--cluster", "v100=2", "--save-workload", "{long}"],
    ["render-config", "--inventory", "{inventory}", "--output-dir", "{long}"],
])
def test_a_file_name_longer_than_the_file_system_allows_is_refused(argv):
    """``-o DIR/<300 characters>``: OSError ENAMETOOLONG traceback from atomic.target_path
    (also ``report -o``, ``metrics -o``, ``--plot``, render-config's ``--output-dir``)."""
    with scratch() as work, bounded(60):
        (work / "p.json").write_text(json.dumps(PROBLEM))
        (work / "t.csv").write_text(TRACE)
        (work / "inv.toml").write_text(INVENTORY)
        names = {"problem": work / "p.json", "trace": work / "t.csv", "inventory": work / "inv.toml",
                 "long": work / ("a" * 300)}
        before = snapshot_dir(work)
        rc, _, err = run([a.format(**names) for a in argv])
        assert_refused(rc, err)
        assert_untouched(work, before)


@pytest.mark.parametrize("table, needle", [
    (b"class,v100\nres\xe9,1\n", "utf-8"),                        # UnicodeDecodeError traceback
    (b"class,v100\nresnet," + b"1" * 200_000 + b"\n", "field"),   # _csv.Error traceback
])
@pytest.mark.parametrize("command", [["run", "--once", "--dry-run"], ["report"], ["metrics"]])
def test_a_bad_class_table_is_one_message_not_a_traceback(fake_slurm, table, needle, command):
    """``[throughput] class_table`` is read with open()/csv directly (estimates/classes.py), not
    inputs.read_text: Latin-1 or a long cell is a traceback in run, report and metrics."""
    with scratch() as work, bounded(60):
        (work / "classes.csv").write_bytes(table)
        cfg = _config(work, class_table=str(work / "classes.csv"))
        rc, _, err = run([*command, "--config", cfg])
        assert_refused(rc, err, "classes.csv")


def test_a_missing_class_table_is_refused_when_the_configuration_is_read():
    """A class_table that does not exist passes validation; the cycle reads Slurm first and fails
    only then (rc 1 'Slurm unreachable' without Slurm, rc 2 mid-cycle with one)."""
    with scratch() as work, bounded(60):
        cfg = _config(work, class_table=str(work / "nope.csv"))
        rc, _, err = run(["run", "--once", "--dry-run", "--config", cfg])
        assert_refused(rc, err, "class_table")
        assert "cycle" not in err


@pytest.mark.parametrize("content", [b"", "foreign"])
def test_run_dry_run_with_a_state_file_that_is_not_the_controllers(fake_slurm, content):
    """state_dir/state.sqlite empty or another program's SQLite database: ``run --once --dry-run``
    ends in ``sqlite3.OperationalError: no such table: meta`` (controller/history.py)."""
    with scratch() as work, bounded(60):
        (work / "state").mkdir()
        db = work / "state" / "state.sqlite"
        if content == "foreign":
            con = sqlite3.connect(db)
            con.execute("CREATE TABLE mydata (x)")
            con.commit()
            con.close()
        else:
            db.write_bytes(content)
        cfg = _config(work)
        before = snapshot_dir(work)
        rc, _, err = run(["run", "--once", "--dry-run", "--config", cfg])
        assert_refused(rc, err, "state")
        assert_untouched(work, before)


# --- files changed that must not be ------------------------------------------------------

def test_revert_dry_run_does_not_write_into_another_programs_database(fake_slurm):
    """``revert --dry-run`` with a state.sqlite that is not the controller's adds the controller's
    tables to it (meta, cycles, original_requests, ...): a dry run changed a user's file."""
    with scratch() as work, bounded(60):
        (work / "state").mkdir()
        con = sqlite3.connect(work / "state" / "state.sqlite")
        con.execute("CREATE TABLE mydata (x)")
        con.execute("INSERT INTO mydata VALUES (42)")
        con.commit()
        con.close()
        cfg = _config(work)
        before = snapshot_dir(work)
        rc, _, err = run(["revert", "--dry-run", "--config", cfg])
        assert_untouched(work, before)
        assert_refused(rc, err, "state")


def test_solve_output_onto_its_own_input_is_refused():
    """``solve --input p.json -o p.json``: rc 0, the problem replaced by the allocation."""
    with scratch() as work, bounded(60):
        (work / "p.json").write_text(json.dumps(PROBLEM))
        before = snapshot_dir(work)
        rc, _, err = run(["solve", "--input", work / "p.json", "--policy", "fifo", "-o", work / "p.json"])
        assert_refused(rc, err, "p.json")
        assert_untouched(work, before)


def test_report_output_onto_its_own_configuration_is_refused(fake_slurm):
    """``report --config c.toml -o c.toml``: rc 0, the configuration replaced by the report."""
    with scratch() as work, bounded(60):
        cfg = _config(work)
        before = snapshot_dir(work)
        rc, _, err = run(["report", "--config", cfg, "-o", cfg])
        assert_refused(rc, err)
        assert_untouched(work, before)


@pytest.mark.parametrize("outputs", [
    ["--save-workload", "{trace}"],                     # the trace replaced by the saved workload
    ["--json", "{trace}"],                              # the trace replaced by JSON
    ["--json", "{work}/x.png", "--plot", "{work}/x.png"],   # the JSON lost under the picture
    ["-o", "{work}/x.csv", "--save-workload", "{work}/x.csv"],  # the workload lost under the table
])
def test_simulate_outputs_never_overwrite_an_input_or_each_other(outputs):
    with scratch() as work, bounded(60):
        trace = work / "t.csv"
        trace.write_text(TRACE)
        before = snapshot_dir(work)
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2",
                          *[o.format(trace=trace, work=work) for o in outputs]])
        assert_refused(rc, err)
        assert_untouched(work, before)


def test_render_config_does_not_overwrite_its_own_inputs():
    """--config/--inventory inside --output-dir under a rendered name (slurm-fair.conf, gres.conf):
    rc 0, both inputs replaced by rendered files."""
    with scratch() as work, bounded(60):
        out = work / "deploy"
        out.mkdir()
        cfg = _config(work)
        (out / "slurm-fair.conf").write_text(cfg.read_text())
        (out / "gres.conf").write_text(INVENTORY.replace('files = "/dev/nvidia[0-3]"\n', ""))
        before = snapshot_dir(work)
        rc, _, err = run(["render-config", "--config", out / "slurm-fair.conf",
                          "--inventory", out / "gres.conf", "--output-dir", out])
        assert_refused(rc, err, "refusing to overwrite an input")
        assert_untouched(work, before)


# --- mistakes accepted silently (rc 0) ---------------------------------------------------

def test_trace_with_a_duplicate_column_is_refused():
    """``tenant,job_id,job_type,gpus,gpus,...``: rc 0, one of the two gpus cells silently used."""
    with scratch() as work, bounded(60):
        trace = work / "t.csv"
        trace.write_text("tenant,job_id,job_type,gpus,gpus,total_steps,arrival_s\n"
                         "a,1,ResNet-50 (batch size 32),1,2,12000,0\n")
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2"])
        assert_refused(rc, err, "gpus")


def test_trace_cell_with_a_unicode_line_separator_names_the_right_problem():
    """A tenant cell holding U+2028 is reported as 'line 3: expected 6 fields, got 1' (the reader
    splits lines with str.splitlines): the message names a problem the file does not have."""
    with scratch() as work, bounded(60):
        trace = work / "t.csv"
        trace.write_text(TRACE + "c\u2028d,3,ResNet-50 (batch size 32),1,12000,0\n")
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2"])
        assert_refused(rc, err, "tenant")
        assert "fields" not in err


def test_weight_for_a_tenant_that_is_not_in_the_trace_is_refused():
    """``--weight zzz=2`` (a typo of a tenant) or ``--weight $'a\\n=2'``: rc 0, silently ignored."""
    with scratch() as work, bounded(60):
        trace = work / "t.csv"
        trace.write_text(TRACE)
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2",
                          "--weight", "zzz=2"])
        assert_refused(rc, err, "zzz")


def test_synthetic_jobs_of_zero_steps_are_not_simulated():
    """``--max-duration-h 1e-12``: rc 0, numpy RuntimeWarnings on stderr, 'LR mean inf', and a
    --save-workload trace of total_steps 0 that simulate itself refuses."""
    with scratch() as work, bounded(60):
        saved = work / "w.csv"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--synthetic", "5", "--cluster", "v100=2,k80=2",
                              "--max-duration-h", "1e-12", "--save-workload", saved])
        assert not caught, [str(w.message) for w in caught]
        if rc == 0:
            rc2, _, err2 = run(["simulate", "--policy", "fifo", "-q", "--trace", saved, "--cluster", "v100=2,k80=2"])
            assert rc2 == 0, f"the saved workload is refused by simulate: {err2}"
        else:
            assert_refused(rc, err, "--max-duration-h")


@pytest.mark.parametrize("doc", [
    # duplicate keys: the last silently wins
    '{"gpu_types": {"v100": 4}, "gpu_types": {"k80": 4}, "tenants": {}, '
    '"jobs": [{"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"k80": 1}}]}',
    # a misspelt key: weight 1 silently
    '{"gpu_types": {"v100": 4}, "tenants": {"a": {"wieght": 3}}, '
    '"jobs": [{"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1}}]}',
    # tenants of the wrong kind ([] is falsy: `doc.get("tenants", {}) or {}`)
    '{"gpu_types": {"v100": 4}, "tenants": [], '
    '"jobs": [{"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1}}]}',
])
def test_problem_mistakes_are_not_silently_accepted(doc):
    with scratch() as work, bounded(60):
        (work / "p.json").write_text(doc)
        rc, _, err = run(["solve", "--input", work / "p.json", "--policy", "fifo"])
        assert_refused(rc, err)


@pytest.mark.parametrize("files", ["/dev/nvidia[0-1]", "/dev/nvidia0", "/dev/nvidia[3-0]", "/dev/nvidia[0,0,0,0]"])
def test_inventory_device_files_must_match_the_gpus_per_node(files):
    """``files`` naming 2 (or 1, or a reversed range, or one device 4 times) for 4 GPUs a node:
    rc 0, a gres.conf that slurmd refuses (count mismatch drains the node)."""
    with scratch() as work, bounded(60):
        inv = work / "inv.toml"
        inv.write_text(INVENTORY.replace("/dev/nvidia[0-3]", files))
        cfg = _config(work)
        rc, _, err = run(["render-config", "--config", cfg, "--inventory", inv, "--output-dir", work / "out"])
        assert_refused(rc, err, "files")
        assert not (work / "out").exists()


def test_docker_target_reads_a_json_inventory_as_the_help_says():
    """--inventory's help: 'TOML or JSON'; --target cluster reads JSON, --target docker says
    'line 1 column 1: not valid TOML: Invalid statement'."""
    from slurm_fair.config import tomllib
    with scratch() as work, bounded(60):
        data = tomllib.loads((REPO / "conf" / "testbed.toml").read_text())
        inv = work / "inv.json"
        inv.write_text(json.dumps(data))
        rc, _, err = run(["render-config", "--target", "docker", "--inventory", inv, "--output-dir", work / "out"])
        assert rc == 0, err


@pytest.mark.parametrize("option", [["--synthetic", "٣"], ["--synthetic", "1_0"], ["--seed", "٣"], ["--tenants", "２"],
                                    ["--gpus-per-node", "٢"], ["--resolve-every", "1_0"]])
def test_integer_options_read_ascii_digits_only(option):
    """click's int() takes any Unicode digit and underscores (``--metrics-port ٨٠`` is port 80);
    the float options, --cluster and explain refuse them since issue 18."""
    with scratch(), bounded(60):
        argv = ["simulate", "--policy", "fifo", "-q", "--cluster", "v100=2"]
        if option[0] != "--synthetic":
            argv += ["--synthetic", "3"]
        rc, _, err = run([*argv, *option])
        assert_refused(rc, err, option[0])


def test_a_gavel_trace_file_name_is_checked_as_a_tenant_name():
    """The tenant of a ``.trace`` is its file stem, unchecked: a name with a newline is simulated
    (rc 0) and ``--save-workload`` writes a trace that simulate refuses ('expected 6 fields')."""
    with scratch() as work, bounded(60):
        trace = work / "a\nb.trace"
        trace.write_text("ResNet-50 (batch size 32)\tcmd\t--n\tFalse\t12000\t0\t1\n")
        rc, _, err = run(["simulate", "--policy", "fifo", "-q", "--trace", trace, "--cluster", "v100=2"])
        assert_refused(rc, err, "tenant")


@pytest.mark.parametrize("argv", [
    ["solve", "--input", "{problem}", "--policy", "fifo", "-o", "-"],
    ["simulate", "--policy", "fifo", "-q", "--trace", "{trace}", "--cluster", "v100=2", "-o", "-"],
    ["simulate", "--policy", "fifo", "-q", "--trace", "{trace}", "--cluster", "v100=2", "--json", "-o", "-"],
])
def test_output_dash_is_stdout_not_a_file_named_dash(argv, monkeypatch):
    """``-o -`` writes a file called '-' into the current directory (rc 0, nothing on stdout),
    while ``--input -`` reads stdin and ``--json -`` prints: '-' means stdout, or is refused."""
    with scratch() as work, bounded(60):
        (work / "p.json").write_text(json.dumps(PROBLEM))
        (work / "t.csv").write_text(TRACE)
        monkeypatch.chdir(work)
        rc, out, err = run([a.format(problem=work / "p.json", trace=work / "t.csv") for a in argv])
        assert not (work / "-").exists(), "a file named '-' was written"
        assert rc == 2 or out, err


def test_a_misspelt_controller_account_is_not_a_silent_no_op(fake_slurm):
    """``[controller] accounts = ["physcis"]`` (no such account in Slurm): rc 0, '0 actions', no
    warning; the controller silently manages nothing."""
    with scratch() as work, bounded(60):
        cfg = _config(work)
        cfg.write_text(cfg.read_text().replace("[controller]\n", '[controller]\naccounts = ["physcis"]\n', 1))
        rc, out, err = run(["run", "--once", "--dry-run", "--config", cfg])
        assert rc == 2 or "physcis" in out + err, out + err
