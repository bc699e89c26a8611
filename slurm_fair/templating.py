"""The one place that finds ``templates/`` and builds jinja2 environments over it.

The testbed, the deployment renderer and the HTML report share the same template directory, so
a packaged install and a source checkout find all of them the same way:

1. ``$SLURM_FAIR_TEMPLATES``,
2. ``templates/`` beside the ``slurm_fair`` package (a source checkout or an editable install),
3. ``<sys.prefix>/share/slurm-fair/templates`` (where ``pip install`` of the wheel puts the data
   files), then ``<user base>/share/slurm-fair/templates`` (``pip install --user``).

Every environment uses ``StrictUndefined``: a missing variable is an error, never an empty
string silently written into a slurm.conf.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

import jinja2

TEMPLATES_ENV = "SLURM_FAIR_TEMPLATES"


def repo_root() -> Path:
    """The directory holding the ``slurm_fair`` package (the repo root in a source checkout)."""
    return Path(__file__).resolve().parents[1]


def candidates() -> list[Path]:
    """Where templates are looked for, in order."""
    out = [Path(env)] if (env := os.environ.get(TEMPLATES_ENV)) else []
    prefixes = [Path(sys.prefix), Path(site.getuserbase())]
    return out + [repo_root() / "templates"] + [p / "share" / "slurm-fair" / "templates" for p in prefixes]


def templates_dir(marker: str) -> Path | None:
    """The first candidate directory holding ``marker`` (a template path relative to it)."""
    for c in candidates():
        if (c / marker).is_file():
            return c
    return None


def not_found(marker: str) -> str:
    """What a command says when no candidate holds ``marker``: where it looked, and the way out."""
    return (f"cannot find the templates ({marker}); looked in "
            + ", ".join(str(c) for c in candidates())
            + f". Set ${TEMPLATES_ENV} to the templates directory.")


def environment(directory: Path, *, autoescape: bool) -> jinja2.Environment:
    """A strict environment over ``directory``; ``autoescape`` for HTML, off for config files,
    shell and Lua (whose values are validated before they reach a template instead)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=not autoescape,
        lstrip_blocks=not autoescape,
        keep_trailing_newline=True,
        autoescape=autoescape,
    )
