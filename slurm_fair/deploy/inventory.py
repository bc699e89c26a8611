"""The cluster's GPU inventory for ``render-config``: nodes, their GPU types, counts and devices.

Three sources, one result (:class:`Inventory`):

* a description file, TOML or JSON, in the shape of ``conf/testbed.toml`` (so the testbed's own
  description is accepted as it is)::

      [cluster]
      name = "mycluster"
      [gpu_types.v100]
      nodes = "gpu-v[01-04]"        # a hostlist
      gpus_per_node = 4
      files = "/dev/nvidia[0-3]"    # optional; default /dev/nvidia[0-N-1]
      billing_weight = 1.0          # optional; default from the measured throughput table
      [tenants.physics]             # optional: accounts the QOS bootstrap prepares
      fairshare = 2

  Testbed-only sections and keys (``[ports]``, ``[timeouts]``, ``cluster.max_job_count``...)
  are accepted and ignored;
* the live cluster, read through the Slurm adapter (``--from-slurm``): nodes and typed GPUs
  from ``sinfo``, accounts from ``sacctmgr``.

Every name that ends up in a rendered file is checked here against a strict pattern (no
whitespace, newline, ``#``, ``=``, quote or shell metacharacter can pass), and every problem of
the file is reported at once (exit code 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ClusterShell.NodeSet import NodeSet

from ..inputs import fullmatch, number_problem, parse_json, read_text
from ..toml_schema import Key, check_named_tables, check_sections, expand_hostlist, read_toml
from .. import names
from ..errors import ConfigError, Finding



def _match(pattern: re.Pattern[str], what: str) -> Any:
    def check(v: Any) -> str | None:
        return None if fullmatch(pattern, v) else f"{what} must match {pattern.pattern}"

    return check


def _number(lo: float, hi: float, integer: bool = False) -> Any:
    """A Key check: :func:`slurm_fair.inputs.number_problem` (finite, in ``[lo, hi]``)."""
    def check(v: Any) -> str | None:
        problem = number_problem(v, lo=lo, hi=hi, integer=integer)
        return problem.rsplit(", got ", 1)[0] if problem else None  # the caller adds "got"

    return check


#: most GPUs of one type on one node (gres.conf lists a device file per GPU)
MAX_GPUS_PER_NODE = 1024
#: Slurm's fair-share shares are a 32-bit count
MAX_FAIRSHARE = 2**31 - 1


_CLUSTER_KEYS: dict[str, Key] = {
    "name": Key((str,), "", "Slurm ClusterName (empty: not rendered)",
                lambda v: None if v == "" or fullmatch(names.CLUSTER, v) else f"must match {names.CLUSTER.pattern}"),
    "cpus_per_node": Key((int,), 0, "CPUs per node (informational)"),
    # testbed-only keys, accepted so conf/testbed.toml is a valid inventory
    "memory_mb": Key((int,), 0, "testbed only"),
    "job_submit_lua": Key((bool,), False, "testbed only"),
    "job_submit_script": Key((str,), "", "testbed only"),
    "max_job_count": Key((int,), 0, "testbed only"),
    "min_job_age_s": Key((int,), 0, "testbed only"),
    "cred_expire_s": Key((int,), 0, "testbed only"),
}
_GPU_KEYS: dict[str, Key] = {
    "nodes": Key((str,), "", "hostlist of the nodes with this GPU type"),
    "gpus_per_node": Key((int,), 1, "GPUs of this type per node", _number(1, MAX_GPUS_PER_NODE, True)),
    "cpus_per_node": Key((int,), 0, "testbed only"),
    "files": Key((str,), "", "device files (default /dev/nvidia[0-N-1])",
                 _match(names.DEVICE, "a device path")),
    "billing_weight": Key((int, float), 0.0, "TRESBillingWeights for this type (0: measured)",
                          _number(0, 1e6)),
}
_TENANT_KEYS: dict[str, Key] = {
    "fairshare": Key((int,), 1, "Slurm fair-share shares", _number(1, MAX_FAIRSHARE, True)),
    "description": Key((str,), "", "testbed only"),
}
_IGNORED_SECTIONS = ("ports", "timeouts")


@dataclass(frozen=True)
class GpuNode:
    """GPUs of one type on one node, with the device files gres.conf needs."""

    name: str
    gpu_type: str
    gpus: int
    files: str


@dataclass(frozen=True)
class Inventory:
    """What render-config needs to know about the cluster (validated)."""

    cluster_name: str
    nodes: tuple[GpuNode, ...]
    tenants: Mapping[str, int] = field(default_factory=dict)  # account -> fairshare
    billing_overrides: Mapping[str, float] = field(default_factory=dict)
    source: str = "<inventory>"

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n.gpu_type for n in self.nodes))

    def node_names(self, gpu_type: str | None = None) -> list[str]:
        return list(dict.fromkeys(n.name for n in self.nodes if gpu_type in (None, n.gpu_type)))

    def hostlist(self, gpu_type: str | None = None) -> str:
        """Folded hostlist (``v100-[1-2]``) of the nodes with ``gpu_type`` (None: all)."""
        return str(NodeSet.fromlist(self.node_names(gpu_type)))

    def capacity(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.gpu_type] = out.get(n.gpu_type, 0) + n.gpus
        return out


def default_files(first: int, count: int) -> str:
    """``/dev/nvidia0`` or ``/dev/nvidia[first-last]``."""
    if count == 1:
        return f"/dev/nvidia{first}"
    return f"/dev/nvidia[{first}-{first + count - 1}]"


def device_problem(files: str, gpus: int) -> str | None:
    """Why ``files`` (``/dev/nvidia[0-3]``, already matching :data:`slurm_fair.names.DEVICE`)
    is not a device list for ``gpus`` GPUs, or None. slurmd drains a node whose gres.conf
    ``File=`` names another number of devices than its ``Count``, so the list must expand to
    exactly ``gpus`` distinct files, each range ascending (``[3-0]`` is no range)."""
    bracket = re.search(r"\[([0-9,-]+)\]$", files)
    if bracket is None:
        count = 1
    else:
        seen: set[int] = set()
        for part in bracket.group(1).split(","):
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi or lo)
            if last < first:
                return f"range [{part}] is descending (write [{hi}-{lo}])"
            if last - first >= MAX_GPUS_PER_NODE:
                return f"range [{part}] names more than {MAX_GPUS_PER_NODE} devices"
            numbers = set(range(first, last + 1))
            if seen & numbers:
                return f"device {min(seen & numbers)} is named twice"
            seen |= numbers
        count = len(seen)
    if count != gpus:
        return (f"names {count} device file(s) for gpus_per_node = {gpus} (gres.conf needs one file per GPU, "
                f"e.g. {default_files(0, gpus)})")
    return None


def validate(data: Mapping[str, Any], source: str = "<inventory>") -> Inventory:
    """Validate a parsed description; raise one ConfigError listing every problem."""
    problems: list[Finding] = []
    cluster = check_sections(data, {"cluster": _CLUSTER_KEYS}, problems,
                             ("gpu_types", "tenants", *_IGNORED_SECTIONS))["cluster"]
    types = check_named_tables(
        data, "gpu_types", _GPU_KEYS, problems, required=True,
        name_problem=lambda t: None if fullmatch(names.GPU_TYPE, t) else f"GPU type must match {names.GPU_TYPE.pattern}")
    nodes: list[GpuNode] = []
    overrides: dict[str, float] = {}
    used: dict[str, int] = {}  # node -> next device index (several types on one node)
    for gpu_type, spec in types.items():
        where = f"gpu_types.{gpu_type}"
        if not spec["nodes"]:
            problems.append(Finding(f"{where}.nodes", "missing (a hostlist such as gpu-[1-4])"))
            continue
        hosts = expand_hostlist(spec["nodes"], f"{where}.nodes", problems)
        if hosts is None:
            continue
        if spec["billing_weight"]:
            overrides[gpu_type] = float(spec["billing_weight"])
        if spec["files"] and (msg := device_problem(spec["files"], spec["gpus_per_node"])):
            problems.append(Finding(f"{where}.files", msg))
            continue
        for name in hosts:
            if not fullmatch(names.NODE, name):
                problems.append(Finding(f"{where}.nodes", f"node name {name!r} must match {names.NODE.pattern}"))
                continue
            first = used.get(name, 0)
            used[name] = first + spec["gpus_per_node"]
            files = spec["files"] or default_files(first, spec["gpus_per_node"])
            nodes.append(GpuNode(name, gpu_type, spec["gpus_per_node"], files))

    tenants = {name: spec["fairshare"] for name, spec in check_named_tables(
        data, "tenants", _TENANT_KEYS, problems,
        name_problem=lambda u: None if fullmatch(names.ACCOUNT, u) and u != "root"
        else f"account name must match {names.ACCOUNT.pattern} (not root)").items()}
    if problems:
        raise ConfigError(source, problems)
    return Inventory(cluster["name"], tuple(nodes), tenants, overrides, source)


def load(path: str | Path) -> Inventory:
    """Read and validate an inventory file (:func:`read_description`)."""
    return validate(read_description(path), str(path))


def read_description(path: str | Path) -> dict[str, Any]:
    """Read a TOML (``.toml``) or JSON (``.json``) description file: a regular UTF-8 file
    (:func:`slurm_fair.inputs.read_text`), strict JSON (:func:`slurm_fair.inputs.parse_json`).
    The one reader of ``--inventory`` for both targets (``--target docker`` validates it as a
    testbed description, ``--target cluster`` as an inventory)."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        data = parse_json(read_text(p, "inventory"), str(p))
    else:
        data = read_toml(p)  # the configuration's reader: one message per TOML mistake, with its line
    if not isinstance(data, dict):
        raise ConfigError(str(p), ["must be an object/table at the top level"])
    return data


def from_snapshot(snapshot: Any, source: str = "slurm (sinfo/sacctmgr)") -> Inventory:
    """The inventory of a live cluster: typed GPUs per node from the adapter's snapshot.

    Device files are not visible from the controller: the default ``/dev/nvidiaN`` numbering
    is assumed (per node, types in the order sinfo lists them); use an inventory file when the
    site numbers devices otherwise.
    """
    problems: list[Finding] = []
    nodes: list[GpuNode] = []
    for node in snapshot.nodes:
        first = 0
        for gpu_type, count in node.gpus_total.items():
            if count <= 0:
                continue
            where = f"node {node.name}"
            if not fullmatch(names.NODE, node.name):
                problems.append(Finding(where, f"node name must match {names.NODE.pattern}"))
                continue
            if not fullmatch(names.GPU_TYPE, gpu_type):
                problems.append(Finding(where, f"GPU type {gpu_type!r} must match {names.GPU_TYPE.pattern}"))
                continue
            nodes.append(GpuNode(node.name, gpu_type, int(count), default_files(first, int(count))))
            first += int(count)
    if not nodes and not problems:
        problems.append(Finding("gpu_types", "Slurm reports no typed GPU on any node (Gres=gpu:TYPE:N)"))
    cluster = getattr(snapshot, "cluster", "") or ""
    if cluster and not fullmatch(names.CLUSTER, cluster):
        problems.append(Finding("cluster", f"cluster name must match {names.CLUSTER.pattern}"))
    tenants = {a.name: 1 for a in getattr(snapshot, "accounts", ()) if a.name != "root" and fullmatch(names.ACCOUNT, a.name)}
    if problems:
        raise ConfigError(source, problems)
    return Inventory(cluster, tuple(nodes), tenants, {}, source)
