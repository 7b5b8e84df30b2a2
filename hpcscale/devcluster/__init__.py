"""The local SLURM cluster behind `hpcscale cluster`; the SLURM backend reaches it only through
SLURM_CONF and PATH, as it would a real one."""
