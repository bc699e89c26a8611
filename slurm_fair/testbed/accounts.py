"""Register the cluster, the tenant accounts (with their fair-share shares) and the users.

Idempotent: reads what slurmdbd already has and only adds or changes the difference
(``sacctmgr -i add`` of something that exists fails, so never blindly re-add). The invoking user
(root on the testbed) becomes a member of every tenant account so tests and the demo can submit
as any tenant with ``sbatch -A TENANT``; its default account is the first tenant, so a job
submitted without ``-A`` still lands in a tenant account.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping

from ..slurm.run import Runner
from .config import TestbedConfig


def _sacctmgr(env: Mapping[str, str], *args: str) -> str:
    """``sacctmgr -i -n -P ARGS`` through the Slurm port's runner (timeout, typed errors)."""
    return Runner(env=env, timeout_s=30, retries=0).run(["sacctmgr", "-i", "-n", "-P", *args])


def users() -> list[str]:
    """root plus the invoking user (when it is not root)."""
    return list(dict.fromkeys(["root", getpass.getuser()]))


def register(cfg: TestbedConfig, env: Mapping[str, str]) -> None:
    """Make slurmdbd hold exactly the cluster, accounts, shares and memberships of ``cfg``."""
    cluster = cfg.cluster_name
    clusters = set(_sacctmgr(env, "show", "cluster", "format=cluster").split())
    if cluster not in clusters:
        _sacctmgr(env, "add", "cluster", cluster)

    rows = _sacctmgr(
        env, "show", "assoc", "where", f"cluster={cluster}", "format=account,user,fairshare"
    )
    account_share: dict[str, str] = {}
    members: dict[str, set[str]] = {}
    for line in rows.splitlines():
        parts = line.split("|")
        if len(parts) < 3:
            continue
        account, user, share = parts[0], parts[1], parts[2]
        if user:
            members.setdefault(user, set()).add(account)
        else:
            account_share[account] = share

    known_accounts = set(_sacctmgr(env, "show", "account", "format=account").split())
    for name, wanted in cfg.tenants.items():
        if name not in known_accounts:
            _sacctmgr(
                env, "add", "account", name, f"cluster={cluster}",
                f"description={cfg.descriptions[name]}", f"organization={name}",
                f"fairshare={wanted}",
            )
        elif name not in account_share:
            _sacctmgr(env, "add", "account", name, f"cluster={cluster}", f"fairshare={wanted}")
        elif account_share[name] != str(wanted):
            _sacctmgr(
                env, "modify", "account", "where", f"name={name}", f"cluster={cluster}",
                "set", f"fairshare={wanted}",
            )

    tenants = list(cfg.tenants)
    for user in users():
        missing = [a for a in tenants if a not in members.get(user, set())]
        if missing:
            _sacctmgr(env, "add", "user", user, f"account={','.join(missing)}", f"cluster={cluster}")
        default = _sacctmgr(env, "show", "user", user, "format=defaultaccount").strip()
        if default != tenants[0]:
            _sacctmgr(env, "modify", "user", "where", f"name={user}", "set", f"defaultaccount={tenants[0]}")
