"""Where a command's output goes: stdout, or ``-o/--output FILE`` written atomically.

One home for the output rule of docs/cli.md, so every command that writes a file writes it the
same way (a reader never sees half a file: cron jobs and node_exporter read these files).
"""

from __future__ import annotations

import io
import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .. import atomic
from ..errors import UserError


def write_output(text: str, output: str | None) -> None:
    """To stdout, or atomically to ``output`` (:func:`slurm_fair.atomic.write_text`: never
    half a file, never over a device or a directory)."""
    if not output:
        click.echo(text, nl=False)
        return
    try:
        atomic.write_text(output, text)
    except atomic.AtomicWriteError as exc:
        raise UserError(f"--output {exc}") from None


def json_text(doc: Any) -> str:
    """The JSON every ``--json`` document is written as (indented, one trailing newline)."""
    return json.dumps(doc, indent=2, default=str) + "\n"


def table_text(table: Table) -> str:
    """A rich table as plain text (no colours), for ``-o FILE`` without ``--json``."""
    buf = io.StringIO()
    Console(file=buf, width=120, no_color=True, force_terminal=False).print(table)
    return buf.getvalue()


def table_or_json(table: Table, doc: Any, as_json: bool, output: str | None) -> None:
    """A command whose output is a table for people and a JSON document for programs
    (``simulate``, ``testbed replay``): stdout (or ``output``) carries one of them; with
    ``--json`` the table still reaches the terminal, on stderr."""
    if as_json:
        Console(stderr=True).print(table)
        write_output(json_text(doc), output)
    elif output:
        write_output(table_text(table), output)
    else:
        Console().print(table)
