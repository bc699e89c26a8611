"""``conf/testbed.toml``: the layout of the local Slurm testbed, validated completely.

The file says which virtual nodes exist per GPU type, which tenants (Slurm accounts) share the
cluster with which fair-share shares, which loopback ports the daemons use and a few Slurm knobs.
Like :mod:`slurm_fair.config`, validation collects *every* problem (file + key, with a
"did you mean" for misspelt keys) and raises one :class:`ConfigError` (exit code 2).

Ports are configurable for one reason beyond taste: tests bring up a second, private testbed
next to the shared one to prove that ``down`` leaves nothing running.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from ..inputs import fullmatch
from ..toml_schema import Key, check_named_tables, check_sections, expand_hostlist, read_toml
from ..errors import ConfigError, Finding
from ..templating import repo_root
from .rootfs import VERSIONS, version

#: environment variable naming the testbed description (beats ./conf/testbed.toml)
CONFIG_ENV = "SLURM_FAIR_TESTBED_CONFIG"
#: environment variable moving every port of that description by a number: a second testbed of
#: the same description and Slurm version beside the first (CI's two 22.05 lanes), in its own
#: directory ($SLURM_FAIR_TESTBED_DIR)
PORT_SHIFT_ENV = "SLURM_FAIR_TESTBED_PORT_SHIFT"

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # Slurm account / cluster / gres type names we accept


def _port(v: Any) -> str | None:
    return None if 1024 <= v <= 65535 else "must be a port between 1024 and 65535"


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def _name(v: Any) -> str | None:
    return None if fullmatch(_NAME, v) else "must be lowercase letters, digits, '_' (start with a letter)"


def _slurm_version(v: Any) -> str | None:
    return None if v in VERSIONS else f"must be one of {', '.join(VERSIONS)}"


SECTIONS: dict[str, dict[str, Key]] = {
    "cluster": {
        "name": Key((str,), "fairtb", "Slurm ClusterName", _name),
        "slurm": Key(
            (str,), "22.05", "Slurm version: 22.05 (the host's Debian packages), 24.11 (Debian "
            "trixie's) or 26.05 (Debian forky's), in a root filesystem made under the testbed directory",
            _slurm_version,
        ),
        "cpus_per_node": Key((int,), 16, "virtual CPUs per node (config_overrides)", _positive),
        "memory_mb": Key((int,), 64000, "RealMemory per node in MB", _positive),
        "job_submit_lua": Key((bool,), True, "enable JobSubmitPlugins=lua"),
        "job_submit_script": Key(
            (str,), "", "job_submit.lua to install beside slurm.conf (repo-relative or absolute; "
            "empty: slurm-fair's own, reading the plan file <dir>/run/slurm-fair-plan.json)"
        ),
        "max_job_count": Key((int,), 20000, "MaxJobCount (a 10,000-job benchmark fits)", _positive),
        "min_job_age_s": Key((int,), 30, "MinJobAge: how long finished jobs stay in squeue", _positive),
        "cred_expire_s": Key(
            (int,), 5, "job credential lifetime (AuthInfo cred_expire, >= 5); a requeued job waits this + 1 s",
            lambda v: None if v >= 5 else "must be >= 5",
        ),
        "type_partitions": Key(
            (bool,), True, "one partition per GPU type besides `gpu` (false: a site whose partitions all "
            "mix types, see [partitions.NAME])",
        ),
    },
    "ports": {
        "slurmctld": Key((int,), 16817, "SlurmctldPort", _port),
        "slurmdbd": Key((int,), 16819, "DbdPort", _port),
        "mariadb": Key((int,), 13306, "MariaDB port on 127.0.0.1", _port),
        "slurmd_base": Key((int,), 17001, "first slurmd port; node i uses base + i", _port),
    },
    "timeouts": {
        "start_s": Key((int, float), 180.0, "max seconds for `up` to reach all nodes idle", _positive),
        "stop_s": Key((int, float), 30.0, "seconds to wait for a daemon to exit before SIGKILL", _positive),
    },
}

#: ``[priority]``: the priority plugin a site runs (``basic``: no sprio, no site factors; the
#: controller must steer without pushes, and revert and the failsafe complete)
SECTIONS["priority"] = {
    "type": Key((str,), "multifactor", "PriorityType: multifactor (fair-share dominant) or basic (FIFO: no "
                "sprio, no site factor)", lambda v: None if v in ("multifactor", "basic")
                else "must be multifactor or basic"),
}

_GPU_KEYS: dict[str, Key] = {
    "nodes": Key((str,), "", "node names as a hostlist, e.g. v100-[1-2]"),
    "gpus_per_node": Key((int,), 4, "GPUs of this type per node", _positive),
    "cpus_per_node": Key((int,), 0, "override cluster.cpus_per_node (0: inherit)"),
    # site shapes (docs/testbed.md "Site configurations"): what real sites' gres look like
    "typed": Key((bool,), True, "false: the nodes declare untyped GPUs (Gres=gpu:N, no Type= in gres.conf)"),
    "extra_gres": Key(
        (str,), "", "more gres on these nodes, comma-separated: gpu:TYPE:N (a second type, MIG "
        "slices such as gpu:a100_1g.10gb:4) or shard:N",
    ),
}

_PARTITION_KEYS: dict[str, Key] = {
    "nodes": Key((str,), "", "hostlist of the partition's nodes (any types; may overlap other partitions)"),
}

#: one item of ``extra_gres``: gpu:TYPE:N or shard:N (MIG types carry '.': a100_1g.10gb)
_EXTRA_GRES = re.compile(r"^(?:gpu:([a-z0-9][a-z0-9_.]*):(\d+)|shard:(\d+))$")

_TENANT_KEYS: dict[str, Key] = {
    "fairshare": Key((int,), 1, "Slurm fair-share shares of the account", _positive),
    "description": Key((str,), "", "account description"),
}

DEFAULT_GPU_TYPES: dict[str, dict[str, Any]] = {
    "v100": {"nodes": "v100-[1-2]", "gpus_per_node": 4},
    "p100": {"nodes": "p100-[1-2]", "gpus_per_node": 4},
    "k80": {"nodes": "k80-1", "gpus_per_node": 8},
}
DEFAULT_TENANTS: dict[str, dict[str, Any]] = {
    "physics": {"fairshare": 2},
    "biology": {"fairshare": 1},
    "chemistry": {"fairshare": 1},
}


@dataclass(frozen=True)
class TestbedNode:
    """One virtual node: a slurmd on 127.0.0.1 with its own port and fake GPU device files."""

    __test__ = False

    name: str
    gpu_type: str
    gpus: int
    cpus: int
    port: int
    typed: bool = True
    #: more gres of the node: (name, type or "", count), e.g. ("gpu", "p100", 2), ("shard", "", 8)
    extra_gres: tuple[tuple[str, str, int], ...] = ()

    @property
    def gres(self) -> str:
        """The node's ``Gres=`` as slurm.conf says it: ``gpu:v100:4``, ``gpu:4`` (untyped),
        ``gpu:v100:2,gpu:p100:2,shard:8``."""
        items = [("gpu", self.gpu_type if self.typed else "", self.gpus), *self.extra_gres]
        return ",".join(f"{name}:{t}:{c}" if t else f"{name}:{c}" for name, t, c in items)

    @property
    def device_count(self) -> int:
        """Fake GPU device files of the node: its own GPUs and every extra GPU item."""
        return self.gpus + sum(c for name, _t, c in self.extra_gres if name == "gpu")


@dataclass(frozen=True)
class TestbedConfig:
    """The validated testbed description (defaults filled in, hostlists expanded)."""

    __test__ = False

    cluster_name: str
    nodes: tuple[TestbedNode, ...]
    tenants: Mapping[str, int]  # account -> fairshare
    descriptions: Mapping[str, str]
    memory_mb: int
    ports: Mapping[str, int]
    start_timeout_s: float
    stop_timeout_s: float
    max_job_count: int
    min_job_age_s: int
    cred_expire_s: int = 5
    job_submit_lua: bool = True
    job_submit_script: str = ""
    slurm: str = "22.05"
    type_partitions: bool = True
    #: the site's own partitions beside `gpu` and the per-type ones: name -> node names
    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    source: str = "<defaults>"
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: ``[priority] type``: ``multifactor`` or ``basic``
    priority_type: str = "multifactor"

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types in the order they appear in the file."""
        return tuple(dict.fromkeys(n.gpu_type for n in self.nodes))

    def nodes_of(self, gpu_type: str) -> tuple[TestbedNode, ...]:
        return tuple(n for n in self.nodes if n.gpu_type == gpu_type)


def validate(data: Mapping[str, Any], source: str = "<testbed config>") -> TestbedConfig:
    """Validate a parsed testbed TOML document; raise one ConfigError listing every problem."""
    problems: list[Finding] = []
    values = check_sections(data, SECTIONS, problems, ("gpu_types", "tenants", "partitions"))

    cluster = values["cluster"]
    nodes = _nodes(data, cluster, values["ports"], problems)
    tenants, descriptions = _tenants(data, problems)
    partitions = _partitions(data, {n.name for n in nodes}, cluster["type_partitions"], problems)
    _check_ports(values["ports"], len(nodes), problems)
    if problems:
        raise ConfigError(source, problems)
    return TestbedConfig(
        cluster_name=cluster["name"],
        nodes=tuple(nodes),
        tenants=tenants,
        descriptions=descriptions,
        memory_mb=cluster["memory_mb"],
        ports=dict(values["ports"]),
        start_timeout_s=float(values["timeouts"]["start_s"]),
        stop_timeout_s=float(values["timeouts"]["stop_s"]),
        max_job_count=cluster["max_job_count"],
        min_job_age_s=cluster["min_job_age_s"],
        cred_expire_s=cluster["cred_expire_s"],
        job_submit_lua=cluster["job_submit_lua"],
        job_submit_script=cluster["job_submit_script"],
        slurm=cluster["slurm"],
        type_partitions=cluster["type_partitions"],
        partitions=partitions,
        source=source,
        raw=data,
        priority_type=values["priority"]["type"],
    )


def _nodes(
    data: Mapping[str, Any], cluster: Mapping[str, Any], ports: Mapping[str, int], problems: list[Finding]
) -> list[TestbedNode]:
    types = check_named_tables(
        data, "gpu_types", _GPU_KEYS, problems, required=True, default=DEFAULT_GPU_TYPES, keep_misnamed=True,
        name_problem=lambda t: None if fullmatch(_NAME, t) else "GPU type must be lowercase letters, digits, '_'")
    nodes: list[TestbedNode] = []
    seen: dict[str, str] = {}
    for gpu_type, spec in types.items():
        where = f"gpu_types.{gpu_type}"
        if not spec["nodes"]:
            problems.append(Finding(f"{where}.nodes", "missing (a hostlist such as v100-[1-2])"))
            continue
        names = expand_hostlist(spec["nodes"], f"{where}.nodes", problems)
        if names is None:
            continue
        if not names:
            problems.append(Finding(f"{where}.nodes", "names no node"))
        cpus = spec["cpus_per_node"] or cluster["cpus_per_node"]
        extra = _extra_gres(spec["extra_gres"], f"{where}.extra_gres", problems)
        if spec["cpus_per_node"] < 0:
            problems.append(Finding(f"{where}.cpus_per_node", "must be >= 0"))
        for name in names:
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
                problems.append(Finding(f"{where}.nodes", f"bad node name {name!r}"))
            if name in seen:
                problems.append(Finding(f"{where}.nodes", f"node {name} also in {seen[name]}"))
                continue
            seen[name] = where
            port = ports["slurmd_base"] + len(nodes)
            nodes.append(TestbedNode(name, gpu_type, spec["gpus_per_node"], cpus, port, spec["typed"], extra))
    return nodes


def _extra_gres(text: str, where: str, problems: list[Finding]) -> tuple[tuple[str, str, int], ...]:
    """``gpu:p100:2,shard:8`` -> (("gpu", "p100", 2), ("shard", "", 8)); a bad item is a Finding."""
    out: list[tuple[str, str, int]] = []
    for item in (i.strip() for i in text.split(",") if i.strip()):
        m = _EXTRA_GRES.match(item)
        if m is None or int(m.group(2) or m.group(3)) <= 0:
            problems.append(Finding(where, f"bad gres item {item!r} (gpu:TYPE:N or shard:N, N > 0)"))
            continue
        out.append(("gpu", m.group(1), int(m.group(2))) if m.group(1) else ("shard", "", int(m.group(3))))
    return tuple(out)


def _partitions(
    data: Mapping[str, Any], known: set[str], type_partitions: bool, problems: list[Finding]
) -> dict[str, tuple[str, ...]]:
    """``[partitions.NAME]``: the site's own partitions, over nodes the description has."""
    reserved = {"gpu"} | ({str(t) for t in data.get("gpu_types", {})} if type_partitions else set())
    specs = check_named_tables(
        data, "partitions", _PARTITION_KEYS, problems,
        name_problem=lambda p: "a partition of the testbed already has this name" if p in reserved
        else None if fullmatch(_NAME, p) else "partition name must be lowercase letters, digits, '_'")
    out: dict[str, tuple[str, ...]] = {}
    for name, spec in specs.items():
        where = f"partitions.{name}.nodes"
        names = expand_hostlist(spec["nodes"], where, problems) if spec["nodes"] else None
        if not spec["nodes"]:
            problems.append(Finding(where, "missing (a hostlist of nodes of [gpu_types])"))
        if names is None:
            continue
        if unknown := [n for n in names if n not in known]:
            problems.append(Finding(where, f"names nodes no GPU type has: {', '.join(unknown)}"))
            continue
        out[name] = tuple(names)
    return out


def _tenants(data: Mapping[str, Any], problems: list[Finding]) -> tuple[dict[str, int], dict[str, str]]:
    specs = check_named_tables(
        data, "tenants", _TENANT_KEYS, problems, required=True, default=DEFAULT_TENANTS, keep_misnamed=True,
        name_problem=lambda u: None if fullmatch(_NAME, u) and u != "root"
        else "account name must be lowercase letters, digits, '_' (not root)")
    shares = {name: spec["fairshare"] for name, spec in specs.items()}
    descriptions = {name: spec["description"] or f"tenant {name}" for name, spec in specs.items()}
    return shares, descriptions


def _check_ports(ports: Mapping[str, int], n_nodes: int, problems: list[Finding]) -> None:
    base = ports["slurmd_base"]
    last = base + max(n_nodes, 1) - 1
    if last > 65535:
        problems.append(Finding("ports.slurmd_base", f"{n_nodes} nodes need ports up to {last}"))
    singles = {k: v for k, v in ports.items() if k != "slurmd_base"}
    for key, port in singles.items():
        if base <= port <= last:
            problems.append(
                Finding(f"ports.{key}", f"{port} collides with slurmd ports {base}-{last}")
            )
    by_port: dict[int, str] = {}
    for key, port in singles.items():
        if port in by_port:
            problems.append(Finding(f"ports.{key}", f"{port} already used by ports.{by_port[port]}"))
        by_port[port] = key


def with_slurm(cfg: TestbedConfig, name: str) -> TestbedConfig:
    """The same cluster on another Slurm version, every port moved by the versions' shift.

    So ``testbed up --slurm 24.11`` next to a running 22.05 testbed of the same description
    finds its own ports (16817 -> 17817, ...): both run at once without a second file.
    """
    if name == cfg.slurm:
        return cfg
    shift = version(name).port_shift - version(cfg.slurm).port_shift
    return _moved(cfg, shift, name, f"{cfg.source} (Slurm {name}, ports moved by {shift:+d})")


def _moved(cfg: TestbedConfig, shift: int, slurm: str, source: str) -> TestbedConfig:
    """``cfg`` on Slurm ``slurm`` with every port moved by ``shift``, validated again."""
    raw = {k: dict(v) if isinstance(v, Mapping) else v for k, v in dict(cfg.raw).items()}
    raw["cluster"] = {**raw.get("cluster", {}), "slurm": slurm}
    raw["ports"] = {k: p + shift for k, p in cfg.ports.items()}
    return validate(raw, source)


def load_default() -> TestbedConfig:
    """The description of the default directory: :func:`default_config_path`'s, every port moved
    by $SLURM_FAIR_TESTBED_PORT_SHIFT when that is set (a whole number; a bad value or a port
    moved out of range is a ConfigError naming the variable)."""
    cfg = load(default_config_path())
    text = os.environ.get(PORT_SHIFT_ENV, "").strip()
    if not text:
        return cfg
    try:
        shift = int(text)
    except ValueError:
        raise ConfigError(f"${PORT_SHIFT_ENV}", [Finding("", f"{text!r} is not a whole number")]) from None
    if shift == 0:
        return cfg
    try:
        return _moved(cfg, shift, cfg.slurm, f"{cfg.source} (ports moved by {shift:+d}, ${PORT_SHIFT_ENV})")
    except ConfigError as exc:
        raise ConfigError(f"${PORT_SHIFT_ENV}={text} on {cfg.source}", exc.problems) from None


def load(path: str | os.PathLike[str] | None) -> TestbedConfig:
    """Load and validate a testbed description; ``None`` means the built-in defaults."""
    if path is None:
        return validate({}, "<defaults>")
    return validate(read_toml(path), str(path))


def default_config_path() -> Path | None:
    """$SLURM_FAIR_TESTBED_CONFIG, else conf/testbed.toml of the checkout, else built-in defaults."""
    if env := os.environ.get(CONFIG_ENV):
        return Path(env)
    candidate = repo_root() / "conf" / "testbed.toml"
    return candidate if candidate.is_file() else None
