"""slurm-fair: heterogeneity-aware fair GPU sharing for Slurm."""

__version__ = "0.1.0"
