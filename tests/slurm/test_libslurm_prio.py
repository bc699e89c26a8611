"""The site factors from libslurm's priority-factors RPC (:mod:`slurm_fair.slurm.libslurm_prio`)
without Slurm.

The layouts are taken from headers: the installed 22.05 ``slurm.h`` (the factors inline in the
object, the RPC's five parameters) and one written here as 24.11 declares it (the factors behind a
pointer, two parameters). Objects are laid out from them through ctypes with Slurm's stored values
(the site factor plus ``NICE_OFFSET``), served by a stand-in libslurm list, and read: each value
must be what sprio's ``%S`` prints (the stored value less the offset; 0 for a job whose priority
was set by hand). A header that cannot be trusted is refused, never guessed; a failing RPC falls
back to sprio. The real RPC is compared with sprio on both testbeds by
``test_libslurm_prio_real.py`` and inside the busy cluster of ``test_backends_agree.py``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from slurm_fair.slurm import libslurm_prio as lp
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.libslurm_jobs import LibslurmError
from slurm_fair.slurm.pyslurm_port import PyslurmPort

OFFSET = 0x80000000
INSTALLED = Path("/usr/include/slurm/slurm.h")

HEADER_24_11 = """
typedef struct priority_factors {
	uint32_t nice;
	double	 priority_age;
	double	 priority_assoc;
	double	 priority_fs;
	double	 priority_js;
	double	 priority_part;
	double	 priority_qos;
	uint32_t priority_site;
	double   *priority_tres;/* tres priorities with weights applied. */
	uint32_t  tres_cnt;
	char    **tres_names;
	double   *tres_weights;
} priority_factors_t;

typedef struct priority_factors_object {
	char *account;
	char *cluster_name;	/* Cluster name ONLY set in federation */
	double direct_prio; /* Manually set priority. If it is set prio_factors will be NULL */
	uint32_t job_id;
	char *partition;
	priority_factors_t *prio_factors;
	char *qos;
	uint32_t user_id;
} priority_factors_object_t;

typedef struct priority_factors_response_msg {
	list_t *priority_factors_list;	/* priority_factors_object_t list */
} priority_factors_response_msg_t;

extern int slurm_load_job_prio(priority_factors_response_msg_t **factors_resp,
			uint16_t show_flags);
"""

HEADER_22_05 = """
typedef struct priority_factors_object {
	char *cluster_name;
	uint32_t job_id;
	char *partition;
	uint32_t user_id;
	double	 priority_age;
	double	 priority_assoc;
	double	 priority_fs;
	double	 priority_js;
	double	 priority_part;
	double	 priority_qos;
	double   direct_prio;   /* manually set priority */
	uint32_t priority_site;
	double   *priority_tres;
	uint32_t  tres_cnt;
	char    **tres_names;
	double   *tres_weights;
	uint32_t nice;
} priority_factors_object_t;

typedef struct priority_factors_response_msg {
	List	 priority_factors_list;	/* priority_factors_object_t list */
} priority_factors_response_msg_t;

/*
 * slurm_load_job_prio - issue RPC (a comment that names slurm_load_job_prio(a, b) too)
 */
extern int slurm_load_job_prio(priority_factors_response_msg_t **factors_resp,
			List job_id_list, char *partitions,
			List uid_list, uint16_t show_flags);
"""


class _Lib:
    """libslurm as the reader calls it: the RPC answers ``objects`` (their addresses) in a list
    whose iterator and reply must be released; ``rc`` not 0 fails the RPC."""

    def __init__(self, objects: list, rc: int = 0, arity: int = 5) -> None:
        self.objects, self.rc, self.arity = objects, rc, arity
        self.listed = ctypes.c_int(7)  # the list: any address the iterator is made from
        self.reply = ctypes.c_void_p(ctypes.addressof(self.listed))  # the reply: the list first
        self.calls: list[str] = []

    def slurm_load_job_prio(self, resp, *args):
        assert len(args) == self.arity - 1 and args[-1] == 0  # no filter, show_flags 0
        if self.arity == 5:
            assert args[:3] == (None, None, None)
        if self.rc:
            ctypes.set_errno(2)
            return self.rc
        resp._obj.value = ctypes.addressof(self.reply)
        return 0

    def slurm_list_iterator_create(self, listed):
        assert listed == ctypes.addressof(self.listed)
        self.calls.append("iterator")
        self._items = iter(ctypes.addressof(o) for o in self.objects)
        return 99

    def slurm_list_next(self, it):
        assert it == 99
        return next(self._items, None)

    def slurm_list_iterator_destroy(self, it):
        self.calls.append("destroyed")

    def slurm_free_priority_factors_response_msg(self, resp):
        self.calls.append("freed")

    def slurm_strerror(self, errno):
        return b"Unable to contact slurm controller"


def test_the_rpc_prototype_is_counted_from_the_header():
    assert lp.prototype_arity(HEADER_22_05, "slurm_load_job_prio") == 5
    assert lp.prototype_arity(HEADER_24_11, "slurm_load_job_prio") == 2
    assert lp.prototype_arity("extern int f(void);", "f") == 0
    assert lp.prototype_arity(HEADER_22_05 + HEADER_24_11, "slurm_load_job_prio") is None  # twice: refused
    assert lp.prototype_arity("", "slurm_load_job_prio") is None


@pytest.mark.skipif(not INSTALLED.exists(), reason="no slurm.h installed (libslurm-dev)")
def test_the_installed_header_gives_an_inline_layout():
    layout = lp.prio_layout(INSTALLED.read_text(errors="replace"))
    assert isinstance(layout, lp.PrioLayout)
    assert layout.factors is None and layout.arity in (2, 5)


def test_the_22_05_layout_reads_sprios_site_factor():
    layout = lp.prio_layout(HEADER_22_05)
    assert isinstance(layout, lp.PrioLayout) and layout.factors is None and layout.arity == 5
    objects = []
    for job_id, site, direct in ((11, -5, 0.0), (12, 7, 0.0), (13, 0, 0.0), (14, 300, 4242.0), (15, -(2 ** 31), 0.0)):
        o = layout.obj()
        o.job_id, o.priority_site, o.direct_prio, o.nice = job_id, site + OFFSET, direct, OFFSET
        o.priority_age = 123.0
        objects.append(o)
    lib = _Lib(objects)
    got = lp.SiteFactorReader(lib, layout).read()
    # sprio -o %S: the stored value less the offset; 0 where the priority was set by hand
    assert got == {"11": -5, "12": 7, "13": 0, "14": 0, "15": -(2 ** 31)}
    assert lib.calls == ["iterator", "destroyed", "freed"]


def test_the_24_11_layout_follows_the_factors_pointer():
    layout = lp.prio_layout(HEADER_24_11)
    assert isinstance(layout, lp.PrioLayout) and layout.factors is not None and layout.arity == 2
    factors = [layout.factors() for _ in range(2)]
    factors[0].priority_site, factors[1].priority_site = OFFSET - 300, OFFSET + 12
    objects = []
    for job_id, f, direct in ((21, factors[0], 0.0), (22, factors[1], 0.0), (23, None, 900.0), (24, None, 0.0)):
        o = layout.obj()
        o.job_id, o.direct_prio = job_id, direct
        o.prio_factors = ctypes.addressof(f) if f is not None else None
        objects.append(o)
    lib = _Lib(objects, arity=2)
    assert lp.SiteFactorReader(lib, layout).read() == {"21": -300, "22": 12, "23": 0, "24": 0}
    assert lib.calls == ["iterator", "destroyed", "freed"]


def test_a_job_listed_once_per_partition_has_one_factor():
    layout = lp.prio_layout(HEADER_22_05)
    assert isinstance(layout, lp.PrioLayout)
    objects = []
    for _ in range(2):
        o = layout.obj()
        o.job_id, o.priority_site = 31, OFFSET + 4
        objects.append(o)
    assert lp.SiteFactorReader(_Lib(objects), layout).read() == {"31": 4}


def test_an_empty_queue_and_a_failed_rpc():
    layout = lp.prio_layout(HEADER_22_05)
    assert isinstance(layout, lp.PrioLayout)
    lib = _Lib([])
    assert lp.SiteFactorReader(lib, layout).read() == {}
    assert lib.calls == ["iterator", "destroyed", "freed"]
    failing = _Lib([], rc=-1)
    with pytest.raises(LibslurmError, match="Unable to contact"):
        lp.SiteFactorReader(failing, layout).read()
    assert failing.calls == []  # nothing to free: no reply


@pytest.mark.parametrize("change, why", [
    (("uint32_t priority_site;", "uint32_t priority_site[2];"), "not plain"),
    (("\tuint32_t priority_site;\n", ""), "no priority_site"),
    (("\tuint32_t job_id;\n", ""), "lacks job_id"),
    (("uint16_t show_flags);", "uint16_t show_flags, int more);"), "parameters"),
    (("List\t priority_factors_list;", "int count;\n\tList priority_factors_list;"), "not a list first"),
    (("char *partition;", "#ifdef X\n\tchar *partition;\n#endif"), "not plain"),
])
def test_a_header_that_cannot_be_trusted_is_refused(change, why):
    old, new = change
    assert old in HEADER_22_05
    got = lp.prio_layout(HEADER_22_05.replace(old, new))
    assert isinstance(got, str) and why in got


def test_a_24_11_header_without_the_factors_struct_is_refused():
    start = HEADER_24_11.index("typedef struct priority_factors {")
    end = HEADER_24_11.index("} priority_factors_t;") + len("} priority_factors_t;")
    got = lp.prio_layout(HEADER_24_11[:start] + HEADER_24_11[end:])
    assert isinstance(got, str) and "priority_site" in got


def test_a_header_of_another_slurm_is_refused(tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "slurm.h").write_text(HEADER_22_05)
    (tmp_path / "slurm" / "slurm_version.h").write_text("#define SLURM_VERSION_NUMBER 0x180b00\n")  # 24.11
    reader, why = lp.open_prio_reader("22.5.3", lambda v: (22, 5), str(tmp_path))
    assert reader is None and "24, 11" in why
    reader, why = lp.open_prio_reader("22.5.3", lambda v: (22, 5), str(tmp_path / "none"))
    assert reader is None and "no slurm.h" in why


class _Runner:
    """The command runner: sprio's answer (``|`` the separator), every argv kept."""

    env: dict = {}
    retries = 0

    def __init__(self, text: str) -> None:
        self.text, self.argv = text, []

    def run(self, argv, job_id=None):
        self.argv.append(argv)
        return self.text


class _Reader:
    def __init__(self, answer) -> None:
        self.answer = answer

    def read(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class _Module:
    __version__ = "22.5.3"
    RPCError = RuntimeError


def _port(reader, sprio_text: str):
    runner = _Runner(sprio_text)
    port = PyslurmPort(SlurmCli(runner=runner, separator=lambda: "|"), module=_Module(), conf="/nonexistent")
    port._prio = [reader]
    return port, runner


def _sprio_line(job: str, site: int) -> str:
    return "|".join([job, "gpu", "100", "0", "0", "0", "0", "0", str(site), "0", ""])


def test_the_port_takes_the_rpc_and_falls_back_to_sprio():
    port, runner = _port(_Reader({"5": -3}), _sprio_line("5", 9))
    assert port._site_factors() == {"5": -3}
    assert runner.argv == []  # no sprio
    failing = LibslurmError("Unable to contact slurm controller (connect failure)", 1)
    port, runner = _port(_Reader(failing), _sprio_line("5", 9))
    assert port._site_factors() == {"5": 9}
    assert runner.argv and runner.argv[0][0] == "sprio"
    port, runner = _port(None, _sprio_line("6", -1))  # no reader here: sprio
    assert port._site_factors() == {"6": -1}


class _JobReader:
    """The direct job read: its answer, and whether the factors' RPC was in flight meanwhile."""

    def __init__(self, started) -> None:
        self.started = started
        self.overlapped = False

    def read(self, attrs):
        self.overlapped = self.started.wait(5)
        return [("values",)], {1: ("extra",)}


class _SlowReader:
    def __init__(self, started, answer) -> None:
        self.started, self.answer = started, answer

    def read(self):
        self.started.set()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_factors_are_read_in_flight_with_the_jobs_and_sprio_when_the_rpc_fails():
    import threading

    started = threading.Event()
    port, runner = _port(_SlowReader(started, {"7": 12}), _sprio_line("7", 3))
    jobs = _JobReader(started)
    values, extra, site = port._read_direct_with_site(jobs)
    assert jobs.overlapped  # the factors' RPC began while the job read ran
    assert (values, extra, site.result()) == ([("values",)], {1: ("extra",)}, {"7": 12})
    assert runner.argv == []
    started = threading.Event()
    port, runner = _port(_SlowReader(started, LibslurmError("Socket timed out on send/recv operation", 5)),
                         _sprio_line("7", 3))
    _, _, site = port._read_direct_with_site(_JobReader(started))
    assert site.result() == {"7": 3} and runner.argv[0][0] == "sprio"
