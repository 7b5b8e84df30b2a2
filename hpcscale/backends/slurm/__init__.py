"""The SLURM backend: job arrays per resource shape (submit), sacct/squeue queries (query)."""
