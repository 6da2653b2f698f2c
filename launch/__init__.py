"""Cluster launcher: stage commands through NeMo-Run (Slurm from the recipe's cluster: section). See launch/README.md."""
