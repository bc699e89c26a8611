"""Running Slurm's commands: argv lists, a timeout on every call, bounded retries, typed errors.

Every Slurm command slurm-fair runs goes through :class:`Runner`, so the rules hold everywhere:

* argv lists only, never a shell: user text (job comments, names) can never become code;
* the environment (``SLURM_CONF``...) and the command directory are constructor arguments, so
  one process can talk to several clusters (the tests talk to a private testbed);
* a timeout on every call, and a few retries for the failures Slurm itself calls transient
  (``Socket timed out``, ``Unable to contact slurm controller``) with a short back-off;
* failures become the error tree of :mod:`slurm_fair.errors`: :class:`SlurmUnavailable` when
  Slurm cannot be reached at all, :class:`JobGone` when the job ended between read and write,
  :class:`SlurmCommandError` otherwise.

The runner also keeps the wall time spent inside Slurm commands (``stats``), which the snapshot
benchmark uses to separate Slurm's share from slurm-fair's own.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import JobGone, SlurmCommandError, SlurmUnavailable

#: stderr/stdout fragments of failures worth retrying (the controller was busy or restarting)
TRANSIENT = re.compile(
    r"socket timed out|unable to contact slurm controller|slurm_receive_msg|"
    r"connection refused|resource temporarily unavailable|slurmctld.*(busy|not responding)|"
    r"communications connection failure|zero bytes were transmitted|"
    r"unable to connect to database|slurmdbd.*(down|not responding)|send/recv",
    re.IGNORECASE,
)

#: fragments meaning the job is not there (any more) or no longer pending: not an error
JOB_GONE = re.compile(
    r"invalid job id specified|job has already finished|already completed|"
    r"job is no longer pending|not pending|job.*not found|job is not running|"
    r"requested operation is presently disabled|job/step already completing or completed",
    re.IGNORECASE,
)


@dataclass
class RunStats:
    """Wall time and number of Slurm command calls (for the benchmark and the logs)."""

    calls: int = 0
    seconds: float = 0.0
    by_command: dict[str, float] = field(default_factory=dict)
    #: commands may run side by side (a snapshot's reads, two job-list updates)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, command: str, seconds: float) -> None:
        with self._lock:
            self.calls += 1
            self.seconds += seconds
            self.by_command[command] = self.by_command.get(command, 0.0) + seconds

    def reset(self) -> None:
        with self._lock:
            self.calls, self.seconds, self.by_command = 0, 0.0, {}


class Runner:
    """Runs one Slurm command at a time with timeout, retries and error mapping.

    ``env`` is merged over the process environment (``None`` values remove a variable);
    ``bin_dir`` (empty: ``PATH``) says where Slurm's commands are.
    """

    def __init__(
        self,
        env: Mapping[str, str | None] | None = None,
        bin_dir: str | os.PathLike[str] = "",
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.5,
    ) -> None:
        merged = dict(os.environ)
        # The parsers need ISO dates and C-locale output, whatever the caller's shell set
        # (SLURM_TIME_FORMAT=relative would print "Tomorr 12:00"); an explicit env wins.
        merged.update({"LC_ALL": "C", "SLURM_TIME_FORMAT": "standard"})
        for key, value in (env or {}).items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        self.env = merged
        self.bin_dir = str(bin_dir or "")
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.stats = RunStats()

    def _argv(self, argv: Sequence[str]) -> list[str]:
        argv = [str(a) for a in argv]
        if self.bin_dir and os.sep not in argv[0]:
            argv[0] = str(Path(self.bin_dir) / argv[0])
        return argv

    def run(self, argv: Sequence[str], job_id: str | None = None) -> str:
        """Run ``argv`` and return its stdout; raise the typed error on failure.

        With ``job_id`` set, a "no such job / not pending" answer raises :class:`JobGone`.
        """
        full = self._argv(argv)
        name = Path(full[0]).name
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                proc = subprocess.run(
                    full,
                    env=self.env,
                    capture_output=True,
                    timeout=self.timeout_s,
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
            except FileNotFoundError:
                raise SlurmUnavailable(
                    f"Slurm command not found: {full[0]} (install Slurm or set [slurm] bin_dir)"
                ) from None
            except PermissionError as exc:
                raise SlurmUnavailable(f"cannot run {full[0]}: {exc.strerror}") from None
            except subprocess.TimeoutExpired:
                self.stats.add(name, time.perf_counter() - started)
                if attempt < self.retries:
                    attempt += 1
                    time.sleep(self.backoff_s * attempt)
                    continue
                raise SlurmUnavailable(
                    f"{name} did not answer within {self.timeout_s:g} s "
                    f"({attempt + 1} attempt{'s' if attempt else ''})"
                ) from None
            self.stats.add(name, time.perf_counter() - started)
            out = proc.stdout.decode("utf-8", errors="replace")
            err = proc.stderr.decode("utf-8", errors="replace")
            if proc.returncode == 0 and not _is_error_on_success(name, err):
                return out
            text = f"{err}\n{out}".strip()
            if job_id is not None and JOB_GONE.search(text):
                raise JobGone(f"job {job_id} is gone or no longer pending: {_first_line(text)}")
            if TRANSIENT.search(text):
                if attempt < self.retries:
                    attempt += 1
                    time.sleep(self.backoff_s * attempt)
                    continue
                raise SlurmUnavailable(
                    f"cannot reach Slurm ({name}, {attempt + 1} attempts): {_first_line(text)}"
                )
            raise SlurmCommandError(full, proc.returncode, text)


def _is_error_on_success(name: str, err: str) -> bool:
    """sacctmgr exits 0 on some failures and only says so on stderr."""
    return name == "sacctmgr" and bool(re.search(r"^\s*(error|fatal)\b", err, re.I | re.M))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()
