"""A real local Slurm cluster for tests and the demo (``slurm-fair testbed up|down|status|env``).

Python API::

    tb = Testbed()            # .testbed/ in the checkout, conf/testbed.toml
    tb.up()                   # idempotent
    subprocess.run(["sinfo"], env=tb.client_env(), check=True)
"""

from .cluster import Status, Testbed, default_config_path, default_dir
from .config import TestbedConfig, TestbedNode, load, validate

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
