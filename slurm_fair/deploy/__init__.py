"""Deployment: ``slurm-fair render-config`` (inventory, billing weights, rendering of templates/)."""
