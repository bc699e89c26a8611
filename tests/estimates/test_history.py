"""sacct -P -X history: columns by name, what measures speed, junk named by line, bad headers exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from slurm_fair.cli import cli, main
from slurm_fair.errors import InputError
from slurm_fair.estimates.history import runs_from_history
from slurm_fair.slurm.parse.history import parse_history

HEADER = "JobID|User|Account|JobName|Partition|AllocTRES|NodeList|Elapsed|State"


def text(*rows):
    return "\n".join((HEADER,) + rows) + "\n"


def test_only_completed_gpu_jobs_measure_speed():
    h = parse_history(text(
        "10|ann|phys|train|gpu|cpu=4,gres/gpu:a100=4,gres/gpu=4|g[01-02]|01:00:00|COMPLETED",
        "10.batch|||batch||cpu=4,gres/gpu=4|g01|01:00:00|COMPLETED",
        "11|ann|phys|train|gpu|cpu=4,gres/gpu=1|g03|00:30:00|TIMEOUT",
        "12|ann|phys|train|gpu|cpu=4,gres/gpu=1|g03|00:30:00|CANCELLED by 1000",
        "13|ann|phys|train|gpu||None assigned|00:00:00|PENDING",
        "14|ann|phys|prep|cpu|cpu=4,mem=1G|c01|00:05:00|COMPLETED",
        "15_3|ann|phys|sweep|gpu|gres/gpu=1|g04|1-02:00:00|COMPLETED",
    ), "h.txt")
    assert [(r.job_id, r.gpus, r.gpu_type, r.nodes, r.elapsed_s) for r in h.rows] == [
        ("10", 4, "a100", ("g01", "g02"), 3600.0), ("15_3", 1, None, ("g04",), 93600.0)]
    assert h.skipped == {"job step": 1, "state TIMEOUT": 1, "state CANCELLED": 1, "state PENDING": 1, "no GPU": 1}
    assert h.junk == []


def test_columns_are_found_by_name_and_a_name_with_the_delimiter_is_kept():
    h = parse_history("State|Elapsed|NodeList|AllocTRES|Partition|JobName|Account|User|JobID|ExitCode\n"
                      "COMPLETED|10:00|v100-1|gres/gpu:v100=1|gpu|a|b|phys|ann|7|0:0\n", "h.txt")
    assert h.rows[0].job_name == "a|b" and h.rows[0].elapsed_s == 600 and h.rows[0].gpu_type == "v100"


def test_unreadable_rows_are_skipped_by_line_or_refused_with_strict():
    t = text("1|ann|phys|x|gpu|gres/gpu:a100=1|g01|soon|COMPLETED", "2|garbage",
             "3|ann|phys|x|gpu|gres/gpu:a100=1|g01|10:00|COMPLETED")
    h = parse_history(t, "h.txt")
    assert [f.where for f in h.junk] == ["line 2", "line 3"] and len(h.rows) == 1
    with pytest.raises(InputError) as exc:
        parse_history(t, "h.txt", strict=True)
    assert "h.txt" in str(exc.value.message()) and "line 2" in exc.value.message()


def test_a_header_without_the_needed_columns_names_them():
    with pytest.raises(InputError) as exc:
        parse_history("JobID|User|State\n1|a|COMPLETED\n", "h.txt")
    assert "AllocTRES" in exc.value.message() and "line 1" in exc.value.message()


def test_the_type_comes_from_nodes_when_gres_is_untyped():
    h = parse_history(text("1|ann|p|x|gpu|gres/gpu=2|g[01-02]|10:00|COMPLETED",
                           "2|ann|p|x|gpu|gres/gpu=2|g01,h01|10:00|COMPLETED",
                           "3|ann|p|x|gpu|gres/gpu=2|z9|10:00|COMPLETED"), "h.txt")
    runs, skipped = runs_from_history(h.rows, {"g01": "l40s", "g02": "l40s", "h01": "h100"})
    assert [(r.group, r.gpu_type) for r in runs] == [(("ann", "x", 2), "l40s")]
    assert skipped == {"GPU type unknown": 2}


def test_without_an_inventory_the_typed_runs_say_what_a_node_is():
    h = parse_history(text("1|ann|p|x|gpu|gres/gpu:a100=1|g01|10:00|COMPLETED",
                           "2|ann|p|x|gpu|gres/gpu=1|g01|12:00|COMPLETED",
                           "3|ann|p|x|gpu|gres/gpu=1|g09|12:00|COMPLETED"), "h.txt")
    runs, skipped = runs_from_history(h.rows, {})
    assert [(r.job_id, r.gpu_type) for r in runs] == [("1", "a100"), ("2", "a100")]
    assert skipped == {"GPU type unknown": 1}


@given(st.text(max_size=300))
@settings(max_examples=150, deadline=None)
def test_any_text_after_a_header_parses_or_is_junk(body):
    h = parse_history(HEADER + "\n" + body, "h.txt")
    assert len(h.rows) + sum(h.skipped.values()) <= len([ln for ln in body.splitlines() if ln.strip()])


def test_speeds_learn_json_and_table(tmp_path):
    rows = []
    for i, (k, t) in enumerate([("h100", 1000), ("h100", 1100), ("a100", 2000), ("a100", 2100), ("a100", 1900)]):
        rows.append(f"{i}|ann|phys|bert|gpu|gres/gpu:{k}=1,gres/gpu=1|n{i}|{t // 60}:{t % 60:02d}|COMPLETED")
    f = tmp_path / "h.txt"
    f.write_text(text(*rows))
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (g,) = doc["groups"]
    assert (g["user"], g["job_name"], g["gpus"], g["runs"]) == ("ann", "bert", 1, 5)
    assert g["speed"]["h100"] == 1.0 and g["speed"]["a100"] == pytest.approx(1050 / 2000, rel=0.05)
    site = doc["site"]
    assert sum(site["family_mix"].values()) == pytest.approx(1.0, abs=1e-3)
    # one group's ratio (0.53) is the generic prior's: the site's types stay at their priors
    assert set(site["type_offsets"]) == {"a100", "h100"} and all(abs(v) < 0.05 for v in site["type_offsets"].values())
    assert site["group_spread"] == 0.0  # one group on two types: too few to measure the spread
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f)])
    assert res.exit_code == 0 and "bert" in res.output and "learned speeds" in res.output
    assert "site: family mix" in res.output


@pytest.mark.parametrize("args, says", [
    (["--sacct-file", "{missing}"], "No such file"),
    (["--sacct-file", "{bad_header}"], "lacks column"),
    (["--sacct-file", "{no_runs}"], "no completed GPU run"),
    (["--sacct-file", "{junk}", "--strict"], "line 2"),
    ([], "either --sacct-file"),
    (["--sacct-file", "{no_runs}", "--since", "7d"], "--since applies"),
    (["--sacct-file", "{no_runs}", "--node-type", "g[01=a100"], "HOSTLIST=TYPE"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, args, says):
    files = {"missing": tmp_path / "nope.txt", "bad_header": tmp_path / "b.txt", "no_runs": tmp_path / "n.txt",
             "junk": tmp_path / "j.txt"}
    files["bad_header"].write_text("JobID|State\n1|COMPLETED\n")
    files["no_runs"].write_text(text("1|a|b|c|gpu|gres/gpu=1|g1|10:00|FAILED"))
    files["junk"].write_text(text("1|garbage"))
    argv = ["speeds", "learn"] + [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_recorded_real_sacct_output_parses():
    """Real ``sacct -X -P`` text of the 22.05 testbed (tests/slurm/test_history_real.py records it)."""
    from pathlib import Path

    path = Path(__file__).parent / "data" / "sacct_testbed_22.05.txt"
    h = parse_history(path.read_text(), str(path))
    assert [(r.gpu_type, r.nodes, r.elapsed_s, r.job_name) for r in h.rows] == [
        ("v100", ("v100-1",), 2.0, "sf-learn"), ("k80", ("k80-1",), 2.0, "sf-learn"),
        ("v100", ("v100-1",), 1.0, "sf-learn")]
    assert h.junk == [] and not h.skipped


def test_a_requeued_job_is_one_run_over_all_its_runs():
    h = parse_history(text("5|ann|p|x|gpu|gres/gpu:v100=1|v1|00:30:00|REQUEUED",
                           "5|ann|p|x|gpu|gres/gpu:k80=1|k1|00:10:00|COMPLETED",
                           "6|ann|p|x|gpu|gres/gpu:v100=1|v1|00:20:00|COMPLETED"), "h.txt")
    assert [(r.job_id, r.earlier) for r in h.rows] == [("5", (("v100", ("v1",), 1800.0),)), ("6", ())]
    runs, skipped = runs_from_history(h.rows, {})
    five = next(r for r in runs if r.job_id == "5")
    # 30 min on v100, then 10 min on k80 (the priors: k80 ~0.2 of a v100): ~32 min of v100
    assert five.gpu_type == "v100" and 1800 < five.seconds < 2100 and skipped == {"requeued: runs joined": 1}


def test_a_job_name_with_a_newline_is_one_row():
    h = parse_history(text("1|ann|p|two\nlines|gpu|gres/gpu:a100=1|g01|10:00|COMPLETED",
                           "2|ann|p|x|gpu|gres/gpu:a100=1|g01|10:00|COMPLETED"), "h.txt")
    assert [r.job_name for r in h.rows] == ["two\nlines", "x"] and h.junk == []


def test_failed_and_out_of_memory_gpu_runs_are_kept_apart_and_mark_a_type(tmp_path):
    from slurm_fair.estimates.history import failures_from_history

    h = parse_history(text(
        "1|ann|phys|rn|gpu|gres/gpu:v100=4,gres/gpu=4|v1|01:00:00|COMPLETED",
        "2|ann|phys|rn|gpu|gres/gpu:v100=4,gres/gpu=4|v1|01:02:00|COMPLETED",
        "3|ann|phys|rn|gpu|gres/gpu=4|k1|00:00:40|FAILED",
        "4|ann|phys|rn|gpu|gres/gpu:p100=4,gres/gpu=4|p1|00:00:10|OUT_OF_MEMORY",
        "5|ann|phys|rn|gpu|gres/gpu:p100=4,gres/gpu=4|p1|00:10:00|NODE_FAIL",
        "6|ann|phys|rn|cpu|cpu=4|c1|00:00:10|FAILED",
        "7|ann|phys|rn|gpu|gres/gpu=4|k1|never|FAILED",
    ), "h.txt")
    assert [r.job_id for r in h.rows] == ["1", "2"]
    assert [(r.job_id, r.state) for r in h.failed] == [("3", "FAILED"), ("4", "OUT_OF_MEMORY")]
    assert h.skipped["state FAILED"] == 3 and h.skipped["state OUT_OF_MEMORY"] == 1 and not h.junk
    fails = failures_from_history(h.failed, {"k1": "k80"})
    assert [(f.gpu_type, f.state) for f in fails] == [("k80", "FAILED"), ("p100", "OUT_OF_MEMORY")]
    f = tmp_path / "h.txt"
    f.write_text(text(*(["1|ann|phys|rn|gpu|gres/gpu:v100=4,gres/gpu=4|v1|01:00:00|COMPLETED"] * 2
                        + ["3|ann|phys|rn|gpu|gres/gpu:k80=4,gres/gpu=4|k1|00:00:40|FAILED",
                           "4|ann|phys|rn|gpu|gres/gpu:p100=4,gres/gpu=4|p1|00:00:10|NODE_FAIL"])))
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f), "--json"])
    assert res.exit_code == 0, res.output
    (g,) = json.loads(res.stdout)["groups"]
    assert g["fails_on"] == {"k80": 1} and g["speed"]["k80"] == 0 and g["sources"]["k80"] == "fails"
    assert "p100" not in g["speed"]  # a node failure is not the type's fault, and says nothing else
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f)])
    assert res.exit_code == 0 and "k80 (1)" in res.output and "fails" in res.output


def test_a_failed_jobs_earlier_requeued_runs_say_where_it_ran():
    from slurm_fair.estimates.history import failures_from_history

    h = parse_history(text(
        "53|ann|bio|rn|gpu|gres/gpu:p100=4,gres/gpu=4|p1|00:00:13|REQUEUED",
        "53|ann|bio|rn|gpu|gres/gpu:p100=4,gres/gpu=4|p2|00:00:26|REQUEUED",
        "53|ann|bio|rn|gpu|gres/gpu:k80=4,gres/gpu=4|k1|00:00:01|FAILED",
    ), "h.txt")
    (f,) = failures_from_history(h.failed, {})
    assert (f.gpu_type, f.state, f.ran_on) == ("k80", "FAILED", ("p100", "p100"))
