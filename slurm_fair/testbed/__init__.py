"""A real local Slurm cluster for tests and the demo (``slurm-fair testbed up|down|status|env``).

Python API::

    tb = Testbed()            # .testbed/ in the checkout, conf/testbed.toml
    tb.up()                   # idempotent
    subprocess.run(["sinfo"], env=tb.client_env(), check=True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import Testbed
    from .config import TestbedConfig, TestbedNode, default_config_path, load, validate
    from .daemons import Status
    from .layout import default_dir

# Imported on first use (PEP 562): every command's option list needs ``rootfs.VERSIONS``, and
# importing this package must not cost ``slurm-fair solve`` the whole testbed (~0.15 s).
_HOMES = {"Testbed": "cluster", "TestbedConfig": "config", "TestbedNode": "config",
          "default_config_path": "config", "load": "config", "validate": "config",
          "Status": "daemons", "default_dir": "layout"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)


__all__ = [
    "Status",
    "Testbed",
    "TestbedConfig",
    "TestbedNode",
    "default_config_path",
    "default_dir",
    "load",
    "validate",
]
