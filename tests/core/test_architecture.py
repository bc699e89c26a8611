"""docs/architecture.md lists every module of the package, so the one-page map cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _listed() -> set[str]:
    """Module paths (relative to ``slurm_fair/``) the "Modules" section names: a bullet opening
    with a package (```controller/plan/`:``) sets where its bare ``name.py`` entries live, and a
    nested bullet inherits its parent's package."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    items: list[tuple[int, str]] = []
    for line in section.splitlines():
        m = re.match(r"(\s*)- (.*)", line)
        if m:
            items.append((len(m.group(1)), m.group(2)))
        elif items and line.strip():
            items[-1] = (items[-1][0], items[-1][1] + " " + line.strip())
    out: set[str] = set()
    stack: list[tuple[int, str]] = []
    for indent, body in items:
        while stack and stack[-1][0] >= indent:
            stack.pop()
        opening = re.match(r"`([\w/]+/)`", body)
        package = opening.group(1) if opening else (stack[-1][1] if stack else "")
        stack.append((indent, package))
        for name in re.findall(r"`([\w/]+\.py)`", body):
            out.add(name if "/" in name else package + name)
    return out


def test_every_module_is_on_the_architecture_page():
    modules = {
        str(p.relative_to(REPO / "slurm_fair")) for p in (REPO / "slurm_fair").rglob("*.py")
        if p.name != "__init__.py" or p.parent.name in {"policies", "state", "plan"}
    }
    listed = _listed()
    assert sorted(modules - listed) == []
    assert sorted(listed - modules) == []
