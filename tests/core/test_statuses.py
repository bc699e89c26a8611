"""Status words: enum members that read and write as the plain words the formats keep."""

from __future__ import annotations

import json
import sqlite3

import pytest

from slurm_fair.statuses import OK_CYCLES, AllocationStatus, CycleStatus


@pytest.mark.parametrize("member", [*AllocationStatus, *CycleStatus])
def test_a_status_is_its_word_everywhere(member):
    word = member.value
    assert member == word and str(member) == word and f"{member}" == word and f"{member:>12}" == f"{word:>12}"
    assert json.loads(json.dumps({"status": member})) == {"status": word}
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (s TEXT)")
    db.execute("INSERT INTO t VALUES (?)", (member,))
    (back,) = db.execute("SELECT s FROM t").fetchone()
    assert back == word and back == member and type(member)(back) is member


def test_only_ok_and_dry_run_cycles_are_not_failures():
    assert {c for c in CycleStatus if c in OK_CYCLES} == {CycleStatus.OK, CycleStatus.DRY_RUN}
    assert "ok" in OK_CYCLES and "partial" not in OK_CYCLES
