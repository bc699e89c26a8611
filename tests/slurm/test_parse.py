"""The pure parsers: every format in use, plus round trips (format like Slurm, parse back)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.errors import SlurmOutputError
from slurm_fair.slurm.parse.fields import expand_hostlist, parse_elapsed, parse_time
from slurm_fair.slurm.parse.gres import (
    UNTYPED, gpu_request, gpu_request_of, gpus_by_type, gpus_in_tres_map, parse_tres_map, retype_request,
)
from slurm_fair.slurm.parse.records import split_records
from slurm_fair.slurm.parse.squeue import parse_squeue
from slurm_fair.slurm.parse.tags import MAX_TAGS, parse_tags

FAST = settings(max_examples=scaled(60), deadline=None)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("gpu:v100:4(S:0-1)", {"v100": 4}),
        ("gpu:v100:2(IDX:0-1)", {"v100": 2}),
        ("gpu:v100:3(IDX:0,2-3)", {"v100": 3}),
        ("gpu:a100:2,gpu:v100:2", {"a100": 2, "v100": 2}),
        ("gpu:a100:2(S:0),gpu:v100:2(S:1)", {"a100": 2, "v100": 2}),
        ("gpu:a100:0(IDX:N/A),gpu:v100:1(IDX:3)", {"a100": 0, "v100": 1}),
        ("gpu:4", {UNTYPED: 4}),
        ("gpu:4,mps:400", {UNTYPED: 4}),
        ("(null)", {}),
        ("", {}),
        # issue 41: untyped GPUs in use, flags, shards and MIG beside GPUs
        ("gpu:(null):4(IDX:0-3)", {UNTYPED: 4}),
        ("gpu:(null):0(IDX:N/A)", {UNTYPED: 0}),
        ("gpu:(null):2(IDX:0-1),gpu:a100:1(IDX:2)", {UNTYPED: 2, "a100": 1}),
        ("gpu:m60:no_consume:2", {"m60": 2}),
        ("gpu:no_consume:2", {UNTYPED: 2}),
        ("gpu:nvidia_rtx_5000_ada_generation:4(S:0),VramPerGpu:no_consume:32G", {"nvidia_rtx_5000_ada_generation": 4}),
        ("gpu:a100:4(S:0-1),shard:a100:32(S:0-1)", {"a100": 4}),
        ("gpu:nvidia_a100_3g.20gb:2,gpu:nvidia_a100_1g.5gb:7", {"nvidia_a100_3g.20gb": 2, "nvidia_a100_1g.5gb": 7}),
        ("gpu:tesla:2,gpu:kepler:2,mps:400,bandwidth:lustre:no_consume:4G", {"tesla": 2, "kepler": 2}),
        ("gpu:a100:4(IDX:0-", {"a100": 4}),  # a column cut at its width
        ("gpu:2,(null)", {UNTYPED: 2}),
    ],
)
def test_node_gres(text, expected):
    assert gpus_by_type(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("gres:gpu:v100:2", (2, "v100")),  # 22.05
        ("gres/gpu:v100:2", (2, "v100")),  # 24.05+
        ("gres:gpu:2", (2, None)),
        ("gres/gpu:2", (2, None)),
        ("gpu:a100:1", (1, "a100")),
        ("gres:gpu", (1, None)),
        ("gres:gpu:v100", (1, "v100")),
        ("gres:gpu:2,gres:mps:100", (2, None)),
        ("gres:mps:100", (0, None)),
        ("N/A", (0, None)),
        ("gres/gpu=1", (1, None)),  # 24.11: TresPerTask of --gpus-per-task=1 (recorded)
        ("gres/gpu:v100=1", (1, "v100")),  # 24.11: --gpus-per-task=v100:1
    ],
)
def test_gpu_request_strings(text, expected):
    assert gpu_request_of(text) == expected


@pytest.mark.parametrize(
    "tres, expected",
    [
        ("cpu=2,mem=1G,node=1,billing=2,gres/gpu=2,gres/gpu:v100=2", (2, "v100")),
        ("cpu=1,gres/gpu=4", (4, None)),
        ("cpu=1,mem=100M", (0, None)),
        ("billing=1,cpu=1,gres/gpu:k80=1,gres/gpu=1,mem=1M,node=1", (1, "k80")),
        ("gres:gpu:v100=3", (3, "v100")),
    ],
)
def test_allocated_tres(tres, expected):
    assert gpus_in_tres_map(parse_tres_map(tres)) == expected


def test_gres_flags_and_units_survive_a_rewrite():
    assert retype_request("gres:gpu:2,gres:bandwidth:lustre:no_consume:4G", "a100") == \
        "gres:gpu:a100:2,gres:bandwidth:lustre:no_consume:4G"
    assert retype_request("gres/gpu:(null):2", "v100") == "gres/gpu:v100:2"


@pytest.mark.parametrize("tres, expected", [
    ("gres/gpu=4,gres/gpu:a100=2", (4, None)),  # the rest of a type accounting does not track
    ("gres/gpu=4,gres/gpu:a100=2,gres/gpu:v100=2", (4, None)),
    ("gres/gpu:volta=2,mem=125G,node=1", (2, "volta")),
    ("billing=4,cpu=1,gres/shard=8,mem=4G", (0, None)),
    ("cpu=1,gres/gpu:nvidia_a100_3g.20gb=1,gres/gpu=1", (1, "nvidia_a100_3g.20gb")),
    ("gres/gpumem=36266M,gres/gpuutil=100", (0, None)),
])
def test_allocated_tres_of_issue_41(tres, expected):
    assert gpus_in_tres_map(parse_tres_map(tres)) == expected


def test_retype_keeps_count_form_and_other_gres():
    assert retype_request("gres:gpu:2,gres:mps:10", "v100") == "gres:gpu:v100:2,gres:mps:10"
    assert retype_request("gres/gpu:a100:3", None) == "gres/gpu:3"
    assert retype_request("gres/gpu:a100:3", "k80") == "gres/gpu:k80:3"
    # 24.11's TRES form of a per-task request keeps its '=' (Slurm accepts both, prints this)
    assert retype_request("gres/gpu=1", "v100") == "gres/gpu:v100=1"
    assert retype_request("gres/gpu:v100=1", None) == "gres/gpu=1"


@pytest.mark.parametrize(
    "per_job, per_node, per_task, nodes, tasks, count, per, total",
    [
        ("gres:gpu:v100:4", "", "", 1, 1, 4, "job", 4),  # --gpus=v100:4
        ("", "gres:gpu:2", "", 3, 3, 2, "node", 6),  # --gres=gpu:2 -N 3
        ("", "", "gres:gpu:1", 2, 4, 1, "task", 4),  # --gpus-per-task=1 -n 4
    ],
)
def test_gpu_request_forms(per_job, per_node, per_task, nodes, tasks, count, per, total):
    r = gpu_request(per_job, per_node, per_task, nodes, tasks)
    assert (r.count, r.per, r.total) == (count, per, total)
    assert r.raw.split("=", 1)[1] == (per_job or per_node or per_task)


def test_cpu_only_job_has_no_request():
    assert gpu_request("", "", "", 1, 1) is None
    assert gpu_request("N/A", "gres:mps:10", "(null)", 1, 1) is None


def test_times_and_elapsed():
    assert parse_time("2024-05-01T12:00:03").second == 3
    assert parse_time("Unknown") is None and parse_time("N/A") is None
    assert parse_elapsed("1-02:03:04") == 86400 + 7384
    assert parse_elapsed("03:04") == 184
    with pytest.raises(SlurmOutputError):
        parse_time("yesterday")


def test_tags_defensive():
    tags = parse_tags("fair:class=resnet50 fair:tput=12.5,fair:preemptible; junk fair:class=x")
    assert tags == {"class": "resnet50", "tput": "12.5", "preemptible": ""}
    assert parse_tags("fair:class fair:class=lm") == {"class": ""}  # a bare flag has no value
    assert parse_tags("$(touch /tmp/x) `id` ; | 'fair:class=a") == {}
    assert parse_tags("unfair:class=a xfair:b") == {}
    assert len(parse_tags(" ".join(f"fair:k{i}=1" for i in range(100)))) == MAX_TAGS


def test_field_count_mismatch_is_a_typed_error():
    with pytest.raises(SlurmOutputError):
        split_records("a|x|b\n", "|x|", 3)


# --- round trips ------------------------------------------------------------------------------

gpu_type = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=6).filter(
    lambda s: not s.isdigit()
)
counts = st.integers(min_value=0, max_value=64)


@st.composite
def node_gres(draw):
    """A node's GPUs as Slurm prints them (several types, sockets or index suffixes)."""
    types = draw(st.dictionaries(gpu_type, counts, min_size=0, max_size=4))
    items = []
    for t, n in types.items():
        suffix = draw(st.sampled_from(["", "(S:0)", "(S:0-1)", "(IDX:0-3)", "(IDX:0,2-3)", "(IDX:N/A)"]))
        items.append(f"gpu:{t}:{n}{suffix}")
    if draw(st.booleans()):
        items.append("mps:100")
    return types, ",".join(items) or "(null)"


@FAST
@given(node_gres())
def test_node_gres_round_trip(case):
    types, text = case
    assert gpus_by_type(text) == types


site_type = st.one_of(gpu_type.filter(lambda t: t != UNTYPED), st.sampled_from([
    "nvidia_a100_3g.20gb", "tesla_v100-sxm3-32gb", "NVlink_A100_40GB", "nvidia_h100_80gb_hbm3_1g.10gb", "m60"]))


@st.composite
def node_gres_as_sites_print(draw):
    """Issue 41: untyped GPUs as ``(null)`` (GresUsed) or bare, ``no_consume`` flags, shards and
    other gres beside them, MIG and NVML names, a suffix on any item."""
    expected: dict[str, int] = {}
    items = []
    suffixes = st.sampled_from(["", "(S:0)", "(S:0-1)", "(IDX:0-3)", "(IDX:0,2-3)", "(IDX:N/A)"])
    for t, n in draw(st.dictionaries(st.one_of(st.none(), site_type), counts, max_size=4)).items():
        flag = ":no_consume" if draw(st.booleans()) and draw(st.booleans()) else ""
        if t is None:
            form = draw(st.sampled_from(["gpu{f}:{n}", "gpu:(null){f}:{n}"]))
            items.append(form.format(f=flag, n=n) + draw(suffixes))
            expected[UNTYPED] = n
        else:
            items.append(f"gpu:{t}{flag}:{n}{draw(suffixes)}")
            expected[t] = n
        if draw(st.booleans()):
            items.append(f"shard:{t or '(null)'}:{8 * n}{draw(suffixes)}")
    if draw(st.booleans()):
        items.append("VramPerGpu:no_consume:32G")
    order = draw(st.permutations(items))
    return expected, ",".join(order) or "(null)"


@FAST
@given(node_gres_as_sites_print())
def test_node_gres_as_sites_print_round_trip(case):
    expected, text = case
    assert gpus_by_type(text) == expected


@FAST
@given(st.sampled_from(["gres:", "gres/", ""]), st.one_of(st.none(), gpu_type), st.integers(1, 64),
       st.sampled_from([":", "="]))
def test_request_round_trip(prefix, t, n, sep):
    text = f"{prefix}gpu:{t}{sep}{n}" if t else f"{prefix}gpu{sep}{n}"
    assert gpu_request_of(text) == (n, t)
    # pinning then unpinning gives back the untyped request, keeping count and form
    pinned = retype_request(text, "zz9")
    assert gpu_request_of(pinned) == (n, "zz9")
    assert retype_request(pinned, None) == f"{prefix}gpu{sep}{n}"


any_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


@FAST
@given(st.lists(st.lists(any_text, min_size=4, max_size=4), max_size=6))
def test_records_with_hostile_text_round_trip(rows):
    """Fields 1 and 3 may hold anything (newlines, '|', the old delimiter...) except the
    per-call separator; the first is an id that Slurm never leaves empty."""
    fs = "|0123abcd|"
    rows = [[f"{i}", r[1], r[2], r[3]] for i, r in enumerate(rows)]
    rows = [[f.replace(fs, "") for f in r] for r in rows]
    text = "".join(fs.join(r) + "\n" for r in rows)
    assert split_records(text, fs, 4) == rows


@FAST
@given(st.lists(st.sampled_from(["a100-[1-3]", "v100-1", "k80-[01-02]", "n[1-2,5]"]), min_size=1, max_size=3))
def test_hostlist_round_trip(parts):
    from ClusterShell.NodeSet import NodeSet

    names = expand_hostlist(",".join(parts))
    assert expand_hostlist(str(NodeSet.fromlist(names))) == tuple(NodeSet.fromlist(names))
    assert set(names) == set(NodeSet(",".join(parts)))


names = st.text(string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=12)


@st.composite
def squeue_job(draw):
    """One job as squeue prints it (22.05 or 24.05 TRES prefix), and what it must parse to."""
    prefix = draw(st.sampled_from(["gres:", "gres/"]))
    form = draw(st.sampled_from(["job", "node", "task", "none"]))
    t = draw(st.one_of(st.none(), gpu_type))
    n = draw(st.integers(1, 8))
    nodes = draw(st.integers(1, 4))
    tasks = draw(st.integers(1, 8))
    spec = f"{prefix}gpu:{t}:{n}" if t else f"{prefix}gpu:{n}"
    cols = {"job": "N/A", "node": "N/A", "task": "N/A"}
    if form != "none":
        cols[form] = spec
    fields = {
        "id": str(draw(st.integers(1, 10**7))),
        "state": draw(st.sampled_from(["PD", "R"])),
        "account": draw(names),
        "user": draw(names),
        "name": draw(any_text),
        "comment": draw(any_text),
        "req_nodes": draw(st.sampled_from(["", "v100-1", "p100-[1-2]", "k80-1,v100-2"])),
        "time_limit": draw(st.sampled_from([("UNLIMITED", None), ("10:00", 10), ("1:30:00", 90),
                                            ("1-00:00:00", 1440), ("0:30", 1)])),
        "reservation": draw(st.sampled_from(["(null)", "maint", "gpu_resv"])),
        "dependency": draw(st.sampled_from(["(null)", "afterok:12(unfulfilled)"])),
        "features": draw(st.sampled_from(["(null)", "ib", "a100&nvlink|h100"])),
    }
    record = [
        fields["id"], fields["state"], fields["account"], fields["user"], "gpu", "normal", "None",
        "2025-01-02T03:04:05", "2025-01-02T03:05:00" if fields["state"] == "R" else "N/A", "100",
        "0", str(nodes), str(tasks), cols["job"], cols["node"], cols["task"],
        f"cpu=1,gres/gpu={n},gres/gpu:{t or 'v100'}={n}", "v100-1" if fields["state"] == "R" else "",
        "0", "1", "0", "1", fields["req_nodes"], fields["time_limit"][0], fields["reservation"],
        fields["dependency"], fields["features"], "(null)", fields["name"], fields["comment"],
    ]
    if form == "none":
        expected_total = None
    else:
        expected_total = {"job": n, "node": n * nodes, "task": n * tasks}[form]
    return record, fields, (form, t, n, expected_total)


@FAST
@given(st.lists(squeue_job(), min_size=1, max_size=5), st.text("0123456789abcdef", min_size=16, max_size=16))
def test_squeue_records_round_trip(jobs, nonce):
    fs = f"|{nonce}|"
    jobs = [(r[:-2] + [r[-2].replace(fs, ""), r[-1].replace(fs, "")], f, e) for r, f, e in jobs]
    text = "".join(fs.join(r) + "\n" for r, _, _ in jobs)
    parsed = parse_squeue(text, fs)
    assert len(parsed) == len(jobs)
    for job, (record, fields, (form, t, n, total)) in zip(parsed, jobs):
        assert (job.job_id, job.account, job.user) == (fields["id"], fields["account"], fields["user"])
        assert job.name == record[-2]
        assert job.comment == ("" if record[-1] == "(null)" else record[-1])
        want_nodes = {"": (), "v100-1": ("v100-1",), "p100-[1-2]": ("p100-1", "p100-2"),
                      "k80-1,v100-2": ("k80-1", "v100-2")}[fields["req_nodes"]]
        assert job.req_nodes == want_nodes
        assert job.time_limit_min == fields["time_limit"][1]
        plain = {"(null)": ""}
        assert job.reservation == plain.get(fields["reservation"], fields["reservation"])
        assert job.dependency == plain.get(fields["dependency"], fields["dependency"])
        assert job.features == plain.get(fields["features"], fields["features"])
        if form == "none":
            assert job.gpu_request is None
        else:
            assert (job.gpu_request.per, job.gpu_request.gpu_type, job.gpu_request.count) == (form, t, n)
            assert job.gpu_request.total == total
            if job.running:
                assert job.gpu_type_running == (t or "v100")


def test_partition_lines_of_every_rule():
    from slurm_fair.slurm.parse.partitions import parse_partitions

    text = (
        "PartitionName=v100 AllowGroups=ALL DenyAccounts=guest,ext AllowQos=ALL AllocNodes=ALL Default=NO "
        "QoS=N/A DefaultTime=NONE MaxNodes=2 MaxTime=1-12:00:00 Nodes=v100-[1-2] PriorityTier=3 State=UP "
        "TRES=cpu=32,mem=125G,gres/gpu=8\n"
        "PartitionName=gpu AllowGroups=hpc,ml AllowAccounts=physics AllowQos=normal,high Default=YES "
        "MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=(null) PriorityTier=1 State=DRAIN\n"
    )
    v100, gpu = parse_partitions(text)
    assert (v100.name, v100.nodes, v100.priority_tier, v100.max_time_min, v100.max_nodes) == (
        "v100", ("v100-1", "v100-2"), 3, 36 * 60, 2)
    assert v100.allow_accounts is None and v100.deny_accounts == {"guest", "ext"} and not v100.default
    assert (gpu.allow_accounts, gpu.allow_qos, gpu.allow_groups) == ({"physics"}, {"normal", "high"}, {"hpc", "ml"})
    assert gpu.default and gpu.state == "DRAIN" and gpu.nodes == () and gpu.max_time_min is None
