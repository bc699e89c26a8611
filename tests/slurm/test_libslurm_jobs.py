"""The direct read of libslurm's job records (:mod:`slurm_fair.slurm.libslurm_jobs`) without Slurm.

A job record is laid out from a header written here (members in an order of their own, types
of every size, pointers), filled through ctypes with Slurm's special values, and unpacked: each
value must be what pyslurm gives for it (its ``uint.pyx``/``cstr.pyx`` rules, worked out by hand
below). A header the parser cannot trust is refused, never guessed. The real records are compared
with pyslurm's own reads on both testbeds by ``test_backends_agree.py``.
"""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_fair.slurm import libslurm_jobs as lj
from slurm_fair.slurm import pyslurm_port

NO_VAL, INFINITE, NO_VAL16 = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFE

HEADER = """
/* a comment { with braces } */
typedef struct job_info_msg {
	time_t last_backfill;	/* time of late backfill run */
	time_t last_update;
	uint32_t record_count;
	slurm_job_info_t *job_array;
} job_info_msg_t;

typedef struct job_info {
	char *account;
	uint8_t power_flags;
	char *admin_comment;
	uint32_t array_job_id;
	uint32_t array_task_id;
	char *array_task_str;
	double billable_tres;
	char *comment;
	uint16_t cpus_per_task;
	char *dependency;
	char *exc_nodes;
	char *features;
	char **gres_detail_str;
	uint32_t het_job_id;
	uint32_t het_job_offset;
	uint32_t job_id;
	job_resources_t *job_resrcs;
	uint32_t job_state;
	uint32_t max_nodes;
	char *name;
	char *nodes;
	uint32_t nice;
	uint16_t ntasks_per_node;
	uint32_t num_cpus;
	uint32_t num_nodes;
	uint32_t num_tasks;
	char *partition;
	uint64_t pn_min_memory;
	uint16_t pn_min_cpus;
	uint32_t priority;
	char *qos;
	char *req_nodes;
	uint16_t requeue;
	char *resv_name;
	uint32_t site_factor;
	time_t start_time;
	char *state_desc;
	uint16_t state_reason;
	time_t submit_time;
	uint32_t time_limit;
	char *tres_alloc_str;
	char *tres_per_job;
	char *tres_per_node;
	char *tres_per_task;
	uint32_t user_id;
	int32_t *node_inx;
} slurm_job_info_t;
"""


class _Lib:
    """libslurm's two name lookups the conversion makes."""

    def __init__(self) -> None:
        self.reason = ctypes.create_string_buffer(b"Resources")
        self.asked: list[int] = []

    def slurm_job_state_string(self, state: int) -> bytes:
        self.asked.append(state)
        return {0: b"PENDING", 1: b"RUNNING"}[state]

    def reason_name(self, code: int) -> int:
        return ctypes.addressof(self.reason)


def _reader() -> tuple[lj.JobFieldReader, type, _Lib]:
    types = lj.record_types(HEADER)
    assert not isinstance(types, str), types
    job_type, msg_type = types
    lib = _Lib()
    return lj.JobFieldReader(lib, job_type, msg_type, lib.reason_name), job_type, lib


def test_the_parser_lays_out_every_member_with_its_c_size_and_alignment():
    job_type, msg_type = lj.record_types(HEADER)  # type: ignore[misc]
    assert msg_type.last_update.offset == 8 and msg_type.record_count.offset == 16
    assert msg_type.job_array.offset == 24 and ctypes.sizeof(msg_type) == 32
    assert job_type.account.offset == 0 and job_type.power_flags.offset == 8
    assert job_type.admin_comment.offset == 16  # after a uint8_t, the pointer's alignment
    assert job_type.billable_tres.offset % 8 == 0 and job_type.pn_min_memory.offset % 8 == 0
    assert job_type.node_inx.offset == ctypes.sizeof(job_type) - 8


@pytest.mark.parametrize("member", [
    "struct { int a; } nested;", "char name[32];", "uint16_t a, b;", "unsigned int bits : 3;",
    "#ifdef X\n\tuint32_t x;\n#endif", "some_enum_t kind;", "void (*callback)(int);",
])
def test_a_member_the_parser_cannot_size_refuses_the_layout(member):
    header = HEADER.replace("\tuint32_t site_factor;", "\t" + member)
    assert isinstance(lj.record_types(header), str)


def test_a_header_without_a_member_read_refuses_the_layout():
    assert "tres_per_task" in str(lj.record_types(HEADER.replace("\tchar *tres_per_task;\n", "")))


def test_records_unpack_to_pyslurms_values_special_values_included():
    reader, job_type, lib = _reader()
    keep: list[ctypes.Array] = []

    def s(text: str) -> int:
        buf = ctypes.create_string_buffer(text.encode())
        keep.append(buf)
        return ctypes.addressof(buf)

    a = job_type(job_id=7, job_state=0, account=s("physics"), partition=s("v100,p100"), name=s("train"),
                 comment=s("fair:class=a3c"), user_id=0, priority=0, nice=0x80000000 - 5, requeue=1,
                 pn_min_cpus=0, max_nodes=0, num_tasks=NO_VAL, array_job_id=6, array_task_id=NO_VAL,
                 array_task_str=s("1-5,7%2"), het_job_id=0, het_job_offset=NO_VAL, num_nodes=2,
                 ntasks_per_node=NO_VAL16, num_cpus=0, submit_time=1700000000, start_time=0,
                 features=s("v100,nvlink"), tres_per_job=s("gres:gpu:2"), dependency=s(""),
                 time_limit=NO_VAL, cpus_per_task=NO_VAL16, pn_min_memory=(1 << 63) | 500, state_reason=1)
    b = job_type(job_id=8, job_state=1, state_desc=s("a reason with spaces"), nodes=s("v100-[1-2]"),
                 user_id=1000, priority=INFINITE, nice=NO_VAL, requeue=NO_VAL16, pn_min_cpus=4, max_nodes=INFINITE,
                 num_tasks=3, het_job_id=9, het_job_offset=1, ntasks_per_node=2, num_cpus=8, start_time=1700000100,
                 tres_alloc_str=s("cpu=8,gres/gpu:v100=2"), tres_per_node=s("gres:gpu:v100:1"),
                 time_limit=INFINITE, cpus_per_task=2, pn_min_memory=2000)
    c = job_type(job_id=10, time_limit=45, pn_min_memory=0)
    data = b"".join(bytes(r) for r in (a, b, c))
    attrs = pyslurm_port._FAST_ATTRS
    values, extra = reader._convert(data, attrs)
    got = [dict(zip(attrs, v)) for v in values]
    assert got[0] == {
        "id": 7, "state": "PENDING", "state_reason": "Resources", "comment": "fair:class=a3c",
        "required_nodes": None, "excluded_nodes": None, "allocated_nodes": None, "name": "train", "user_id": 0,
        "account": "physics", "partition": "v100,p100", "qos": None, "submit_time": 1700000000,
        "start_time": None, "priority": 0, "nice": -5, "is_requeueable": True, "min_cpus_per_node": None,
        "max_nodes": None, "admin_comment": None, "reservation": None, "constraints": ["v100", "nvlink"],
        "ntasks": 1, "array_id": 6, "array_tasks_waiting": "1-5,7", "array_task_id": None,
        "heterogeneous_id": None, "heterogeneous_offset": NO_VAL, "num_nodes": 2, "ntasks_per_node": None,
        "cpus": 1,
    }
    assert {k: got[1][k] for k in ("state", "state_reason", "allocated_nodes", "user_id", "priority", "nice",
                                   "is_requeueable", "min_cpus_per_node", "max_nodes", "ntasks",
                                   "heterogeneous_id", "heterogeneous_offset", "ntasks_per_node", "cpus",
                                   "constraints", "start_time")} == {
        "state": "RUNNING", "state_reason": "a reason with spaces", "allocated_nodes": "v100-[1-2]",
        "user_id": 1000, "priority": "UNLIMITED", "nice": None, "is_requeueable": False, "min_cpus_per_node": 4,
        "max_nodes": "UNLIMITED", "ntasks": 3, "heterogeneous_id": 9, "heterogeneous_offset": 1,
        "ntasks_per_node": 2, "cpus": 8, "constraints": [], "start_time": 1700000100,
    }
    # the legacy read's forms: NULL strings None ("" stays ""), the time limit's words, N/A, the
    # memory without its per-CPU bit, the state's name
    assert extra == {
        7: ("gres:gpu:2", None, None, None, "", "Partition_Limit", "N/A", 500, "PENDING"),
        8: (None, "gres:gpu:v100:1", None, "cpu=8,gres/gpu:v100=2", None, "UNLIMITED", 2, 2000, "RUNNING"),
        10: (None, None, None, None, None, 45, 0, 0, "PENDING"),
    }
    assert sorted(set(lib.asked)) == [0, 1] and len(lib.asked) == 2  # each state's name asked once


def test_the_header_version_and_a_missing_header_are_reasons_not_errors(tmp_path):
    (tmp_path / "slurm").mkdir()
    assert lj.open_reader("22.5.3", pyslurm_port.major_minor, str(tmp_path))[0] is None
    (tmp_path / "slurm" / "slurm.h").write_text(HEADER)
    (tmp_path / "slurm" / "slurm_version.h").write_text("#define SLURM_VERSION_NUMBER 0x180b05\n")
    assert lj.header_version(tmp_path) == (24, 11)
    reader, why = lj.open_reader("22.5.3", pyslurm_port.major_minor, str(tmp_path))
    assert reader is None and "24, 11" in why


class _Slurmctld:
    """``slurm_load_jobs`` as slurmctld answers it (``_slurm_rpc_dump_jobs``): with an update
    time, ``SLURM_NO_CHANGE_IN_DATA`` when ``last_job_update`` is not past that time less one
    second; else every record, stamped with the pack time (its clock, whole seconds)."""

    def __init__(self, job_type: type, msg_type: type) -> None:
        self.job_type, self.msg_type = job_type, msg_type
        self.now = 1_700_000_000
        self.last_job_update = self.now - 10  # the queue settled before the first read
        self.nice = {1: 0, 2: 0}
        self.asked: list[int] = []
        self.fail = 0
        self._keep: list[object] = []
        self.conf_time = self.now - 100
        self.conf_asked: list[int] = []

    def restart(self, keep_jobs: bool) -> None:
        """slurmctld started again: a new configuration time; without its jobs (a clean start)
        no job is created, so ``last_job_update`` stays 0."""
        self.conf_time = self.now
        if not keep_jobs:
            self.nice = {}
        self.last_job_update = self.now if self.nice else 0

    def slurm_load_ctl_conf(self, update_time: int, pp: object) -> int:
        self.conf_asked.append(update_time)
        if update_time and update_time - 1 >= self.conf_time:
            ctypes.set_errno(lj.NO_CHANGE)
            return -1
        conf = ctypes.c_long(self.now)  # slurm_conf_t's first member: the pack time (_fill_ctld_conf)
        self._keep.append(conf)
        pp._obj.value = ctypes.addressof(conf)  # type: ignore[attr-defined]
        return 0

    def slurm_free_ctl_conf(self, ptr: object) -> None:
        pass

    def change(self, job_id: int, nice: int) -> None:
        self.nice[job_id] = nice
        self.last_job_update = self.now

    def slurm_load_jobs(self, update_time: int, pp: object, flags: int) -> int:
        self.asked.append(update_time)
        if self.fail:
            ctypes.set_errno(self.fail)
            return -1
        if update_time and update_time - 1 >= self.last_job_update:
            ctypes.set_errno(lj.NO_CHANGE)
            return -1
        if not self.nice:
            msg = self.msg_type(last_update=self.now, record_count=0, job_array=None)
            self._keep.append(msg)
            pp._obj.value = ctypes.addressof(msg)  # type: ignore[attr-defined]
            return 0
        records = (self.job_type * len(self.nice))(*(self.job_type(job_id=i, nice=0x80000000 + n, time_limit=30)
                                                     for i, n in sorted(self.nice.items())))
        msg = self.msg_type(last_update=self.now, record_count=len(self.nice), job_array=ctypes.addressof(records))
        self._keep += [records, msg]
        pp._obj.value = ctypes.addressof(msg)  # type: ignore[attr-defined]
        return 0

    def slurm_free_job_info_msg(self, ptr: object) -> None:
        pass

    def slurm_strerror(self, errno: int) -> bytes:
        return b"Socket timed out on send/recv operation"

    def slurm_job_state_string(self, state: int) -> bytes:
        return b"PENDING"


def _nochange_reader() -> tuple[lj.JobFieldReader, _Slurmctld]:
    types = lj.record_types(HEADER)
    assert not isinstance(types, str), types
    ctld = _Slurmctld(*types)
    return lj.JobFieldReader(ctld, *types, lambda code: 0), ctld


def _nices(read) -> dict[int, int]:
    return {v[0]: v[1] for v in read[0]}


def test_no_change_gives_the_last_read_again_and_a_change_within_its_second_is_read():
    reader, ctld = _nochange_reader()
    attrs = ("id", "nice")
    first = reader.read(attrs)
    assert ctld.asked == [0] and not reader.unchanged and _nices(first) == {1: 0, 2: 0}
    ctld.now += 1  # a second later, nothing changed: the same objects, nothing converted
    again = reader.read(attrs)
    assert ctld.asked[-1] == 1_700_000_000 and reader.unchanged and again is first
    assert (reader.full_reads, reader.unchanged_reads) == (1, 1)
    reader.read(attrs)
    ctld.change(2, 5)  # in the second of the last pack (the next read asks with that pack time)
    changed = reader.read(attrs)
    assert not reader.unchanged and _nices(changed) == {1: 0, 2: 5}
    assert reader.read(attrs) is not changed  # the same second again: read in full, slurmctld's margin
    ctld.now += 2
    last = reader.read(attrs)
    assert reader.read(attrs) is last and reader.unchanged
    # other attributes, or forget(): every record asked
    reader.read(("id", "priority"))
    assert ctld.asked[-1] == 0
    reader.forget()
    reader.read(("id", "priority"))
    assert ctld.asked[-1] == 0


def test_a_failed_read_is_an_error_and_the_last_reply_stays_the_one_compared_with():
    reader, ctld = _nochange_reader()
    reader.read(("id",))
    ctld.fail = 5004
    with pytest.raises(lj.LibslurmError, match="Socket timed out"):
        reader.read(("id",))
    ctld.fail = 0
    ctld.now += 1
    reader.read(("id",))  # the last reply is still the one to compare with: no change here
    assert reader.unchanged


def test_a_slurmctld_started_again_without_its_jobs_is_read_in_full():
    reader, ctld = _nochange_reader()
    assert len(reader.read(("id",))[0]) == 2 and reader.conf_time == ctld.now
    ctld.now += 5
    reader.read(("id",))
    assert reader.unchanged and ctld.conf_asked[-1] == ctld.now - 5  # the small "no change" RPC
    ctld.now += 60
    ctld.restart(keep_jobs=False)  # last_job_update 0: its job answer alone says "no change"
    ctld.now += 5
    assert reader.read(("id",)) == ([], {}) and not reader.unchanged
    assert reader.conf_time == ctld.now
    ctld.restart(keep_jobs=False)  # again, in the very second of the last configuration reply
    ctld.change(1, 3)
    ctld.last_job_update = 0
    assert [v[0] for v in reader.read(("id",))[0]] == [1]


@given(st.lists(st.sampled_from(["tick", "change", "read", "restart", "clean start"]), max_size=40))
def test_every_read_gives_the_jobs_as_slurmctld_holds_them_then(steps):
    """Whatever the order of ticks of slurmctld's clock, changes, restarts (with or without its
    jobs) and reads: a read never gives a job as it was before a change, nor a job slurmctld
    no longer holds (the answer is trusted only where slurmctld gives it)."""
    reader, ctld = _nochange_reader()
    for n, step in enumerate(steps):
        if step == "tick":
            ctld.now += 1
        elif step == "change":
            ctld.change(1 + n % 2, n)
        elif step in ("restart", "clean start"):
            ctld.restart(keep_jobs=step == "restart")
        else:
            assert _nices(reader.read(("id", "nice"))) == ctld.nice
