"""The one exception tree of slurm-fair.

Every error a user can cause or meet derives from :class:`SlurmFairError` and carries the exit
code the CLI returns for it. Code deep inside the package raises; only ``cli.main`` turns an
exception into a message and an exit code (no ``sys.exit`` anywhere else), so library users and
tests see real exceptions and the command line never shows a traceback for a user mistake.

Exit codes:
    1  an operational failure (Slurm unreachable, solver failed, lock held, ...)
    2  a user mistake (bad input file, bad configuration, bad option)
"""

from __future__ import annotations

from dataclasses import dataclass


class SlurmFairError(Exception):
    """Base of every error slurm-fair reports to a user."""

    exit_code: int = 1

    def message(self) -> str:
        """The text shown to the user, without traceback."""
        return str(self)


# --- user mistakes (exit 2) ---------------------------------------------------------------


class UserError(SlurmFairError):
    """Something the user gave us is wrong; nothing was changed."""

    exit_code = 2


def printable(value: object) -> str:
    """``str(value)`` with every unprintable character (newline, tab, escape, U+2028...) written as
    its escape: a name taken from user input cannot split a message into two lines or move
    the terminal's cursor."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


@dataclass(frozen=True)
class Finding:
    """One problem found in an input: where (file, key/job, field) and what."""

    where: str
    what: str

    def __str__(self) -> str:
        what = printable(self.what)
        return f"{printable(self.where)}: {what}" if self.where else what


class InputError(UserError):
    """An input file (PROBLEM.json, a trace, a throughput table) is invalid.

    Carries *all* problems found, so the user fixes the file once, not error by error.
    """

    def __init__(self, source: str, problems: list[Finding] | list[str]):
        self.source = source
        self.problems = [p if isinstance(p, Finding) else Finding("", p) for p in problems]
        super().__init__(self.message())

    #: what is invalid, in the message's first line
    kind = "input"

    def message(self) -> str:
        n = len(self.problems)
        source = printable(self.source)
        if n == 1:  # one mistake, one line: the file, where in it, and what
            return f"{source}: invalid {self.kind}: {self.problems[0]}"
        head = f"{source}: invalid {self.kind} ({n} problem{'s' if n != 1 else ''})"
        return "\n".join([head] + [f"  - {p}" for p in self.problems])


class ConfigError(InputError):
    """The configuration file is invalid (all problems at once, each with its key)."""

    kind = "configuration"


# --- operational failures (exit 1) -----------------------------------------------------------


class SlurmError(SlurmFairError):
    """Talking to Slurm failed."""


class SlurmUnavailable(SlurmError):
    """Slurm cannot be read at all (slurmctld down, command missing, timeout)."""


class SlurmCommandError(SlurmError):
    """A Slurm command ran and failed."""

    def __init__(self, argv: list[str], returncode: int, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        super().__init__(f"{' '.join(argv[:2])} failed (exit {returncode}): {self.stderr}")


class JobGone(SlurmError):
    """The job ended or vanished between read and write: callers usually skip it."""


class SlurmOutputError(SlurmError):
    """Slurm printed something we cannot parse (a format change between versions)."""


class SolverError(SlurmFairError):
    """The optimisation did not reach a usable solution (status, time limit, crash)."""

    def __init__(self, message: str, lp_file: str | None = None, status: str | None = None):
        self.lp_file = lp_file
        self.status = status
        if lp_file:
            message += f" (model kept in {lp_file})"
        super().__init__(message)


class LockHeld(SlurmFairError):
    """Another controller holds the cluster lock."""


class StateWriteError(SlurmFairError):
    """The state store or the audit log cannot be written (a full disk, a read-only file
    system): nothing more is changed in Slurm, since a change that is not recorded could not
    be undone."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"cannot write {path}: {reason}; nothing more is changed in Slurm until it can be")


class TestbedError(SlurmFairError):
    """The local testbed cannot be brought up, down, or read."""

    __test__ = False  # not a pytest test class despite the name
