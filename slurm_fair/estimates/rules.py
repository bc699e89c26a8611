"""Per-site class rules from the configuration: steps 3 and 4 of the order of precedence."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..inputs import fullmatch
from ..errors import ConfigError, Finding
from ..slurm.model import SlurmJob
from .classes import CLASS_RE


@dataclass(frozen=True)
class Rules:
    """Per-site class rules from the configuration."""

    account_classes: Mapping[str, str] = field(default_factory=dict)
    name_classes: tuple[tuple[str, str], ...] = ()
    tenant_classes: Mapping[str, str] = field(default_factory=dict)
    default_class: str = ""

    @classmethod
    def from_config(cls, config: Any) -> "Rules":
        """Validate the rule tables (values must be class names); ConfigError names the key."""
        th = config["throughput"]
        problems: list[Finding] = []

        def table(key: str) -> list[tuple[str, str]]:
            out = []
            for k, v in dict(th.get(key, {}) or {}).items():
                if not isinstance(v, str) or not fullmatch(CLASS_RE, v):
                    problems.append(Finding(f"throughput.{key}.{k}", f"must be a class name, got {v!r}"))
                else:
                    out.append((str(k), v))
            return out

        accounts = dict(table("account_classes"))
        names = tuple(table("name_classes"))
        tenants = {}
        for tenant, spec in config.tenants.items():
            classes = spec.get("classes") or []
            if classes:
                if not isinstance(classes[0], str) or not fullmatch(CLASS_RE, classes[0]):
                    problems.append(Finding(f"tenants.{tenant}.classes", f"bad class name {classes[0]!r}"))
                else:
                    tenants[tenant] = classes[0]
        if problems:
            raise ConfigError(config.source, problems)
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
