"""Slurm's Fair Tree fair-share factor (``priority/multifactor``'s default since 19.05).

The modelled site Slurm (:mod:`.slurmlike`) orders pending jobs by a fair-share factor. Slurm
has two: the classic ``2^(-U/S)`` (``PriorityFlags=NO_FAIR_TREE``) and Fair Tree, the default of
every Slurm a site runs today. Fair Tree does not compare numbers across the tree; it *ranks*:

* at every level of the association tree each child gets a **level fair-share**
  ``LF = S / U``: ``S`` its raw shares over the sum of its siblings' (itself included), ``U`` its
  decayed usage over its siblings' (an account's usage is its children's). No usage: ``LF`` is
  infinite (first); no shares: 0 (last);
* the tree is walked depth first, each level's children in decreasing ``LF``: a user (a leaf)
  takes the next rank down from the number of users, so every user under an account that
  ranks above a sibling account ranks above all of that sibling's users;
* **ties**: users of equal ``LF`` take the same rank (the next user after them one rank per
  tied user further down); sibling accounts of equal ``LF`` have their children merged into one
  list, sorted together (each child's ``LF`` still against its own siblings);
* the factor is ``rank / users`` (1 for the first, ``1 / users`` for the last).

So the order of the users depends only on the order of the ``LF`` at each level, never on how
far apart they are; the factor's scale (steps of ``1 / users``) is what weighs it against the age
factor. Pure: no Slurm call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

#: ``--slurm-fairshare``: Slurm's fair-share algorithm (``PriorityFlags=NO_FAIR_TREE``: classic)
FAIRSHARE_ALGORITHMS = ("fair-tree", "classic")


@dataclass(frozen=True)
class Assoc:
    """One association: an account (with children) or a user (a leaf, with its usage)."""

    name: str
    shares: float = 1.0
    #: a user's decayed usage (an account's is the sum of its children's)
    usage: float = 0.0
    children: tuple["Assoc", ...] = field(default=())

    @property
    def is_user(self) -> bool:
        return not self.children

    def total_usage(self) -> float:
        return self.usage if self.is_user else sum(c.total_usage() for c in self.children)

    def users(self) -> int:
        return 1 if self.is_user else sum(c.users() for c in self.children)


def level_fairshares(siblings: Sequence[Assoc]) -> list[float]:
    """``S / U`` of each of ``siblings`` among them: infinite with no usage, 0 with no shares
    (Slurm's order: an unused association first, a shareless one last)."""
    shares = sum(s.shares for s in siblings)
    usages = [s.total_usage() for s in siblings]
    usage = sum(usages)
    out = []
    for node, used in zip(siblings, usages):
        s = node.shares / shares if shares > 0 else 0.0
        u = used / usage if usage > 0 else 0.0
        out.append(0.0 if s <= 0 else math.inf if u <= 0 else s / u)
    return out


def _tie(a: float, b: float) -> bool:
    """Equal level fair-shares (Slurm compares its long doubles exactly; here a tie is kept
    whatever the units of usage and shares, so equal ratios tie when scaled)."""
    return a == b or math.isclose(a, b, rel_tol=1e-9)


def fair_tree(accounts: Sequence[Assoc]) -> dict[tuple[str, ...], float]:
    """Each user's Fair Tree factor, keyed by its path of names from the root's children down
    (``(account, user)`` for a flat tree). ``accounts``: the root's children."""
    n = sum(a.users() for a in accounts)
    factors: dict[tuple[str, ...], float] = {}
    if n == 0:
        return factors
    next_rank = [n]  # the rank the next user gets unless it ties with the previous one

    def walk(level: list[tuple[tuple[str, ...], Assoc, float]]) -> None:
        # decreasing LF; equal LF in name order (a stable walk: ties get one rank anyway)
        level.sort(key=lambda x: (-x[2], x[0]))
        prev_lf: float | None = None
        prev_rank = next_rank[0]
        i = 0
        while i < len(level):
            path, node, lf = level[i]
            if node.is_user:
                rank = prev_rank if prev_lf is not None and _tie(lf, prev_lf) else next_rank[0]
                factors[path] = rank / n
                prev_rank, prev_lf = rank, lf
                next_rank[0] -= 1
                i += 1
                continue
            # this account and the sibling accounts tied with it: their children as one level
            j = i
            merged: list[tuple[tuple[str, ...], Assoc, float]] = []
            while j < len(level) and not level[j][1].is_user and _tie(level[j][2], lf):
                p, acct, _ = level[j]
                merged.extend((p + (c.name,), c, lf) for c, lf in zip(acct.children, level_fairshares(acct.children)))
                j += 1
            walk(merged)
            prev_lf, prev_rank = None, next_rank[0]
            i = j

    walk([((a.name,), a, lf) for a, lf in zip(accounts, level_fairshares(accounts))])
    return factors


def flat_tree(shares: Mapping[str, float], usage: Mapping[tuple[str, str], float],
              users: Mapping[str, Iterable[str]]) -> list[Assoc]:
    """root -> accounts (their ``shares``) -> users (1 share each, their ``usage``): the tree of a
    replay, whose tenants are accounts and whose jobs name their user."""
    return [Assoc(a, float(shares.get(a, 1.0)), 0.0,
                  tuple(Assoc(u, 1.0, float(usage.get((a, u), 0.0))) for u in sorted(users[a])))
            for a in sorted(users)]
