"""The ``fair:`` tags of a job's comment (user text: parsed defensively)."""

from __future__ import annotations

import re

_TAG = re.compile(r"(?<![^\s,;])fair:([A-Za-z][A-Za-z0-9_.-]{0,31})(?:=([^\s,;]{0,256}))?(?![^\s,;])")
MAX_TAGS = 16


def parse_tags(comment: str) -> dict[str, str]:
    """``fair:class=resnet50 fair:tput=12.5 fair:preemptible`` -> tags; the one parser of them.

    Only well-formed ``fair:`` tokens separated by whitespace, ``,`` or ``;`` count; anything
    else in the comment is ignored. Keys are lower-cased; the first occurrence of a key wins;
    at most :data:`MAX_TAGS`. A bare flag is present with the value ``""``: it has no value, and
    inventing one (``"true"``) would turn a bare ``fair:class`` into a class named ``true``.
    Values are kept as text: their meaning is :mod:`slurm_fair.estimates.tags`' business.
    """
    tags: dict[str, str] = {}
    for m in _TAG.finditer(comment or ""):
        key = m.group(1).lower()
        if key in tags:
            continue
        tags[key] = m.group(2) or ""
        if len(tags) >= MAX_TAGS:
            break
    return tags
