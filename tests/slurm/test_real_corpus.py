"""Real Slurm output other projects publish as test data (tests/data/real, PROVENANCE.toml), run
through every parser, the type normaliser and ``speeds learn``.

The expected values below were read off the raw text by hand and are written here as data; none
is produced by the code under test. Each table must cover the corpus exactly: a string the corpus
holds that no table lists fails the test (so a new capture cannot slip through untested), and so
does a table entry no capture holds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_fair.cli import cli, main
from slurm_fair.estimates import priors as pr
from slurm_fair.estimates.history import failures_from_history, runs_from_history
from slurm_fair.estimates.learn import learn
from slurm_fair.slurm.model import node_state_schedulable
from slurm_fair.slurm.parse.fields import parse_elapsed
from slurm_fair.slurm.parse.gres import gpu_request_of, gpus_by_type, gpus_in_tres_map, parse_tres_map
from slurm_fair.slurm.parse.history import parse_history
from slurm_fair.slurm.parse.nodes import parse_nodes
from slurm_fair.slurm.parse.partitions import parse_partitions
from slurm_fair.toml_schema import tomllib

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
PROVENANCE = tomllib.loads((REAL / "PROVENANCE.toml").read_text())["file"]
#: licenses that allow redistributing the files (the copyleft ones as separate, unmodified data)
REDISTRIBUTABLE = {"MIT", "Apache-2.0", "BSD-3-Clause", "GPL-3.0", "LGPL-3.0"}


def files(pattern: str) -> list[Path]:
    out = sorted(REAL.glob(pattern))
    assert out, pattern
    return out


# --- provenance ----------------------------------------------------------------------------

#: the provenance table and the license texts the GPL-3.0 and LGPL-3.0 captures travel with
NOT_CAPTURES = {"PROVENANCE.toml", "COPYING.GPL-3.0", "COPYING.LGPL-3.0"}


def test_every_file_has_its_provenance_and_a_license_that_allows_it():
    listed = {e["file"] for e in PROVENANCE}
    on_disk = {str(p.relative_to(REAL)) for p in REAL.rglob("*") if p.is_file() and p.name not in NOT_CAPTURES}
    assert listed == on_disk
    for e in PROVENANCE:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", e["repository"]), e
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e
        assert e["license"] in REDISTRIBUTABLE, e
        assert e["path"] and e["command"] and e["slurm"], e


def test_the_corpus_spans_slurm_20_11_to_26_05():
    versions = {e["slurm"].split(" ")[0] for e in PROVENANCE}
    assert {"20.11.8", "21.08.5", "23.11.10", "24.11.7", "25.05", "25.11.1", "25.11.2", "26.05.2"} <= versions


# --- node gres (sinfo Gres / GresUsed columns) ----------------------------------------------

#: every gres string of the sinfo captures -> GPUs per type (untyped: "gpu")
GRES = {
    "(null)": {},
    "gpu:(null):0(IDX:N/A)": {"gpu": 0},
    "gpu:0": {"gpu": 0},
    "gpu:1": {"gpu": 1},
    "gpu:2": {"gpu": 2},
    "gpu:8": {"gpu": 8},
    "gpu:NVlink_A100_40GB:1(IDX:0)": {"NVlink_A100_40GB": 1},
    "gpu:NVlink_A100_40GB:2": {"NVlink_A100_40GB": 2},
    "gpu:NVlink_A100_40GB:2(IDX:0,2)": {"NVlink_A100_40GB": 2},
    "gpu:NVlink_A100_40GB:2(IDX:0,3)": {"NVlink_A100_40GB": 2},
    "gpu:NVlink_A100_40GB:2(IDX:0-1)": {"NVlink_A100_40GB": 2},
    "gpu:NVlink_A100_40GB:2(IDX:1-2)": {"NVlink_A100_40GB": 2},
    "gpu:NVlink_A100_40GB:2(S:0-1)": {"NVlink_A100_40GB": 2},
    "gpu:NVlink_A100_40GB:3": {"NVlink_A100_40GB": 3},
    "gpu:NVlink_A100_40GB:3(IDX:0-2)": {"NVlink_A100_40GB": 3},
    "gpu:NVlink_A100_40GB:3(IDX:1-3)": {"NVlink_A100_40GB": 3},
    "gpu:NVlink_A100_40GB:3(S:0-1)": {"NVlink_A100_40GB": 3},
    "gpu:NVlink_A100_40GB:4": {"NVlink_A100_40GB": 4},
    "gpu:NVlink_A100_40GB:4(IDX:0-3)": {"NVlink_A100_40GB": 4},
    "gpu:NVlink_A100_40GB:4(S:0-1)": {"NVlink_A100_40GB": 4},
    "gpu:NVlink_A800_80GB:4(IDX:0-3)": {"NVlink_A800_80GB": 4},
    "gpu:NVlink_A800_80GB:4(S:0-1)": {"NVlink_A800_80GB": 4},
    "gpu:h100:1": {"h100": 1},
    "gpu:h100:1(IDX:0)": {"h100": 1},
    "gpu:h100:1(IDX:3)": {"h100": 1},
    # sinfo cut the column at its width: the shard item is truncated, the GPU is whole
    "gpu:h100:1,shard:h10": {"h100": 1},
    "gpu:h100:3(IDX:0-2)": {"h100": 3},
    "gpu:h100:3(IDX:1-3)": {"h100": 3},
    "gpu:h100:4": {"h100": 4},
    "gpu:h100:4(IDX:0-3)": {"h100": 4},
    "gpu:mi210:2": {"mi210": 2},
    "gpu:mi210:2(S:0)": {"mi210": 2},
    "gpu:model_a:0(IDX:N/A)": {"model_a": 0},
    "gpu:model_a:0(IDX:N/A),gpu:model_b:0(IDX:N/A)": {"model_a": 0, "model_b": 0},
    "gpu:model_a:0(IDX:N/A),gpu:model_b:1(IDX:2)": {"model_a": 0, "model_b": 1},
    "gpu:model_a:2(IDX:0,3)": {"model_a": 2},
    "gpu:model_a:2,gpu:model_b:2": {"model_a": 2, "model_b": 2},
    "gpu:model_a:3(IDX:0-2)": {"model_a": 3},
    "gpu:model_a:4": {"model_a": 4},
    "gpu:model_a:4(IDX:0-3)": {"model_a": 4},
    "gpu:model_a:4(S:0-3)": {"model_a": 4},
    "gpu:model_b:0(IDX:N/A)": {"model_b": 0},
    "gpu:model_b:4": {"model_b": 4},
    "gpu:nvidia_a100_1g.5gb:0(IDX:N/A)": {"nvidia_a100_1g.5gb": 0},
    "gpu:nvidia_a100_1g.5gb:21(S:0-1)": {"nvidia_a100_1g.5gb": 21},
    "gpu:nvidia_a100_80gb:3,gpu:nvidia_h100_80gb:2": {"nvidia_a100_80gb": 3, "nvidia_h100_80gb": 2},
    # ``mig`` is a gres of its own name (not ``gpu``): not counted as GPUs
    "gpu:nvidia_a100_80gb:8,mig:nvidia_a100_3g.40gb:7,gpu:nvidia_h100_80gb:4": {"nvidia_a100_80gb": 8,
                                                                                "nvidia_h100_80gb": 4},
    "gpu:nvidia_gb200:1(IDX:0)": {"nvidia_gb200": 1},
    "gpu:nvidia_gb200:4(IDX:0-3)": {"nvidia_gb200": 4},
    "gpu:nvidia_gb200:4(S:0-3)": {"nvidia_gb200": 4},
    "gpu:rtxa5000:0": {"rtxa5000": 0},
    "gpu:rtxa5000:1": {"rtxa5000": 1},
    "gpu:tesla_v100-sxm3-32gb:0": {"tesla_v100-sxm3-32gb": 0},
    "gpu:tesla_v100-sxm3-32gb:13(IDX:0-3,5-7,9-11,13-15)": {"tesla_v100-sxm3-32gb": 13},
    "gpu:tesla_v100-sxm3-32gb:16": {"tesla_v100-sxm3-32gb": 16},
    "gpu:tesla_v100-sxm3-32gb:16(IDX:0-15)": {"tesla_v100-sxm3-32gb": 16},
}

SINFO_FILES = ("slurm_exporter/*/sinfo_gpus_*.txt", "slurm_exporter/*/partitions_gpu*.txt",
               "slurm_exporter/*/node_detail*.txt", "slurm_exporter/*/gpus_snapshot*.txt")


def gres_tokens() -> set[str]:
    """The gres columns of the sinfo captures: ``(null)`` or ``name:...`` (no other column of
    these formats holds a colon: counts, states, memory, CPU states, partition names)."""
    out = set()
    for pattern in SINFO_FILES:
        for f in files(pattern):
            for line in f.read_text().splitlines():
                out |= {t for t in line.split() if t == "(null)" or re.match(r"[A-Za-z]\w*:", t)}
    return out


def test_the_gres_table_covers_the_sinfo_captures_exactly():
    assert gres_tokens() == set(GRES)


@pytest.mark.parametrize("text", sorted(GRES))
def test_node_gres_of_real_captures(text):
    assert gpus_by_type(text) == GRES[text]


def test_busy_untyped_gpus_are_busy():
    """The issue's case: ``gpu:(null):4(IDX:0-3)`` is 4 GPUs in use, not 1."""
    assert gpus_by_type("gpu:(null):4(IDX:0-3)") == {"gpu": 4}
    assert gpus_by_type("gpu:(null):3(IDX:0-7)") == {"gpu": 3}


# --- TRES maps (sacct AllocTRES/ReqTRES, partition TRES, node CfgTRES, scontrol job) --------

#: the GPU items of a TRES string -> (GPUs, the single type or None)
TRES = {
    "": (0, None),
    "gres/gpu:p100=1": (1, "p100"),
    "gres/gpu:tesla=4": (4, "tesla"),
    "gres/gpu:volta=2": (2, "volta"),
    "gres/gpu=1": (1, None),
    "gres/gpu=2": (2, None),
    "gres/gpu=4": (4, None),
    "gres/gpu:a100=1,gres/gpu=1": (1, "a100"),
    "gres/gpu:a100=2,gres/gpu=2": (2, "a100"),
    "gres/gpu:a100=4,gres/gpu=4": (4, "a100"),
    "gres/gpu:a100_80=1,gres/gpu=1": (1, "a100_80"),
    "gres/gpu:a100_80=4,gres/gpu=4": (4, "a100_80"),
    "gres/gpu:a40=1,gres/gpu=1": (1, "a40"),
    "gres/gpu:l40s=1,gres/gpu=1": (1, "l40s"),
    "gres/gpu:rtx30=1,gres/gpu=1": (1, "rtx30"),
    "gres/gpu:rtx30=4,gres/gpu=4": (4, "rtx30"),
    "gres/gpu:v100=1,gres/gpu=1": (1, "v100"),
    "gres/gpu=1,gres/gpu:v100=1": (1, "v100"),
    "gres/gpu=4,gres/gpu:a100=4": (4, "a100"),
    "gres/gpu=46,gres/gpu:v100-32g=46": (46, "v100-32g"),
    "gres/gpu=62,gres/gpu:v100=62": (62, "v100"),
    "gres/gpu=154,gres/gpu:p100=154": (154, "p100"),
    "gres/gpu=34,gres/gpu:v100-32g=34": (34, "v100-32g"),
    "gres/gpu=8,gres/gpu:v100-quad=8": (8, "v100-quad"),
    "gres/gpu=4,gres/gpu:v100-32g=4": (4, "v100-32g"),
    # a partition of three V100 kinds: 70 GPUs, no single type
    "gres/gpu=70,gres/gpu:v100=28,gres/gpu:v100-32g=34,gres/gpu:v100-quad=8": (70, None),
}


def gpu_items(tres: str) -> str:
    """The ``gres/gpu`` items of a TRES string, in order (the table's key)."""
    return ",".join(kv for kv in tres.split(",") if kv.startswith("gres/gpu"))


def tres_strings() -> set[str]:
    out: set[str] = set()
    for f in files("sonar/*/sacct*.txt"):
        out |= {ln.split("|")[29] for ln in f.read_text().splitlines()}
    for ln in (REAL / "hb-jobinfo/sacct.txt").read_text().splitlines():
        out |= set(ln.split("\u2603")[21:23])  # ReqTRES, AllocTRES
    for f in [*files("ondemand/*.txt"), *files("sonar/*/scontrol_show_job*.txt")]:
        out |= set(re.findall(r"(?:^| )(?:TRES|ReqTRES|AllocTRES)=(\S*)", f.read_text(), re.M))
    out |= {s for s, _ in json.loads((REAL / "xdmod/alloc-tres-gpu-count.json").read_text())}
    out |= {ln.split("CfgTRES=")[1] for ln in (REAL / "hb-jobinfo/scontrol.txt").read_text().splitlines()}
    return out


def test_the_tres_table_covers_the_captures_exactly():
    assert {gpu_items(s) for s in tres_strings()} == set(TRES)


@pytest.mark.parametrize("text", sorted(tres_strings()))
def test_tres_maps_of_real_captures(text):
    assert gpus_in_tres_map(parse_tres_map(text)) == TRES[gpu_items(text)]


def test_xdmods_own_gpu_counts_agree():
    for text, count in json.loads((REAL / "xdmod/alloc-tres-gpu-count.json").read_text()):
        assert gpus_in_tres_map(parse_tres_map(text))[0] == count, text


def test_scontrol_job_requests():
    """``TresPerJob=gres/gpu:4`` (Slurm 24.05+ prints ``gres/``); ``TresPerTask=cpu=4`` holds
    no GPU."""
    text = "".join(f.read_text() for f in files("sonar/*/scontrol_show_job*.txt"))
    assert sorted(re.findall(r"TresPerJob=(\S+)", text)) == ["gres/gpu:1", "gres/gpu:1", "gres/gpu:4",
                                                             "gres/gpu:4", "gres/gpu:4", "gres/gpu:4"]
    assert [gpu_request_of(s) for s in ("gres/gpu:4", "gres/gpu:1", "cpu=4", "cpu=24")] == [
        (4, None), (1, None), (0, None), (0, None)]


# --- node states -----------------------------------------------------------------------------

#: every node state of the captures (scontrol State=, sinfo StateLong) -> takes new jobs
STATES = {
    "IDLE+DYNAMIC_NORM": True,
    "MIXED+DYNAMIC_NORM": True,
    "IDLE+DYNAMIC_NORM+RESERVED": False,
    "IDLE+DRAIN+DYNAMIC_NORM+MAINTENANCE+RESERVED": False,
    "MIXED+DRAIN+DYNAMIC_NORM+MAINTENANCE+RESERVED": False,
    "MIXED+DYNAMIC_NORM+MAINTENANCE+RESERVED": False,
    "MIXED+DYNAMIC_NORM+MAINTENANCE+RESERVED+PLANNED": False,
    "allocated": True,
    "idle": True,
    "mixed": True,
    "mixed-": True,  # sinfo's "-": planned by the backfill scheduler
    "drained": False,
    "drained*": False,
    "inval": False,
    "maint": False,
    "reserved": False,
}

#: states in aws/aws-parallelcluster-node tests (Apache-2.0, commit 2e8f9a8e), sinfo(1) and
#: scontrol(1): cloud nodes, power saving, not responding
MORE_STATES = {
    "IDLE+CLOUD+POWERED_DOWN": True,  # Slurm boots it for a job (sinfo: idle~)
    "IDLE+CLOUD+POWER": True,
    "idle~": True,
    "IDLE+CLOUD": True,
    "MIXED+CLOUD": True,
    "DOWN+CLOUD+REBOOT_ISSUED": False,
    "IDLE+CLOUD+MAINTENANCE+RESERVED": False,
    "DOWN+CLOUD+MAINTENANCE+POWERED_DOWN+RESERVED": False,
    "DOWN*": False,
    "down*": False,
    "idle*": False,  # not responding
    "idle$": False,  # in a maintenance reservation
    "mix^": False,  # reboot issued
    "idle%": False, "idle!": False,  # powering down, about to
    "idle#": True, "mix@": True,  # powering up, reboot pending
    "MIXED+DRAIN": False,
    "IDLE+DRAIN+INVALID_REG": False,
    "COMPLETING": True,
    "MAINTENANCE+DRAIN": False,
    "drng": False,
    "FUTURE": False,
    "UNKNOWN": False,
    "": False,
}


def node_states() -> set[str]:
    out = set()
    for f in files("slurm_exporter/*/scontrol_nodes.txt"):
        out |= set(re.findall(r" State=(\S+)", f.read_text()))
    for f in files("slurm_exporter/*/gpus_snapshot.txt"):
        out |= {ln.split()[1] for ln in f.read_text().splitlines() if ln.strip()}
    for f in files("slurm_exporter/*/node_detail*.txt"):
        out |= {ln.split()[4] for ln in f.read_text().splitlines() if ln.strip()}
    return out


def test_the_state_table_covers_the_captures_exactly():
    assert node_states() == set(STATES)


@pytest.mark.parametrize("state", sorted({**STATES, **MORE_STATES}))
def test_node_states(state):
    assert node_state_schedulable(state) is {**STATES, **MORE_STATES}[state]


# --- scontrol show node -o ---------------------------------------------------------------------

#: per capture: nodes listed, and the GPU nodes' (installed, in use)
SCONTROL_NODES = {
    "slurm_exporter/24.11.7/scontrol_nodes.txt": 20,
    "slurm_exporter/26.05.2/scontrol_nodes.txt": 20,
    "slurm_exporter/25.11.2/scontrol_nodes.txt": 7,
}
GPU_NODES = {
    **{f"nb{i}": ({"model_a": 4}, {}) for i in (1, 2, 3, 4)},
    **{f"nb{i}": ({"model_b": 4}, {}) for i in (5, 6, 7, 8)},
    **{f"nb{i}": ({"model_a": 2, "model_b": 2}, {}) for i in (9, 10)},
}


@pytest.mark.parametrize("name", sorted(SCONTROL_NODES))
def test_scontrol_show_node(name):
    nodes = parse_nodes((REAL / name).read_text())
    assert len(nodes) == SCONTROL_NODES[name]
    gpu = {n.name: (dict(n.gpus_total), dict(n.gpus_used)) for n in nodes if n.gpus_total}
    assert gpu == ({} if name.startswith("slurm_exporter/25.11.2") else GPU_NODES)
    assert all(n.schedulable is STATES[n.state] for n in nodes)


def test_scontrol_node_in_use_from_alloc_tres():
    """Slurm 23.02+ prints no GresUsed in ``scontrol show node``: GPUs in use come from AllocTRES."""
    (n,) = parse_nodes("NodeName=g1 Gres=gpu:a100:4(S:0-1) State=MIXED Partitions=gpu "
                       "CfgTRES=cpu=64,gres/gpu=4,gres/gpu:a100=4 AllocTRES=cpu=8,gres/gpu=2,gres/gpu:a100=2")
    assert (dict(n.gpus_total), dict(n.gpus_used), n.partitions) == ({"a100": 4}, {"a100": 2}, ("gpu",))
    (n,) = parse_nodes("NodeName=g2 Gres=gpu:4 State=ALLOCATED AllocTRES=cpu=8,gres/gpu=4")
    assert (dict(n.gpus_total), dict(n.gpus_used)) == ({"gpu": 4}, {"gpu": 4})


# --- scontrol show partition -o ------------------------------------------------------------------

def test_partitions_of_real_sites():
    owens = {p.name: p for p in parse_partitions((REAL / "ondemand/scontrol_show_partitions_owens.txt").read_text())}
    assert sorted(owens) == ["batch", "debug", "gpubackfill-parallel", "gpubackfill-serial", "gpudebug",
                             "gpuparallel", "gpuserial", "hugemem", "hugemem-parallel", "longserial", "parallel",
                             "quick", "serial", "systems"]
    g = owens["gpuserial"]
    assert (len(g.nodes), g.max_time_min, g.max_nodes, g.state, g.allow_accounts) == (154, 7 * 24 * 60, 1, "UP", None)
    assert len(g.deny_accounts) == 40 and "pas2051" in g.deny_accounts
    d = owens["debug"]
    assert (len(d.nodes), d.max_time_min, d.max_nodes) == (640, 60, 2)
    ascend = parse_partitions((REAL / "ondemand/scontrol_show_partitions_ascend.txt").read_text())
    assert [(p.name, p.state, p.default) for p in ascend] == [("batch", "INACTIVE", True), ("debug", "UP", False),
                                                             ("serial", "UP", False)]
    assert len(parse_partitions((REAL / "ondemand/scontrol_show_partitions_oakley.txt").read_text())) == 12


# --- sacct histories -----------------------------------------------------------------------------

#: the columns of hb-jobinfo's capture (its test/data/README.md), in order
HB_COLUMNS = ("JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,Timelimit,Elapsed,"
              "TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,AllocTRES,TRESUsageInMax,"
              "TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,MaxRSSTask,MaxVMSizeNode,"
              "MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWriteNode,MaxDiskWriteTask,Comment")
#: the columns of sonar's captures (its src/slurmjobs.rs SACCT_FIELDS), in order
SONAR_COLUMNS = ("JobID,JobIDRaw,User,Account,State,Start,End,AveCPU,AveDiskRead,AveDiskWrite,AveRSS,AveVMSize,"
                 "ElapsedRaw,ExitCode,Layout,MaxRSS,MaxVMSize,MinCPU,ReqCPUS,ReqMem,ReqNodes,Reservation,Submit,"
                 "Suspended,SystemCPU,TimelimitRaw,UserCPU,NodeList,Partition,AllocTRES,Priority,JobName")


def hb_history(delimiter: str = "\u2603") -> str:
    """The capture with its header; ``delimiter`` replaces the source's (no field holds ``|``)."""
    rows = (REAL / "hb-jobinfo/sacct.txt").read_text()
    assert "|" not in rows
    return delimiter.join(HB_COLUMNS.split(",")) + "\n" + rows.replace("\u2603", delimiter)


def sonar_history(name: str) -> str:
    return "|".join(SONAR_COLUMNS.split(",")) + "\n" + (REAL / name).read_text()


def test_hb_jobinfo_history():
    h = parse_history(hb_history(), "hb", delimiter="\u2603", strict=True)
    got = {r.job_id: (r.user, r.gpus, r.gpu_type, r.nodes, r.elapsed_s) for r in h.rows}
    assert got == {
        "7946767": ("user420", 1, "v100", ("v100gpu13",), 11 * 3600 + 23 * 60 + 23),
        "8069225": ("user28", 1, "v100", ("v100gpu26",), 8 * 3600 + 45 * 60 + 49),
        "7971484": ("user46", 4, "a100", ("a100gpu2", "a100gpu4"), 3 * 60 + 53),
        "7961058": ("user4981", 2, "a100", ("a100gpu2",), 40 * 60 + 15),
    }
    assert [(r.job_id, r.gpu_type, r.state) for r in h.failed] == [("7939708", "a100", "FAILED")]
    assert h.skipped["job step"] == 142 and h.skipped["state RUNNING"] == 3
    assert not h.junk


@pytest.mark.parametrize("name, completed, failed", [
    # Fox, 2025: 43 completed 1-GPU runs on gpu-10 with untyped TRES; one FAILED run on rtx30
    ("sonar/fox-2025/sacct_output.txt", 43, [("rtx30", 1)]),
    # Fox, 2024: 12 completed 1-GPU runs on gpu-10 (the MIG node: untyped TRES)
    ("sonar/fox-2024/sacct-output.txt", 12, []),
])
def test_sonar_history(name, completed, failed):
    h = parse_history(sonar_history(name), name, strict=True)
    assert len(h.rows) == completed
    assert {(r.gpus, r.gpu_type, r.nodes) for r in h.rows} == {(1, None, ("gpu-10",))}
    assert [(r.gpu_type, r.gpus) for r in h.failed] == failed
    assert not h.junk


def test_elapsed_forms_of_real_captures():
    assert parse_elapsed("10-00:00:27") == 10 * 86400 + 27
    assert parse_elapsed("23:08.358") == pytest.approx(23 * 60 + 8.358)
    assert parse_elapsed("00:00.001") == pytest.approx(0.001)


# --- speeds learn, end to end --------------------------------------------------------------------

def test_speeds_learn_on_a_real_history(tmp_path):
    f = tmp_path / "hb.txt"
    f.write_text(hb_history("|"))
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs_used"] == 4
    groups = {(g["user"], g["job_name"], g["gpus"]): g for g in doc["groups"]}
    assert set(groups) == {("user420", "LFWW", 1), ("user28", "2XMT0KE9BZMB5", 1), ("user46", "86I", 4),
                           ("user4981", "7U7ND", 2), ("user422", "XI1KTV7", 1)}
    # issue 39: user422's job failed 4 s after its start on an A100 and never ran elsewhere: the
    # group is marked off the A100 (the rule cannot tell a broken script from a type it cannot
    # use before its next job fails at its start on V100 too, which lifts the mark)
    assert groups[("user422", "XI1KTV7", 1)]["fails_on"] == {"a100": 1}
    assert groups[("user422", "XI1KTV7", 1)]["speed"]["a100"] == 0
    # each group ran on one type: that type learned, the other from the priors (V100 below A100)
    assert groups[("user420", "LFWW", 1)]["sources"] == {"v100": "learned", "a100": "prior"}
    assert groups[("user420", "LFWW", 1)]["speed"]["a100"] == 1.0
    assert 0 < groups[("user420", "LFWW", 1)]["speed"]["v100"] < 1.0


def test_speeds_learn_reads_the_capture_as_it_is(tmp_path):
    """The source's own delimiter (``--delimiter=\u2603``), lower-case column names: no rewriting."""
    f = tmp_path / "hb-raw.txt"
    text = hb_history()
    header, _, rows = text.partition("\n")
    f.write_text(header.lower() + "\n" + rows)
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["runs_used"] == 4


def test_speeds_learn_without_node_types_says_so_and_with_them_learns(tmp_path, capsys):
    f = tmp_path / "fox.txt"
    f.write_text(sonar_history("sonar/fox-2025/sacct_output.txt"))
    assert main(["speeds", "learn", "--sacct-file", str(f)]) == 2
    err = capsys.readouterr().err
    assert "no completed GPU run with a known GPU type" in err and "Traceback" not in err
    res = CliRunner().invoke(cli, ["speeds", "learn", "--sacct-file", str(f), "--node-type", "gpu-10=mig3g",
                                   "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs_used"] == 43
    assert any("mig3g" in w for w in doc["warnings"]) and any("rtx30" in w for w in doc["warnings"])


def test_learner_on_every_real_history_never_crashes():
    for text, delim in ((hb_history(), "\u2603"), (sonar_history("sonar/fox-2025/sacct_output.txt"), "|"),
                        (sonar_history("sonar/fox-2024/sacct-output.txt"), "|")):
        h = parse_history(text, "real", delimiter=delim)
        runs, _ = runs_from_history(h.rows, {"gpu-10": "nvidia_a100_3g.40gb"})
        model = learn(runs, failures=failures_from_history(h.failed, {}))
        assert all(0 <= v <= 1 for g in model.groups.values() for v in g.speed.values())


# --- the normaliser over every type of the corpus ------------------------------------------------

#: every GPU type the corpus holds -> (model, fraction of it); None: not a known model
TYPES = {
    "NVlink_A100_40GB": ("a100", 1.0),  # NVLink: an SXM board (not the H100 NVL)
    "NVlink_A800_80GB": ("a100_80g", 1.0),  # an A800 computes as an A100
    "h100": ("h100", 1.0),
    "mi210": ("mi210", 1.0),
    "model_a": (None, 1.0),
    "model_b": (None, 1.0),
    "nvidia_a100_1g.5gb": ("a100", 1 / 7),
    "nvidia_a100_80gb": ("a100_80g", 1.0),
    "nvidia_h100_80gb": ("h100", 1.0),
    "nvidia_gb200": ("b200", 1.0),
    "rtxa5000": ("rtx_a5000", 1.0),
    "tesla_v100-sxm3-32gb": ("v100", 1.0),
    "gpu": (None, 1.0),  # untyped
    "p100": ("p100", 1.0),
    "tesla": (None, 1.0),
    "volta": (None, 1.0),
    "a100": ("a100", 1.0),
    "a100_80": ("a100_80g", 1.0),
    "a40": ("a40", 1.0),
    "l40s": ("l40s", 1.0),
    "rtx30": (None, 1.0),  # "RTX 30-series" names no card
    "v100": ("v100", 1.0),
    "v100-32g": ("v100", 1.0),
    "v100-quad": ("v100", 1.0),
}


def corpus_types() -> set[str]:
    out = {k for text in GRES for k in gpus_by_type(text)}
    return out | {t for s in tres_strings() if (t := gpus_in_tres_map(parse_tres_map(s))[1])} | {
        k.split(":", 1)[1] for s in tres_strings() for k in parse_tres_map(s) if k.startswith("gres/gpu:")}


def test_the_type_table_covers_the_corpus_exactly():
    assert corpus_types() == set(TYPES)


@pytest.mark.parametrize("raw", sorted(TYPES))
def test_normaliser_on_real_type_names(raw):
    tm = pr.normalise(raw)
    assert (tm.model, tm.fraction) == (TYPES[raw][0], pytest.approx(TYPES[raw][1]))


@pytest.mark.parametrize("gpu_types", [
    ["a100", "rtx30"], ["h100", "rtxa5000", "mi210"], ["a100", "a100_80", "a40", "l40s", "rtx30"],
    ["NVlink_A100_40GB", "NVlink_A800_80GB", "tesla_v100-sxm3-32gb"], ["model_a", "model_b"],
])
def test_priors_of_real_clusters(gpu_types):
    p = pr.prior_speeds(gpu_types)
    known = [k for k in gpu_types if k not in p.unknown]
    assert all(0 < v <= 1 for v in p.speed.values())
    if known:
        assert max(p.speed[k] for k in known) == 1.0
        assert all(p.speed[u] < min(p.speed[k] for k in known) for u in p.unknown)
    else:
        assert set(p.speed.values()) == {1.0} and set(p.unknown) == set(gpu_types)
