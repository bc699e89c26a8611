"""Hostile options of the controller's commands (run, explain, revert, report, metrics) and
hostile time expressions: exit 2, one message naming the option, no traceback, and nothing
created or changed (a misspelt state_dir never becomes a new empty store).

Every command's port is replaced by one that fails the test when reached: a refused option must
be refused before Slurm is asked anything. Run: ``pytest tests/fuzz``.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.lock import ControllerLock
from slurm_fair.controller.state import StateStore
from slurm_fair.errors import UserError
from slurm_fair.report.window import EARLIEST, LATEST, parse_time, window
from slurm_fair.slurm.fake import FakeSlurm
from slurm_fair.slurm.model import Account, Qos
from controller.builders import cluster
from .harness import assert_refused, assert_untouched, run, snapshot_dir

NOW = datetime(2026, 1, 1, 12, 0, 0)
#: the commands whose module makes a port (metrics uses report's)
PORTS = ["run", "explain", "revert", "report", "snapshot"]


@pytest.fixture(scope="module")
def no_port() -> Iterator[None]:
    """Every controller command's port fails the test when reached."""
    class Unusable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the option was accepted and the command went on to Slurm ({name})")

    def reached(*a: Any, **k: Any) -> Any:
        return Unusable()

    with contextlib.ExitStack() as stack:
        for mod in PORTS:
            stack.enter_context(mock.patch(f"slurm_fair.commands.{mod}.make_port", reached))
        yield


def refused(argv: list[str], *needles: str) -> None:
    """``argv`` (with a private configuration whose state_dir does not exist) is refused and
    creates nothing: not the state_dir, not a store, not a lock."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "sf.toml"
        cfg.write_text(f'[controller]\nstate_dir = "{tmp}/state"\naudit_log = "{tmp}/audit.jsonl"\n')
        before = snapshot_dir(Path(tmp))
        rc, out, err = run([argv[0], "--config", cfg, *argv[1:]])
        assert_refused(rc, err, *needles)
        assert_untouched(Path(tmp), before)
        assert not (Path(tmp) / "state").exists()


# --- the probes of issue 18, one by one --------------------------------------------------------


@pytest.mark.parametrize("argv, needle", [
    (["run", "--once", "--loop"], "mutually exclusive"),
    (["run", "--loop", "--interval", "nan"], "--interval"),
    (["run", "--loop", "--interval", "inf"], "--interval"),
    (["run", "--loop", "--interval", "0.001"], "--interval"),
    (["run", "--interval", "60"], "--interval needs --loop"),
    (["run", "--once", "--metrics-port", "9100"], "--metrics-port needs --loop"),
    (["run", "--loop", "--metrics-addr", ""], "--metrics-addr"),
    (["run", "--loop", "--metrics-addr", "127.0.0.1\nx"], "--metrics-addr"),
    (["explain", "１２"], "not a Slurm job id"),
    (["explain", "12\n"], "not a Slurm job id"),
    (["explain", "12"], "no controller state at"),
    (["revert"], "no controller state at"),
    (["revert", "--dry-run"], "no controller state at"),
    (["report", "--since", "99999999999d"], "--since"),
    (["report", "--since", "0001-01-01"], "out of range"),
    (["report", "--until", "9999-12-31"], "out of range"),
    (["report", "--since", "１d"], "--since"),
    (["report", "--since", ""], "--since"),
    (["report", "--since", "7d\n"], "--since"),
    (["report", "--since", "1e400d"], "--since"),
    (["metrics", "--since", "10000000d"], "--since"),
    (["report", "--tenant", "a\nb"], "--tenant"),
    (["report", "--tenant", "a b"], "not a Slurm account name"),
])
def test_named_probes_are_refused_and_create_nothing(no_port: None, argv: list[str], needle: str) -> None:
    refused(argv, needle)


def test_a_dry_run_creates_no_state_store(tmp_path: Path) -> None:
    """``run --dry-run`` changes nothing, the state store included (it reads history read-only)."""
    from controller.conftest import make_config

    fake = FakeSlurm(slurm_version="22.05", nodes=cluster(v100=2, k80=2),
                     accounts=[Account("alice", 1.0, ("normal",), "normal")], qos=[Qos("normal")], now=NOW)
    fake.submit("alice", "--gres=gpu:1", hold=False)
    res = run_cycle(fake, make_config(tmp_path), dry_run=True)
    assert res.status == "dry-run", res.message
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("opener", [StateStore.in_dir, lambda d: ControllerLock(d).acquire()])
def test_a_state_dir_that_is_a_file_is_one_message(tmp_path: Path, opener: Any) -> None:
    """Also when it became a file after validation: a UserError naming it, not a traceback."""
    (tmp_path / "state").write_text("")
    with pytest.raises(UserError, match="state_dir"):
        opener(tmp_path / "state")
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "state.sqlite").write_bytes(b"not a database, not at all" * 100)
    with pytest.raises(UserError, match="state.sqlite"):
        StateStore.in_dir(tmp_path / "db")


# --- fuzz: time expressions --------------------------------------------------------------------

#: durations beyond the window's range (before 1970 counted back from 2026)
HUGE_AGO = st.builds(lambda n, u: f"{n}{u}", st.integers(10**11, 10**12), st.sampled_from("smhdw"))
NON_ASCII_DIGITS = st.builds(lambda d, u: f"{d}{u}", st.text(alphabet="０１２３４５６７８９٠١٢٣٤٥٦٧٨٩", min_size=1, max_size=4),
                             st.sampled_from("dhmsw"))
OUT_OF_RANGE_DATES = st.one_of(st.dates(max_value=datetime(1969, 12, 31).date()),
                               st.dates(min_value=datetime(9000, 1, 2).date())).map(lambda d: d.isoformat())
CONTROL = st.builds(lambda a, c: a + c, st.sampled_from(["7d", "2024-05-01", "now", ""]),
                    st.sampled_from("\n\r\x00\x1b\x7f\u2028"))
HOSTILE_TIMES = st.one_of(HUGE_AGO, NON_ASCII_DIGITS, OUT_OF_RANGE_DATES, CONTROL,
                          st.sampled_from(["", " ", "nan d", "infd", "-1d", "1e400d", "@1700000000", "last tuesday",
                                           "2024-13-01", "2024-05-01T25:00", "7 days"]))


@settings(max_examples=scaled(300), deadline=None)
@given(st.text(max_size=30))
def test_any_time_text_is_a_time_in_range_or_a_user_error(text: str) -> None:
    try:
        value = parse_time(text, NOW, "--since")
    except UserError as exc:
        assert "--since" in exc.message() and "\n" not in exc.message()
        return
    assert EARLIEST <= value <= LATEST


@settings(max_examples=scaled(150), deadline=None)
@given(HOSTILE_TIMES, st.sampled_from(["--since", "--until"]))
def test_hostile_times_are_refused_naming_the_option(text: str, option: str) -> None:
    with pytest.raises(UserError) as exc:
        window(text if option == "--since" else None, text if option == "--until" else None, 7.0, NOW)
    assert option in exc.value.message() and "\n" not in exc.value.message()


@settings(max_examples=scaled(40), deadline=None)
@given(HOSTILE_TIMES, st.sampled_from(["report", "metrics"]))
def test_hostile_since_through_the_command_line(no_port: None, text: str, command: str) -> None:
    refused([command, "--since", text], "--since")


@pytest.mark.parametrize("days", [math.nan, math.inf, 1e300, 1e12, 10**6])
def test_a_huge_window_days_is_refused(days: float) -> None:
    """Validated in the configuration (finite, at most 36500); the window holds on its own too."""
    with pytest.raises(UserError):
        window(None, None, days, NOW)


# --- fuzz: options ----------------------------------------------------------------------------


@settings(max_examples=scaled(60), deadline=None)
@given(st.one_of(st.floats().filter(lambda x: not 1 <= x <= 86400).map(repr),
                 st.text(max_size=8).filter(lambda s: not _is_float(s))))
def test_run_interval_outside_1_to_a_day_is_refused(no_port: None, value: str) -> None:
    refused(["run", "--loop", "--interval", value], "--interval")


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


@settings(max_examples=scaled(40), deadline=None)
@given(st.one_of(st.integers().filter(lambda n: not 0 <= n <= 65535).map(str), st.text(max_size=6).filter(
    lambda s: not s.strip().lstrip("+-").isdigit())))
def test_run_metrics_port_outside_the_port_range_is_refused(no_port: None, value: str) -> None:
    refused(["run", "--loop", "--metrics-port", value], "--metrics-port")


@settings(max_examples=scaled(60), deadline=None)
@given(st.text(max_size=12).filter(lambda s: s == "" or any(not (c.isascii() and (c.isalnum() or c in ".:-"))
                                                             for c in s)))
def test_run_metrics_addr_that_is_no_host_is_refused(no_port: None, value: str) -> None:
    refused(["run", "--loop", "--metrics-addr", value], "--metrics-addr")


@settings(max_examples=scaled(80), deadline=None)
@given(st.text(max_size=12).filter(lambda s: not (s.strip(" ").replace("_", "", 1).isascii()
                                                  and s.strip(" ").replace("_", "", 1).isdigit())))
def test_explain_a_job_id_that_is_none_is_refused(no_port: None, value: str) -> None:
    refused(["explain", "--", value], "not a Slurm job id")


@settings(max_examples=scaled(30), deadline=None)
@given(st.sampled_from(["report", "metrics"]), st.sampled_from(["--since", "--until"]), HOSTILE_TIMES)
def test_report_and_metrics_options(no_port: None, command: str, option: str, text: str) -> None:
    if command == "metrics" and option == "--until":
        option = "--since"  # metrics has no --until
    refused([command, option, text], option)


@settings(max_examples=scaled(40), deadline=None)
@given(st.text(max_size=12).filter(lambda s: s not in ("alice", "bob")),
       st.sampled_from(["table", "json", "csv"]))
def test_report_an_unknown_tenant_is_one_message(text: str, fmt: str) -> None:
    """``--tenant`` is checked against the window's records and Slurm's accounts (the tiny
    case's fake port): anything else, newlines and all, is one message and writes nothing."""
    from report import tiny

    with tempfile.TemporaryDirectory() as tmp, \
            mock.patch("slurm_fair.commands.report.make_port", lambda config: tiny.FakePort()):
        cfg = Path(tmp) / "sf.toml"
        cfg.write_text(f'[controller]\nstate_dir = "{tmp}/state"\n')
        out = Path(tmp) / "r.txt"
        before = snapshot_dir(Path(tmp))
        rc, _, err = run(["report", "--config", cfg, "--since", "2024-05-01", "--until", "2024-05-01T10:00:00",
                          "--format", fmt, "-o", out, "--tenant", text])
        assert_refused(rc, err, "tenant")  # unknown, or not an account name at all (before Slurm is read)
        assert_untouched(Path(tmp), before)


# --- issue 18 review: a state file that is not the controller's; unknown accounts ------------

def _foreign(path: Path, kind: str) -> None:
    import sqlite3
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("hello\n")
    else:
        con = sqlite3.connect(path)
        if kind == "app-id":
            con.execute("PRAGMA application_id = 1234")
        con.execute("CREATE TABLE mydata (x)")
        con.execute("INSERT INTO mydata VALUES (42)")
        con.commit()
        con.close()


@pytest.mark.parametrize("kind", ["empty", "text", "foreign", "app-id"])
@pytest.mark.parametrize("argv", [["run", "--once"], ["run", "--once", "--dry-run"], ["revert"],
                                  ["revert", "--dry-run"], ["explain", "1"], ["report"], ["metrics"]])
def test_a_state_file_that_is_not_a_store_is_refused_and_untouched(no_port: None, kind: str, argv: list[str]) -> None:
    """Refused before Slurm is asked (the port fails the test when reached) and never written:
    SQLite would otherwise open anything, and the writer add its tables to it."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "sf.toml"
        cfg.write_text(f'[controller]\nstate_dir = "{tmp}/state"\naudit_log = "{tmp}/audit.jsonl"\n')
        _foreign(Path(tmp) / "state" / "state.sqlite", kind)
        before = snapshot_dir(Path(tmp))
        rc, _, err = run([*argv, "--config", cfg])
        assert_refused(rc, err, "state.sqlite", "not a slurm-fair state store")
        assert_untouched(Path(tmp), before)


def test_a_store_written_before_the_application_id_is_still_read(tmp_path: Path) -> None:
    """Old stores carry no application id: the ``meta`` table recognises them, and the writer
    stamps them."""
    import sqlite3
    from slurm_fair.controller.state.identity import APPLICATION_ID, check_store
    path = tmp_path / "state.sqlite"
    StateStore(path).close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA application_id = 0")
    con.close()
    assert check_store(path)
    StateStore.read_only(path).close()
    StateStore(path).close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    con.close()


def test_an_unknown_controller_account_is_warned_with_a_suggestion(tmp_path: Path) -> None:
    from slurm_fair.config import load
    cfg = tmp_path / "sf.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path}/state"\naudit_log = "{tmp_path}/a.jsonl"\n'
                   'accounts = ["physcis", "physics"]\n')
    fake = FakeSlurm.from_recording("testbed-22.05")
    res = run_cycle(fake, load(cfg), dry_run=True)
    said = [w for w in res.warnings if "physcis" in w]
    assert len(said) == 1 and "did you mean 'physics'" in said[0], res.warnings
    assert not any("names no Slurm account" in w for w in res.warnings)
    assert res.exit_code == 0
