"""What the ``fair:`` comment tags mean.

Tags are parsed once, by the adapter (:func:`slurm_fair.slurm.parse.tags.parse_tags`, into
:attr:`SlurmJob.tags`): a bare flag (``fair:preemptible``) is present with the value ``""``.
Comments are user text: a value that is not a sane class name or a finite positive number is
ignored here.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..inputs import fullmatch
from ..slurm.model import SlurmJob
from ..names import CLASS

#: a reported throughput above this is not believed
MAX_TPUT = 1e9


def tag_class(tags: Mapping[str, str]) -> str | None:
    """A ``fair:class`` value fit to be a class name, or None."""
    name = str(tags.get("class", "")).strip()
    return name if fullmatch(CLASS, name) else None


def tag_tput(tags: Mapping[str, str]) -> float | None:
    """A believable reported throughput, or None (NaN, inf, negatives, huge, text: ignored)."""
    try:
        v = float(str(tags.get("tput", "")).strip())
    except ValueError:
        return None
    return v if math.isfinite(v) and 0 < v < MAX_TPUT else None


def preemptible(job: SlurmJob) -> bool:
    """Opted in to round-based time-sharing: ``--requeue`` *and* a ``fair:preemptible`` tag."""
    tags = job.tags
    return bool(job.requeue) and "preemptible" in tags and tags["preemptible"] in ("", "1", "true", "yes")


def plugin_typed(job: SlurmJob) -> bool:
    """The submit plugin typed this job's GPU request (``fair:auto``): the type is ours to change."""
    return "auto" in job.tags
