"""The pending jobs' site factors from libslurm's priority-factors RPC (what ``sprio`` reads).

The snapshot's site factor of a pending job is sprio's (``None`` for a job sprio does not list:
the priority plugin lists only pending jobs eligible by begin time, whose priority is not 0 and
not set by hand). sprio is a thin client of one RPC, ``slurm_load_job_prio``; calling that RPC
in this process through the libslurm pyslurm has loaded gives the very same list, without a
process to start and text to print and parse (~0.45 s at 10,000 pending jobs, docs/performance.md).

The layouts are not guessed: ``priority_factors_object_t`` (and on 23.02 and later its
``priority_factors_t``) and the RPC's prototype are read from the ``slurm.h`` of the Slurm it
runs against, checked as :mod:`.libslurm_jobs` checks the job record (pyslurm's major.minor, every
member a plain scalar or pointer). The value of each object is sprio's ``%S``: the stored site
factor less its offset (``priority_site - NICE_OFFSET``), 0 for a job whose priority was set by
hand (``direct_prio > 0``; such a job carries no factors). Anything else and :func:`open_prio_reader`
returns None and the port runs sprio as before; a failing RPC does too (sprio then answers as it
always did, nothing under ``priority/basic``).
"""

from __future__ import annotations

import ctypes
import re
from typing import Any, Callable

from .libslurm_jobs import LibslurmError, loaded_libslurm, site_header, struct_members

#: slurm.h's NICE_OFFSET: a stored site factor (and nice) is the value plus this
NICE_OFFSET = 0x80000000
#: the list types of slurm.h (22.05 ``List``; 23.02 on ``list_t *``): one pointer each
_LIST_TYPES = frozenset(("List",))


def prototype_arity(header: str, function: str) -> int | None:
    """How many parameters ``function`` takes in ``header`` (None when not declared once)."""
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    found = re.findall(r"\b" + re.escape(function) + r"\s*\(([^)]*)\)\s*;", text)
    if len(found) != 1:
        return None
    params = [p.strip() for p in found[0].split(",") if p.strip()]
    return 0 if params == ["void"] else len(params)


class PrioLayout:
    """Where a priority-factors object keeps what sprio's ``%i`` and ``%S`` print."""

    def __init__(self, obj: Any, factors: Any | None, arity: int) -> None:
        self.obj = obj
        #: ``priority_factors_t`` (23.02 on: the factors behind ``prio_factors``); None: inline
        self.factors = factors
        #: 5: (resp, job ids, partitions, uids, flags) as 22.05; 2: (resp, flags) as 24.11
        self.arity = arity

    def site_factor(self, address: int) -> tuple[int, int]:
        """(job id, its site factor as sprio prints it) of the object at ``address``."""
        o = self.obj.from_address(address)
        if o.direct_prio > 0:
            return int(o.job_id), 0
        if self.factors is None:
            return int(o.job_id), int(o.priority_site) - NICE_OFFSET
        if not o.prio_factors:
            return int(o.job_id), 0
        return int(o.job_id), int(self.factors.from_address(o.prio_factors).priority_site) - NICE_OFFSET


def prio_layout(header: str) -> PrioLayout | str:
    """The layout of ``header``'s priority-factors objects, or why it cannot be trusted."""
    arity = prototype_arity(header, "slurm_load_job_prio")
    if arity not in (2, 5):
        return f"slurm_load_job_prio takes {arity} parameters (expected 5 as 22.05 or 2 as 24.11)"
    resp = struct_members(header, "priority_factors_response_msg_t", _LIST_TYPES)
    if not resp or resp[0][0] != "priority_factors_list":
        return "the priority factors reply is not a list first"
    obj = struct_members(header, "priority_factors_object_t", _LIST_TYPES)
    if not obj:
        return "the priority factors object's layout is not plain scalars and pointers"
    names = dict(obj)
    if not {"job_id", "direct_prio"} <= set(names):
        return "the priority factors object lacks job_id or direct_prio"
    obj_type = type("priority_factors_object_t", (ctypes.Structure,), {"_fields_": obj})
    if "priority_site" in names:
        return PrioLayout(obj_type, None, arity)
    factors = struct_members(header, "priority_factors_t", _LIST_TYPES)
    if "prio_factors" not in names or not factors or "priority_site" not in dict(factors):
        return "the priority factors object has no priority_site"
    return PrioLayout(obj_type, type("priority_factors_t", (ctypes.Structure,), {"_fields_": factors}), arity)


class SiteFactorReader:
    """Every listed pending job's site factor, one ``slurm_load_job_prio`` RPC per read."""

    def __init__(self, lib: Any, layout: PrioLayout) -> None:
        self.lib = lib
        self.layout = layout

    def read(self) -> dict[str, int]:
        """{job id: site factor} as ``sprio -o %i %S`` gives it (one entry per job; a job listed
        once per partition has one factor); a failed RPC raises :class:`LibslurmError`."""
        resp = ctypes.c_void_p()
        if self.layout.arity == 5:
            rc = self.lib.slurm_load_job_prio(ctypes.byref(resp), None, None, None, 0)
        else:
            rc = self.lib.slurm_load_job_prio(ctypes.byref(resp), 0)
        if rc != 0:
            errno = ctypes.get_errno()
            raise LibslurmError((self.lib.slurm_strerror(errno) or b"").decode(errors="replace")
                                or f"slurm_load_job_prio failed ({errno})", errno)
        if not resp.value:
            return {}
        out: dict[str, int] = {}
        try:
            listed = ctypes.c_void_p.from_address(resp.value).value  # the reply's first member
            if not listed:
                return {}
            it = self.lib.slurm_list_iterator_create(listed)
            try:
                site_factor = self.layout.site_factor
                while True:
                    item = self.lib.slurm_list_next(it)
                    if not item:
                        break
                    job_id, factor = site_factor(item)
                    out[str(job_id)] = factor
            finally:
                self.lib.slurm_list_iterator_destroy(it)
        finally:
            self.lib.slurm_free_priority_factors_response_msg(resp)
        return out


def open_prio_reader(pyslurm_version: str | None, major_minor: Callable[[str], tuple[int, int] | None],
                     include_dir: str | None = None) -> tuple[SiteFactorReader | None, str]:
    """The reader, and "" ; or None and why not (the port then runs sprio)."""
    found = site_header(pyslurm_version, major_minor, include_dir)
    if isinstance(found, str):
        return None, found
    header, text = found
    layout = prio_layout(text)
    if isinstance(layout, str):
        return None, f"{header}: {layout}"
    path = loaded_libslurm()
    if path is None:
        return None, "libslurm is not loaded"
    lib = ctypes.CDLL(path, use_errno=True)
    p = ctypes.c_void_p
    lib.slurm_load_job_prio.argtypes = ([ctypes.POINTER(p), p, ctypes.c_char_p, p, ctypes.c_uint16]
                                        if layout.arity == 5 else [ctypes.POINTER(p), ctypes.c_uint16])
    lib.slurm_load_job_prio.restype = ctypes.c_int
    lib.slurm_free_priority_factors_response_msg.argtypes = [p]
    lib.slurm_free_priority_factors_response_msg.restype = None
    lib.slurm_list_iterator_create.argtypes = [p]
    lib.slurm_list_iterator_create.restype = p
    lib.slurm_list_next.argtypes = [p]
    lib.slurm_list_next.restype = p
    lib.slurm_list_iterator_destroy.argtypes = [p]
    lib.slurm_list_iterator_destroy.restype = None
    lib.slurm_strerror.argtypes = [ctypes.c_int]
    lib.slurm_strerror.restype = ctypes.c_char_p
    return SiteFactorReader(lib, layout), ""
