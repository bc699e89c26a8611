"""A real local Slurm cluster for tests and the demo (``slurm-fair testbed up|down|status|env``).

Python API::

    tb = Testbed()            # .testbed/ in the checkout, conf/testbed.toml
    tb.up()                   # idempotent
    subprocess.run(["sinfo"], env=tb.client_env(), check=True)
"""

from .cluster import Testbed
from .config import TestbedConfig, TestbedNode, default_config_path, load, validate
from .daemons import Status
from .layout import default_dir

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
