"""The job fields pyslurm lacks, read from libslurm's own job records (ctypes, no side process).

pyslurm's fast job read (``Jobs.load``) has no GPU request strings (``tres_per_job``,
``tres_per_task``, ``tres_alloc_str``) and its legacy read (``job().get()``) turns ~120 fields
of every job into Python objects: 0.4-0.9 s at 10,000 jobs, the bound of a snapshot
(docs/performance.md). The strings are plain members of libslurm's ``slurm_job_info_t``, so this
module calls ``slurm_load_jobs`` of the libslurm pyslurm has loaded (the same library, already
initialised for the cluster) and reads only :data:`FIELDS` of each record: one RPC, a few
attribute reads per job.

The record's layout is not guessed: it is read from the ``slurm.h`` of the Slurm it runs
against (libslurm-dev, needed to build pyslurm: ``$SLURM_INCLUDE_DIR`` or ``/usr/include``),
whose version must be pyslurm's major.minor, and every member must be of a type whose size is
known (scalars and pointers); anything else (a preprocessor line, a nested struct, an array) and
:func:`open_reader` returns None and the port reads these fields through pyslurm's legacy read as
before. Each value is what that legacy read gives for the field (``pyslurm.pyx``'s conversions:
NULL strings None, a time limit of NO_VAL ``Partition_Limit`` and INFINITE ``UNLIMITED``, a
``cpus_per_task`` of NO_VAL16 ``N/A``, the memory without its per-CPU bit, the state's name by libslurm's
``slurm_job_state_string``), so the job built from it is the same
(``tests/slurm/test_pyslurm_split.py`` compares both on the real testbed).
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
from pathlib import Path
from typing import Any, Callable

from .pyslurm_side import FIELDS  # the fields read, per job id, in this order (the state last)

#: C member types -> ctypes (every pointer is a c_void_p; the strings wanted are read as c_char_p)
_SCALARS: dict[str, Any] = {
    "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16, "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64, "int8_t": ctypes.c_int8, "int16_t": ctypes.c_int16, "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64, "time_t": ctypes.c_long, "double": ctypes.c_double, "bool": ctypes.c_bool,
    "int": ctypes.c_int, "char": ctypes.c_char,
}
#: struct codes of unsigned members and pointers by size (standard sizes, native order)
_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_MEMBER = re.compile(r"^(?:const\s+)?(?:struct\s+)?([A-Za-z_]\w*)\s*(\**)\s*([A-Za-z_]\w*)\s*;$")
#: slurm.h's NO_VAL16, NO_VAL, INFINITE (the legacy read's special values)
NO_VAL16 = 0xFFFE
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
#: slurm_load_jobs's show flag for every partition's jobs (slurm.h SHOW_ALL)
SHOW_ALL = 0x0001
#: slurm_errno.h's "no change in data" (an RPC with an update time answers so)
NO_CHANGE = 1900


class LibslurmError(RuntimeError):
    """slurm_load_jobs failed: libslurm's message (its ``errno`` too)."""

    def __init__(self, message: str, errno: int) -> None:
        super().__init__(message)
        self.errno = errno


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))


def struct_members(header: str, typedef: str, pointer_types: frozenset[str] = frozenset()) -> list[tuple[str, Any]] | None:
    """``typedef struct ... { members } <typedef>;`` of ``header`` as ctypes fields, or None
    when any member is not a plain scalar or pointer (the layout could not be trusted);
    ``pointer_types`` are type names slurm.h defines as pointers (22.05's ``List``)."""
    text = _strip_comments(header)
    m = re.search(r"typedef\s+struct\s+\w*\s*\{([^{}]*)\}\s*" + re.escape(typedef) + r"\s*;", text)
    if not m:
        return None
    fields: list[tuple[str, Any]] = []
    for decl in (d.strip() for d in m.group(1).split(";")):
        if not decl:
            continue
        if "#" in decl or "," in decl or "[" in decl or "(" in decl or ":" in decl:
            return None
        mm = _MEMBER.match(" ".join(decl.split()) + ";")
        if not mm:
            return None
        ctype, stars, name = mm.groups()
        if stars or ctype in pointer_types:
            fields.append((name, ctypes.c_void_p))
        elif ctype in _SCALARS:
            fields.append((name, _SCALARS[ctype]))
        else:
            return None
    return fields


def header_version(include_dir: Path) -> tuple[int, int] | None:
    """slurm_version.h's SLURM_VERSION_NUMBER as (major, minor)."""
    try:
        text = (include_dir / "slurm" / "slurm_version.h").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"#define\s+SLURM_VERSION_NUMBER\s+0x([0-9a-fA-F]+)", text)
    if not m:
        return None
    n = int(m.group(1), 16)
    return (n >> 16) & 0xFF, (n >> 8) & 0xFF


def loaded_libslurm() -> str | None:
    """The path of the libslurm this process has loaded (pyslurm's), from /proc/self/maps."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        if re.search(r"/libslurm(full)?[-.\w]*\.so", path):
            return path.strip()
    return None


#: pyslurm's ``Job`` attribute -> (the member of ``slurm_job_info_t`` it reads, how it converts
#: it: pyslurm 22.5.3's and 24.11.0's ``core/job/job.pyx`` and ``utils/uint.pyx``, ``cstr.pyx``)
ATTRS: dict[str, tuple[str, str]] = {
    "id": ("job_id", "int"), "state": ("job_state", "state"), "state_reason": ("state_reason", "reason"),
    "comment": ("comment", "str"), "required_nodes": ("req_nodes", "str"), "excluded_nodes": ("exc_nodes", "str"),
    "allocated_nodes": ("nodes", "str"), "name": ("name", "str"), "user_id": ("user_id", "u32z"),
    "account": ("account", "str"), "partition": ("partition", "str"), "qos": ("qos", "str"),
    "submit_time": ("submit_time", "time"), "start_time": ("start_time", "time"),
    "priority": ("priority", "u32z"), "nice": ("nice", "nice"), "is_requeueable": ("requeue", "bool16"),
    "min_cpus_per_node": ("pn_min_cpus", "u32"), "max_nodes": ("max_nodes", "u32"),
    "admin_comment": ("admin_comment", "str"), "reservation": ("resv_name", "str"),
    "constraints": ("features", "list"), "ntasks": ("num_tasks", "u32one"), "array_id": ("array_job_id", "u32"),
    "array_tasks_waiting": ("array_task_str", "tasks"), "array_task_id": ("array_task_id", "u32"),
    "heterogeneous_id": ("het_job_id", "het"), "heterogeneous_offset": ("het_job_offset", "het"),
    "num_nodes": ("num_nodes", "u32"), "ntasks_per_node": ("ntasks_per_node", "u16"), "cpus": ("num_cpus", "u32one"),
}
NICE_OFFSET = 0x80000000
#: the per-CPU bit of pn_min_memory, which the legacy read clears
MEM_PER_CPU = 0x8000000000000000
INFINITE16 = 0xFFFF
UNLIMITED = "UNLIMITED"
_POINTER_KINDS = frozenset(("str", "list", "tasks"))
#: the conversions written out in place (a call per field is most of the cost at 10,000 jobs);
#: each is the function of the same name below
_INLINE = {
    "int": "{x}", "state": "state({x})",
    "u32": "(None if {x} == NO_VAL or {x} == 0 else UNLIMITED if {x} == INFINITE else {x})",
    "u32z": "(None if {x} == NO_VAL else UNLIMITED if {x} == INFINITE else {x})",
    "u32one": "(1 if {x} == NO_VAL or {x} == 0 else UNLIMITED if {x} == INFINITE else {x})",
    "het": "(None if {x} == 0 else UNLIMITED if {x} == INFINITE else {x})",
    "u16": "(None if {x} == NO_VAL16 or {x} == 0 else UNLIMITED if {x} == INFINITE16 else {x})",
    "bool16": "(not (not {x} or {x} == NO_VAL16))",
    "time": "(None if {x} == NO_VAL or {x} == 0 or {x} == INFINITE else {x})",
    "nice": "(None if {x} == NO_VAL else {x} - NICE_OFFSET)",
}


def _u32(v: int) -> Any:
    return None if v == NO_VAL or v == 0 else UNLIMITED if v == INFINITE else v


def _u32z(v: int) -> Any:
    return None if v == NO_VAL else UNLIMITED if v == INFINITE else v


def _u32one(v: int) -> Any:
    return 1 if v == NO_VAL or v == 0 else UNLIMITED if v == INFINITE else v


def _het(v: int) -> Any:
    return None if v == 0 else UNLIMITED if v == INFINITE else v


def _u16(v: int) -> Any:
    return None if v == NO_VAL16 or v == 0 else UNLIMITED if v == INFINITE16 else v


def _bool16(v: int) -> bool:
    return not (not v or v == NO_VAL16)


def _time(v: int) -> Any:
    return None if v == NO_VAL or v == 0 or v == INFINITE else v


def _nice(v: int) -> Any:
    return None if v == NO_VAL else v - NICE_OFFSET


_string_at = ctypes.string_at


def _str(p: int) -> str | None:
    """``cstr.to_unicode``: NULL and "" are None (pyslurm built with Cython 3 gives "" for "":
    the job built is the same); a reason ``None`` stays the word, as squeue prints it (its test
    for "None" compares a pointer with a Python object, never true)."""
    if not p:
        return None
    s = _string_at(p)
    return s.decode("utf-8", "replace") if s else None


def _list(p: int) -> list[str]:
    s = _str(p)
    return s.split(",") if s else []


def _tasks(p: int) -> str | None:
    s = _str(p)
    if not s:
        return None
    return s[:s.rindex("%")] if "%" in s else s


class JobFieldReader:
    """Every job slurmctld holds, one ``slurm_load_jobs`` RPC per read: the values pyslurm's
    ``Job`` attributes would give (:data:`ATTRS`) and :data:`FIELDS` as its legacy read gives them.

    The records are copied out of libslurm's reply at once and the members wanted unpacked by
    one :class:`struct.Struct` at their offsets (a C loop, not an attribute read per field);
    only the strings set are followed (NULL pointers are None without a call)."""

    def __init__(self, lib: Any, job_type: Any, msg_type: Any, reason_name: Any) -> None:
        self.lib = lib
        self.msg_type = msg_type
        self.reason_name = reason_name
        self.size = ctypes.sizeof(job_type)
        types = dict(job_type._fields_)
        wanted = sorted({m for m, _ in ATTRS.values()} | set(FIELDS) | {"state_desc"})
        members = sorted((getattr(job_type, n).offset, n, ctypes.sizeof(types[n])) for n in wanted)
        fmt, at = "=", 0
        for offset, _, size in members:
            fmt += f"{offset - at}x{_CODES[size]}"
            at = offset + size
        self.unpack = struct.Struct(fmt + f"{self.size - at}x").iter_unpack
        self.index = {n: i for i, (_, n, _) in enumerate(members)}
        #: the pack time of the last full reply (slurmctld's clock), the update time asked next
        self.last_update = 0
        #: (the attributes asked, the values read) of that reply: given again, unchanged, when
        #: slurmctld answers that nothing changed since (:meth:`read`)
        self._last: tuple[tuple[str, ...], tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]]] | None = None
        #: whether the last :meth:`read` was that answer (no record sent, none converted)
        self.unchanged = False
        #: the pack time of slurmctld's last configuration reply (0: not asked yet): see
        #: :meth:`_same_controller`
        self.conf_time = 0
        #: full replies and "no change" answers so far (the benchmark and the tests read them)
        self.full_reads = 0
        self.unchanged_reads = 0
        #: code -> name, asked of libslurm once per code
        self._states: dict[int, str] = {}
        self._reasons: dict[int, str | None] = {}

    def read(self, attrs: tuple[str, ...]) -> tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
        """(per job, the values of pyslurm's ``Job`` attributes ``attrs``; {job id: the values
        of :data:`FIELDS`}); a failed RPC raises :class:`LibslurmError` with libslurm's message.

        After a full reply the RPC carries that reply's pack time, as ``squeue --iterate`` does:
        slurmctld answers ``SLURM_NO_CHANGE_IN_DATA`` (no record packed, sent or converted) when
        its ``last_job_update`` is older than that second, and the last reply's values are given
        again, the same objects (:attr:`unchanged`). slurmctld moves ``last_job_update`` on every
        change of a job it holds: a submission, an end, ``scontrol update``, a hold, a pending
        reason the scheduler sets, each priority the multifactor plugin recomputes
        (docs/slurm-adapter.md, *Nothing changed since*). A change within the reply's own second
        gets a full reply (slurmctld compares with the time less one second)."""
        last = self._last if self._last is not None and self._last[0] == attrs else None
        ptr = ctypes.c_void_p()
        rc = self.lib.slurm_load_jobs(self.last_update if last is not None else 0, ctypes.byref(ptr), SHOW_ALL)
        if rc != 0:
            errno = ctypes.get_errno()  # what slurm_get_errno() returns (libslurmfull has no such symbol)
            if errno == NO_CHANGE and last is not None:
                if self._same_controller():
                    self.unchanged = True
                    self.unchanged_reads += 1
                    return last[1]
                self.forget()  # restarted (or reconfigured): its "no change" is not about our reply
                return self.read(attrs)
            raise LibslurmError((self.lib.slurm_strerror(errno) or b"").decode(errors="replace")
                                or f"slurm_load_jobs failed ({errno})", errno)
        self._last, self.unchanged = None, False
        try:  # the strings are followed before the reply is freed
            msg = self.msg_type.from_address(ptr.value)
            count = int(msg.record_count)
            read: tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]] = ([], {})
            if count and msg.job_array:
                read = self._convert(ctypes.string_at(msg.job_array, count * self.size), attrs)
            self.last_update = int(msg.last_update)
            if not self.conf_time:
                self._same_controller()
            self._last = (attrs, read)
            self.full_reads += 1
            return read
        finally:
            self.lib.slurm_free_job_info_msg(ptr)

    def _same_controller(self) -> bool:
        """Whether slurmctld is the one of the last full reply: ``slurm_load_ctl_conf`` asked
        with the time of its last configuration reply answers "no change" (nothing sent) while
        its configuration time (``slurm_conf.last_update``: its start, its last ``scontrol
        reconfigure``) is older. A slurmctld started again with an empty queue has created no
        job since, so its ``last_job_update`` is older than any reply: its "no change" would hide
        that every job is gone. A configuration sent (a restart, a reconfiguration) and the
        caller reads every record; a failed RPC raises :class:`LibslurmError` as the job read
        does. The reply's ``last_update`` (slurm_conf_t's first member, 22.05 to 24.11) is its
        pack time, the time asked next."""
        ptr = ctypes.c_void_p()
        rc = self.lib.slurm_load_ctl_conf(self.conf_time, ctypes.byref(ptr))
        if rc != 0:
            errno = ctypes.get_errno()
            if errno == NO_CHANGE and self.conf_time:
                return True
            raise LibslurmError((self.lib.slurm_strerror(errno) or b"").decode(errors="replace")
                                or f"slurm_load_ctl_conf failed ({errno})", errno)
        try:
            self.conf_time = ctypes.c_long.from_address(ptr.value).value if ptr.value else 0
        finally:
            self.lib.slurm_free_ctl_conf(ptr)
        return False

    def forget(self) -> None:
        """Ask for every record at the next read (the last reply is not given again)."""
        self._last, self.last_update = None, 0

    def _row(self, attrs: tuple[str, ...]) -> Callable[[tuple[int, ...]], tuple[Any, ...]]:
        """One function turning a record's unpacked members into (the attributes' values,
        the job id, :data:`FIELDS`' values): written out once per attribute list, so that a job
        costs one call (the expressions are this module's own, nothing read from Slurm)."""
        ix = self.index

        def expr(member: str, kind: str) -> str:
            x = f"v[{ix[member]}]"
            if kind == "reason":
                d = f"v[{ix['state_desc']}]"
                return f"(_str({d}) if {d} else reason({x}))"
            if kind in _POINTER_KINDS:  # NULL: no call
                return f"(_{kind}({x}) if {x} else {'[]' if kind == 'list' else 'None'})"
            return _INLINE.get(kind, "_{kind}({x})").format(x=x, kind=kind)

        fast = ", ".join(expr(*ATTRS[a]) for a in attrs)
        limit, per_task = ix["time_limit"], ix["cpus_per_task"]
        extra = ", ".join([*(f"(_text(v[{ix[f]}]) if v[{ix[f]}] else None)" for f in FIELDS[:5]),
                           f"('Partition_Limit' if v[{limit}] == NO_VAL else 'UNLIMITED' if v[{limit}] == INFINITE "
                           f"else v[{limit}])",
                           f"('N/A' if v[{per_task}] == NO_VAL16 else v[{per_task}])",
                           f"(v[{ix['pn_min_memory']}] & ~MEM_PER_CPU)", f"state(v[{ix['job_state']}])"])
        names = {k: v for k, v in globals().items() if k.startswith("_") or k.isupper()}
        names.update(state=self._state_name, reason=self._reason_name)
        return eval(f"lambda v: (({fast},), v[{ix['job_id']}], ({extra}))", names)  # noqa: S307 - see docstring

    def _convert(self, data: bytes, attrs: tuple[str, ...]) -> tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
        row = self._row(attrs)
        fast: list[tuple[Any, ...]] = []
        extra: dict[int, tuple[Any, ...]] = {}
        for v in self.unpack(data):
            values, job_id, more = row(v)
            fast.append(values)
            extra[job_id] = more
        return fast, extra

    def _state_name(self, state: int) -> str:
        name = self._states.get(state)
        if name is None:
            raw = self.lib.slurm_job_state_string(state)
            name = self._states[state] = (raw or b"").decode(errors="replace")
        return name

    def _reason_name(self, code: int) -> str | None:
        if code not in self._reasons:
            self._reasons[code] = _str(self.reason_name(code) or 0)
        return self._reasons[code]


def _text(pointer: int | None) -> str | None:
    """A ``char *`` member (its address, None for NULL) as the legacy read gives it."""
    if not pointer:
        return None
    return ctypes.string_at(pointer).decode("utf-8", "replace")


def site_header(pyslurm_version: str | None, major_minor: Callable[[str], tuple[int, int] | None],
                include_dir: str | None = None) -> tuple[Path, str] | str:
    """The site's ``slurm.h`` and its text when it is of pyslurm's major.minor; else why not.
    The one check every direct read (jobs, site factors) makes before trusting its layout."""
    base = Path(include_dir or os.environ.get("SLURM_INCLUDE_DIR") or "/usr/include")
    header = base / "slurm" / "slurm.h"
    try:
        text = header.read_text(errors="replace")
    except OSError as exc:
        return f"no slurm.h ({header}: {exc.strerror})"
    version = header_version(base)
    if version is None or version != major_minor(pyslurm_version or ""):
        return f"{header} is Slurm {version}, pyslurm {pyslurm_version}"
    return header, text


def open_reader(pyslurm_version: str | None, major_minor: Callable[[str], tuple[int, int] | None],
                include_dir: str | None = None) -> tuple[JobFieldReader | None, str]:
    """The reader, and "" ; or None and why not (the port then uses the legacy read)."""
    found = site_header(pyslurm_version, major_minor, include_dir)
    if isinstance(found, str):
        return None, found
    header, text = found
    types = record_types(text)
    if isinstance(types, str):
        return None, f"{header}: {types}"
    path = loaded_libslurm()
    if path is None:
        return None, "libslurm is not loaded"
    lib = ctypes.CDLL(path, use_errno=True)  # pyslurm 24.11 loads libslurmfull, 22.5 libslurm
    lib.slurm_load_jobs.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint16]
    lib.slurm_load_jobs.restype = ctypes.c_int
    lib.slurm_free_job_info_msg.argtypes = [ctypes.c_void_p]
    lib.slurm_free_job_info_msg.restype = None
    lib.slurm_load_ctl_conf.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_void_p)]
    lib.slurm_load_ctl_conf.restype = ctypes.c_int
    lib.slurm_free_ctl_conf.argtypes = [ctypes.c_void_p]
    lib.slurm_free_ctl_conf.restype = None
    lib.slurm_strerror.argtypes = [ctypes.c_int]
    lib.slurm_strerror.restype = ctypes.c_char_p
    lib.slurm_job_state_string.argtypes = [ctypes.c_uint32]
    lib.slurm_job_state_string.restype = ctypes.c_char_p
    # the reason code's name: renamed in 24.11 (slurm_job_state_reason_string)
    reason_name = getattr(lib, "slurm_job_state_reason_string", None) or lib.slurm_job_reason_string
    reason_name.argtypes = [ctypes.c_int]
    reason_name.restype = ctypes.c_void_p
    return JobFieldReader(lib, *types, reason_name), ""


def record_types(header: str) -> tuple[Any, Any] | str:
    """ctypes structures of slurm.h's ``slurm_job_info_t`` and ``job_info_msg_t``, or why not."""
    job_fields = struct_members(header, "slurm_job_info_t")
    msg_fields = struct_members(header, "job_info_msg_t")
    if not job_fields or not msg_fields:
        return "the job record's layout is not plain scalars and pointers"
    names = {n for n, _ in job_fields}
    wanted = set(FIELDS) | {m for m, _ in ATTRS.values()} | {"state_desc"}
    if not wanted <= names or not {"last_update", "record_count", "job_array"} <= {n for n, _ in msg_fields}:
        return f"the job record lacks {sorted(wanted - names)}"
    return (type("slurm_job_info_t", (ctypes.Structure,), {"_fields_": job_fields}),
            type("job_info_msg_t", (ctypes.Structure,), {"_fields_": msg_fields}))
