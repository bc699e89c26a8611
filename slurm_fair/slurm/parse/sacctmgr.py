"""``sacctmgr -P show assoc|qos``: the columns asked for and records -> accounts and QOS."""

from __future__ import annotations

from ..model import Account, Qos
from .fields import parse_int
from .gres import grp_tres_gpus
from .records import split_records

ASSOC_FIELDS: tuple[str, ...] = ("Cluster", "Account", "User", "Partition", "Share", "QOS", "DefaultQOS")
QOS_FIELDS: tuple[str, ...] = ("Name", "Priority", "GrpTRES")


def _share(text: str) -> float:
    t = text.strip().lower()
    if t in ("", "parent"):
        return 1.0
    try:
        v = float(t)
    except ValueError:
        return 1.0
    return v if v > 0 else 1.0


def parse_assoc(text: str, fs: str = "|") -> list[Account]:
    """Account-level associations (empty User) -> :class:`Account`; ``root`` is skipped.

    An account listed on several clusters/partitions keeps its first row's share and the union
    of its QOS.
    """
    accounts: dict[str, Account] = {}
    for f in split_records(text, fs, len(ASSOC_FIELDS)):
        _cluster, account, user, _partition, share, qos, default_qos = (x.strip() for x in f)
        if user or not account or account == "root":
            continue
        qos_list = tuple(q for q in qos.split(",") if q)
        prev = accounts.get(account)
        if prev is None:
            accounts[account] = Account(account, _share(share), qos_list, default_qos)
        else:
            union = tuple(dict.fromkeys(prev.qos + qos_list))
            accounts[account] = Account(account, prev.shares, union, prev.default_qos or default_qos)
    return list(accounts.values())


def parse_qos(text: str, fs: str = "|") -> list[Qos]:
    out = []
    for f in split_records(text, fs, len(QOS_FIELDS)):
        name, priority, grp = (x.strip() for x in f)
        if name:
            out.append(Qos(name=name, grp_tres=grp_tres_gpus(grp), priority=parse_int(priority)))
    return out
