"""slurm-fair: heterogeneity-aware fair GPU sharing for Slurm."""

#: the one place the version is written (setup.cfg reads it; ``slurm-fair --version`` prints it)
__version__ = "0.2.0"
