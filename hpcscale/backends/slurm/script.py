"""What SLURM needs of a job script: its #SBATCH header (job name, shape, time, output file,
partition, account and the site options) and the line that lists the allocation's hosts. The
job body (modules, environment, the launch) is render's; this module is the scheduler's part of
the script (submitit's model: a backend writes its own header), found through
hpcscale.model.registry.SCHEDULERS, so render never imports a backend."""

from __future__ import annotations

from hpcscale.model.run import Run
from hpcscale.model.system import System
from hpcscale.util.shell import Shell, quote, sbatch_value

OUTPUT_PATTERN = "slurm-%j.out"  # the job's own output file in its run directory


def job_name(campaign: str, run_id: str) -> str:
    """Carries campaign and run id, so a lost ledger write can be repaired from squeue/sacct;
    the campaign first, since squeue's NAME column shows only the first 8 characters."""
    return f"{campaign}.hpcscale.{run_id}"


def time_limit(minutes: int) -> str:
    """#SBATCH --time's D-HH:MM:SS."""
    d, rem = divmod(minutes, 24 * 60)
    h, m = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def context(run: Run, system: System, run_dir: str, run_id: str) -> dict[str, object]:
    """What a SLURM job's template sees of its scheduler: the header, the hosts line, and the
    names a site's own header block may use (job_name, time, gpu_option)."""
    return {
        "preamble": preamble(run, system, run_dir, run_id),
        "hostlist": hostlist(run),
        "job_name": job_name(run.campaign, run_id),
        "time": time_limit(run.time_limit_min),
        "gpu_option": system.gpu_option(run.gpus_per_node),
    }


def preamble(run: Run, system: System, run_dir: str, run_id: str) -> list[Shell]:
    """The #SBATCH lines; every value plain characters (sbatch reads them, no shell)."""

    def opt(flag: str, value: object) -> Shell:
        return Shell(f"#SBATCH {flag}={sbatch_value(value)}")

    lines = [
        opt("--job-name", job_name(run.campaign, run_id)),
        opt("--comment", f"hpcscale:{run.campaign}:{run_id}"),
        opt("--nodes", run.nodes),
        opt("--ntasks-per-node", run.tasks_per_node),
        opt("--cpus-per-task", run.threads_per_task),
    ]
    gpu_option = system.gpu_option(run.gpus_per_node)
    if gpu_option:
        lines.append(Shell(f"#SBATCH {sbatch_value(gpu_option)}"))
    lines += [opt("--time", time_limit(run.time_limit_min)),
              opt("--output", f"{run_dir}/{OUTPUT_PATTERN}")]  # fmt: skip
    partition = system.partition_for(run)
    for flag, value in (
        ("--partition", partition),
        ("--account", system.account),
        ("--qos", system.qos),
        ("--constraint", system.constraint),
        ("--reservation", system.reservation),
    ):
        if value:
            lines.append(opt(flag, value))
    if system.exclusive:
        lines.append(Shell("#SBATCH --exclusive"))
    lines += [Shell(f"#SBATCH {sbatch_value(o)}") for o in system.sbatch_options]
    return lines


def hostlist(run: Run) -> Shell:
    """Writes the allocation's hosts to $HPCSCALE_HOSTFILE, one line per rank slot."""
    return Shell(
        'scontrol show hostnames "$SLURM_JOB_NODELIST" | awk -v n='
        f"{quote(run.tasks_per_node)} "
        "'{for (i = 0; i < n; i++) print}' > \"$HPCSCALE_HOSTFILE\""
    )
