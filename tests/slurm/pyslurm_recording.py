"""A recording of pyslurm's raw records beside the command line's snapshot of the same moment.

``save`` (called by ``test_backends_agree.py`` with ``SLURM_FAIR_RECORD_PYSLURM=FILE``) writes
the legacy job and node dicts, each node's complete state, the partitions' attributes, sprio's
site factors and
:class:`SlurmCli`'s jobs, nodes and partitions, all as JSON; ``as_plain`` is the one way both
sides are turned into comparable JSON (times as Unix seconds: independent of the time zone).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from slurm_fair.slurm.pyslurm_port import _PARTITION_ATTRS

#: pyslurm's legacy job fields the conversion may read (others are left out of the recording)
JOB_KEYS = ("job_id", "job_state", "tres_per_job", "tres_per_node", "tres_per_task", "tres_alloc_str", "comment",
            "state_reason", "req_nodes", "exc_nodes", "nodes", "name", "user_id", "account", "partition", "qos",
            "submit_time", "start_time", "priority", "nice", "requeue", "pn_min_cpus", "pn_min_memory",
            "max_nodes", "admin_comment", "time_limit", "resv_name", "dependency", "features", "num_tasks",
            "num_nodes", "num_cpus", "ntasks_per_node", "cpus_per_task", "array_job_id", "array_task_id",
            "array_task_str", "het_job_id", "het_job_offset")
NODE_KEYS = ("name", "state", "gres", "gres_used", "partitions", "features", "cpus", "real_memory")


def as_plain(x: Any) -> Any:
    """A model object (or a value in it) as JSON: datetimes as Unix seconds, mappings as dicts."""
    if dataclasses.is_dataclass(x):
        return {f.name: as_plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, datetime):
        return x.timestamp()
    if isinstance(x, (frozenset, set)):
        return sorted(x)
    if hasattr(x, "keys"):
        return {str(k): as_plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [as_plain(v) for v in x]
    return x


def save(path: str, port, snapshot) -> None:
    ps = port.ps
    every = [{k: raw.get(k) for k in JOB_KEYS} for raw in ps.job().get().values()]
    queued = [r for r in every if r["job_state"] in ("PENDING", "RUNNING")]
    jobs = queued + [r for r in every if r not in queued][:5]  # a few ended ones: the state filter
    nodes = [{k: raw.get(k) for k in NODE_KEYS} for raw in ps.node().get().values()]
    complete = {name: str(n.state or "") for name, n in ps.Nodes.load().items()}
    parts = [{a: getattr(p, a) for a in _PARTITION_ATTRS} for p in ps.Partitions.load().values()]
    users = {str(r["user_id"]): port._user(int(r["user_id"])) for r in jobs}
    doc = {
        "slurm": port.cli.runner.run(["scontrol", "--version"]).strip(),
        "pyslurm": {"jobs": jobs, "nodes": nodes, "complete_states": complete, "partitions": parts, "users": users,
                    "site_factors": port._site_factors()},  # sprio's, which the port reads beside
        "cli": {"jobs": as_plain(list(snapshot.jobs)), "nodes": as_plain(list(snapshot.nodes)),
                "partitions": as_plain(list(snapshot.partitions))},
    }
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
