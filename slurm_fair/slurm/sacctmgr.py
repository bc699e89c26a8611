"""The adapter's writes to Slurm's accounting database: QOS and the accounts they are attached to.

Through ``sacctmgr -i`` (slurmdbd), apart from the job writes that go through ``scontrol``
(slurmctld); idempotent: "Nothing modified" (24.11: "Request didn't affect anything"), "Nothing
new added" and "already exists" are
success, so a cycle that repeats a change after a crash does no harm.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ..inputs import fullmatch
from ..errors import SlurmCommandError
from .run import Runner
from .write_rules import check_name

_TRES_KEY = re.compile(r"^(cpu|mem|node|billing|energy|gres/[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?)$")
#: 24.11 says a modify that matched nothing with "Request didn't affect anything" (22.05:
#: "Nothing modified")
_NOTHING = re.compile(r"nothing (modified|deleted|new added)|already exists|request didn't affect anything",
                      re.IGNORECASE)


class Sacctmgr:
    """``sacctmgr`` for one cluster (``cluster``: association queries are restricted to it)."""

    def __init__(self, runner: Runner, cluster: str = "") -> None:
        self.runner = runner
        self.cluster = cluster

    def show(self, entity: str, fields: Sequence[str], where: Sequence[str] = ()) -> str:
        argv = ["sacctmgr", "-n", "-P", "show", entity]
        conds = list(where) + ([f"cluster={self.cluster}"] if self.cluster and entity == "assoc" else [])
        if conds:
            argv += ["where", *conds]
        argv.append("format=" + ",".join(fields))
        return self.runner.run(argv)

    def run(self, *args: str) -> None:
        """``sacctmgr -i ARGS``; a change that was already made is not an error."""
        try:
            self.runner.run(["sacctmgr", "-i", *args])
        except SlurmCommandError as exc:
            if not _NOTHING.search(exc.stderr):
                raise

    def ensure_qos(self, name: str, grp_tres: Mapping[str, int | None], exists: bool | None = None) -> None:
        check_name("QOS", name)
        items = []
        for key, value in grp_tres.items():
            key = key.replace("gres:", "gres/", 1)
            if not fullmatch(_TRES_KEY, key):
                raise ValueError(f"invalid TRES name {key!r}")
            items.append(f"{key}={-1 if value is None else int(value)}")
        if exists is None:
            exists = bool(self.show("qos", ["Name"], [f"name={name}"]).strip())
        limits = ["GrpTRES=" + ",".join(items)] if items else []
        if not exists:
            try:  # created with its limits: one slurmdbd round trip instead of two
                self.runner.run(["sacctmgr", "-i", "add", "qos", name, *limits])
                return
            except SlurmCommandError as exc:
                if not _NOTHING.search(exc.stderr):
                    raise  # else it existed after all ("Nothing new added"): set the limits
        if limits:
            self.run("modify", "qos", "where", f"name={name}", "set", *limits)

    def delete_qos(self, name: str) -> None:
        self.run("delete", "qos", "where", f"name={check_name('QOS', name)}")

    def _assoc_where(self, account: str) -> list[str]:
        return [f"account={account}"] + ([f"cluster={self.cluster}"] if self.cluster else [])

    def attach_qos(self, account: str, qos: str, default: bool = True) -> None:
        """Add ``qos`` to the account's association *and* to every user association under it
        (a user association's own QOS list does not follow later changes of its account)."""
        check_name("account", account)
        check_name("QOS", qos)
        sets = [f"qos+={qos}"] + ([f"defaultqos={qos}"] if default else [])
        where = self._assoc_where(account)
        self.run("modify", "account", "where", f"name={account}", *where[1:], "set", *sets)
        self.run("modify", "user", "where", *where, "set", *sets)

    def detach_qos(self, account: str, qos: str) -> None:
        check_name("account", account)
        check_name("QOS", qos)
        where = self._assoc_where(account)
        for entity, cond in (("account", [f"name={account}", *where[1:]]), ("user", where)):
            self.run("modify", entity, "where", *cond, f"defaultqos={qos}", "set", "defaultqos=-1")
            self.run("modify", entity, "where", *cond, "set", f"qos-={qos}")
