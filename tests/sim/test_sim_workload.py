"""Trace parsing: CSV and Gavel traces, windows, weights, and every bad-input error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.estimates import gavel as tt
from slurm_fair.errors import InputError, UserError
from slurm_fair.gangs import Shape
from slurm_fair.sim import workload as wl
from slurm_fair.sim.cluster import parse_cluster, with_speeds

TABLE = tt.load()
HEADER = "tenant,job_id,job_type,gpus,total_steps,arrival_s"


def _csv(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(header + "\n" + body)
    return path


def test_csv_reads_jobs_and_weights(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "a,1,ResNet-50 (batch size 32),1,1000,0,2\nb,1,A3C,4,50,10,\n",
        header=HEADER + ",weight",
    )
    w = wl.load_traces([path], TABLE)
    assert [j.id for j in w.jobs] == ["a/1", "b/1"]
    assert w.jobs[1].gpus == 4 and w.jobs[1].arrival_s == 10
    assert w.weight("a") == 2 and w.weight("b") == 1


@pytest.mark.parametrize(
    "body, fragments",
    [
        ("a,1,ResNet-50 (batch size 32),x,1000,0\n", ["line 2", "gpus", "expected a number"]),
        ("a,1,ResNet-50 (batch size 32),1.5,1000,0\n", ["line 2", "gpus", "integer"]),
        ("a,1,ResNet-50 (batch size 32),0,1000,0\n", ["line 2", "gpus", "> 0"]),
        ("a,1,ResNet-50 (batch size 32),1,-5,0\n", ["line 2", "total_steps"]),
        ("a,1,ResNet-50 (batch size 32),1,10,-1\n", ["line 2", "arrival_s", ">= 0"]),
        ("a,1,ResNet-50 (batch size 32),1,10,nan\n", ["line 2", "arrival_s", "finite"]),
        ("a,1,ResNet-51 (batch size 32),1,10,0\n", ["line 2", "job_type", "did you mean 'ResNet-50 (batch size 32)'"]),
        ("a,1,A3C,1,10,0\na,1,A3C,1,10,5\n", ["line 3", "job_id", "already on line 2"]),
        ("a,1,A3C,1,10\n", ["line 2", "expected 6 fields, got 5"]),
        (",1,A3C,1,10,0\n", ["line 2", "tenant: empty"]),
    ],
)
def test_bad_csv_lines_name_file_line_and_field(tmp_path: Path, body: str, fragments: list[str]) -> None:
    path = _csv(tmp_path, body)
    with pytest.raises(InputError) as info:
        wl.load_traces([path], TABLE)
    message = info.value.message()
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    assert info.value.exit_code == 2


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,1,A3C,x,10,0\nb,2,A3C,1,y,0\n")
    with pytest.raises(InputError) as info:
        wl.load_traces([path], TABLE)
    assert len(info.value.problems) == 2


def test_conflicting_weights_and_missing_columns(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,1,A3C,1,10,0,1\na,2,A3C,1,10,0,3\n", header=HEADER + ",weight")
    with pytest.raises(InputError, match="line 3.*weight"):
        wl.load_traces([path], TABLE)
    path = _csv(tmp_path, "a,1,A3C,1,0\n", header="tenant,job_id,job_type,gpus,arrival_s")
    with pytest.raises(InputError, match="missing column.*total_steps"):
        wl.load_traces([path], TABLE)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file"):
        wl.load_traces([empty], TABLE)
    with pytest.raises(InputError, match="cannot read"):
        wl.load_traces([tmp_path / "nope.csv"], TABLE)


def test_csv_nodes_column_gives_the_gang_shape(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,1,A3C,8,10,0,1\na,2,A3C,6,10,0,3\na,3,A3C,4,10,0,\n", header=HEADER + ",nodes")
    jobs = {j.id: j for j in wl.load_traces([path], TABLE).jobs}
    assert (jobs["a/1"].nodes, jobs["a/1"].shape) == (1, Shape(8, 8, 1))
    assert (jobs["a/2"].nodes, jobs["a/2"].shape) == (3, Shape(6, 2, 3))
    assert (jobs["a/3"].nodes, jobs["a/3"].shape) == (None, Shape(4))


@pytest.mark.parametrize(
    "row, fragments",
    [
        ("a,1,A3C,8,10,0,3", ["line 2", "nodes", "gpus 8 is not a multiple of nodes 3"]),
        ("a,1,A3C,8,10,0,0", ["line 2", "nodes", "> 0"]),
        ("a,1,A3C,8,10,0,two", ["line 2", "nodes", "expected a number"]),
        ("a,1,A3C,8,10,0,1.5", ["line 2", "nodes", "integer"]),
    ],
)
def test_bad_nodes_name_file_line_and_column(tmp_path: Path, row: str, fragments: list[str]) -> None:
    path = _csv(tmp_path, "a,0,A3C,1,10,0,1\n" + row.replace("a,1", "b,1") + "\n", header=HEADER + ",nodes")
    with pytest.raises(InputError) as info:
        wl.load_traces([path], TABLE)
    message = info.value.message()
    assert str(path) in message
    for fragment in [f.replace("line 2", "line 3") for f in fragments]:
        assert fragment in message


GAVEL_LINE = "ResNet-18 (batch size 32)\tcd %s && python3 main.py\t--num_steps\t1\t{steps}\t{arrival}\t{gpus}\n"


def test_gavel_trace_one_tenant_per_file_and_window(tmp_path: Path) -> None:
    a = tmp_path / "vcA.trace"
    a.write_text("".join(GAVEL_LINE.format(steps=100 * i, arrival=float(10 * i), gpus=1) for i in range(1, 6)))
    b = tmp_path / "vcB.trace"
    b.write_text(GAVEL_LINE.format(steps=7, arrival="25.000000", gpus=2))
    w = wl.load_traces([a, b], TABLE, window=(20.0, 50.0))
    # arrivals 20, 30, 40 of vcA and 25 of vcB, re-based to the window start
    assert [(j.tenant, j.arrival_s) for j in w.jobs] == [("vcA", 0.0), ("vcB", 5.0), ("vcA", 10.0), ("vcA", 20.0)]
    assert w.jobs[1].gpus == 2 and w.jobs[1].total_steps == 7
    capped = wl.load_traces([a, b], TABLE, max_jobs=2, static=True)
    assert sorted(j.id for j in capped.jobs) == ["vcA/1", "vcA/2", "vcB/1"]
    assert {j.arrival_s for j in capped.jobs} == {0.0}


def test_gavel_physical_cluster_layout(tmp_path: Path) -> None:
    path = tmp_path / "phys.trace"
    path.write_text("A3C\tpython3 main.py\ta3c\t--max-steps\t1\t346\t2\t1\t-1.000000\t12\n")
    (job,) = wl.load_traces([path], TABLE).jobs
    assert (job.job_type, job.total_steps, job.gpus, job.arrival_s) == ("A3C", 346, 2, 12)


def test_bad_gavel_trace(tmp_path: Path) -> None:
    path = tmp_path / "bad.trace"
    path.write_text(GAVEL_LINE.format(steps=10, arrival=0, gpus=1) + "A3C\tonly\tthree\n"
                    + GAVEL_LINE.format(steps=10, arrival=0, gpus="two"))
    with pytest.raises(InputError) as info:
        wl.load_traces([path], TABLE)
    message = info.value.message()
    assert "line 2" in message and "7 (or 10)" in message
    assert "line 3" in message and "scale_factor" in message


def test_window_and_weights_and_cluster_specs_reject_nonsense() -> None:
    assert wl.parse_window("10:20") == (10.0, 20.0)
    assert wl.parse_window("5:")[1] == float("inf")
    for bad in ("20:10", "abc", "10"):
        with pytest.raises(UserError):
            wl.parse_window(bad)
    assert wl.parse_weights(["a=2", "b=0.5"]) == {"a": 2.0, "b": 0.5}
    for bad in ("a", "a=0", "=2", "a=x"):
        with pytest.raises(UserError):
            wl.parse_weights([bad])
    assert dict(parse_cluster("36:12:4").capacity) == {"v100": 36, "p100": 12, "k80": 4}
    assert dict(parse_cluster("v100=2, k80=3").capacity) == {"v100": 2, "k80": 3}
    for bad in ("1:2", "v100=x", "v100", "v100=-1", "v100=0", "v100=1,v100=2"):
        with pytest.raises(UserError):
            parse_cluster(bad)
    nodes = parse_cluster("v100=10", gpus_per_node=4).nodes()
    assert [(n.name, n.gpus) for n in nodes] == [("v100-1", 4), ("v100-2", 4), ("v100-3", 2)]
    fast = with_speeds(parse_cluster("v100=8", 4), {"v100-2": 1.5})
    assert [n.speed for n in fast.nodes()] == [1.0, 1.5]
    with pytest.raises(UserError):
        with_speeds(parse_cluster("v100=8"), {"v100-1": 2.0})


job_rows = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c d"]),
        st.sampled_from(TABLE.job_types),
        st.sampled_from([(1, None), (2, None), (2, 1), (4, 2), (6, 3), (8, 1), (8, None)]),
        st.integers(1, 10**9),
        st.floats(0, 1e7, allow_nan=False).map(lambda x: round(x, 3)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=scaled(25), deadline=None)
@given(rows=job_rows)
def test_csv_round_trip(tmp_path_factory: pytest.TempPathFactory, rows: list) -> None:
    """What --save-workload writes reads back the same (the nodes column when any job has one)."""
    jobs = [wl.TraceJob(f"{t}/{i}", t, jt, g, float(s), a, n) for i, (t, jt, (g, n), s, a) in enumerate(rows)]
    w = wl.make_workload(jobs, {"a": 2.0})
    path = tmp_path_factory.mktemp("rt") / "w.csv"
    wl.write_csv(w, path)
    back = wl.load_traces([path], TABLE)
    assert back.jobs == w.jobs
    if "a" in w.tenants:
        assert back.weight("a") == 2.0
    assert back.weight("b") == 1.0
