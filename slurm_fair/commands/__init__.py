"""One module per CLI command; ``slurm_fair.cli`` assembles them into the group.

Keeping each command in its own module lets the commands grow independently and keeps
``cli.py`` thin (pip-tools' ``scripts/`` layout).
"""
