"""Per-site class rules from the configuration: steps 3 and 4 of the order of precedence."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..slurm.model import SlurmJob


@dataclass(frozen=True)
class Rules:
    """Per-site class rules from the configuration."""

    account_classes: Mapping[str, str] = field(default_factory=dict)
    name_classes: tuple[tuple[str, str], ...] = ()
    tenant_classes: Mapping[str, str] = field(default_factory=dict)
    default_class: str = ""

    @classmethod
    def from_config(cls, config: Any) -> "Rules":
        """The rule tables of a validated configuration (``config_checks`` has refused any value
        that is not a class name when the file was read)."""
        th = config["throughput"]
        accounts = {str(k): v for k, v in dict(th.get("account_classes", {}) or {}).items()}
        names = tuple((str(k), v) for k, v in dict(th.get("name_classes", {}) or {}).items())
        tenants = {tenant: spec["classes"][0] for tenant, spec in config.tenants.items() if spec.get("classes")}
        return cls(accounts, names, tenants, th.get("default_class", "") or "")

    def candidates(self, job: SlurmJob) -> list[tuple[str, str]]:
        """(class, source) candidates from rules, most specific first."""
        out = []
        if job.account in self.account_classes:
            out.append((self.account_classes[job.account], "rule:account"))
        for pattern, name in self.name_classes:
            if fnmatch.fnmatchcase(job.name, pattern):
                out.append((name, f"rule:name={pattern}"))
                break
        if job.account in self.tenant_classes:
            out.append((self.tenant_classes[job.account], "rule:tenant"))
        if self.default_class:
            out.append((self.default_class, "default_class"))
        return out
