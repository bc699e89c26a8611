"""The names slurm-fair accepts, one pattern each, matched whole (:func:`inputs.fullmatch`).

A name from a user's file or option ends up in a Slurm command's argv, a rendered Slurm file or
a message, so each kind of name has one pattern here that every reader uses (the configuration,
the inventory, render-config, the Slurm writer, the class table). None has ``^``/``$``: they are
only ever matched with ``fullmatch``, which no trailing newline passes.
"""

from __future__ import annotations

import re

#: any Slurm entity name slurm-fair passes to scontrol/sacctmgr (account, QOS, partition)
SLURM_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
#: an account slurm-fair *creates* when it renders a cluster (sacctmgr lowercases names)
ACCOUNT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
#: a Slurm ``ClusterName`` (Slurm lowercases it and allows 40 characters)
CLUSTER = re.compile(r"[a-z][a-z0-9_-]{0,39}")
#: a GPU type as gres.conf and ``--gres=gpu:TYPE`` spell it
GPU_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
#: a node name
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: a device file of gres.conf, with an optional ``[0-3,5]`` range
DEVICE = re.compile(r"/[A-Za-z0-9_./-]*[A-Za-z0-9_]+(\[[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*\])?")
#: a workload class (``fair:class=NAME``, the class table, the configuration's rules)
CLASS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
#: a job-name glob of ``[throughput] name_classes``: printable, no control character
GLOB = re.compile(r"[^\x00-\x1f\x7f]{1,256}")
