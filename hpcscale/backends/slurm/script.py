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


# MASTER_PORT = PORT_BASE + (the job's own id) % PORT_SPAN: every array task has its own
# SLURM_JOB_ID, so runs of one array, and any jobs fewer than PORT_SPAN ids apart, never share
# a port on a node (29500, torch's default, is the usual "Address already in use"). The range
# lies below Linux's ephemeral ports (32768-60999), which outgoing connections take.
PORT_BASE = 20000
PORT_SPAN = 10000


def master_port(job_id: int) -> int:
    """The rendezvous port of a job: what the `rendezvous` lines compute in the script."""
    return PORT_BASE + job_id % PORT_SPAN


def rendezvous(run: Run, system: System) -> list[Shell]:
    """MASTER_ADDR: the allocation's first host as SLURM knows its address (its NodeAddr; a
    node name need not resolve); a job whose first host has none stops at once saying so, never
    a fallback to localhost that leaves the other nodes' ranks waiting. MASTER_PORT from the
    job id (master_port)."""
    return [
        Shell("# where the ranks meet (torch): the first host's NodeAddr, a port from the job id"),
        # awk reads to the end: `head` would close the pipe early, and under pipefail the
        # writer's SIGPIPE would end the job
        Shell('HPCSCALE_HEAD="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | awk \'NR == 1\')"'),
        Shell(
            'MASTER_ADDR="$( (scontrol show node "$HPCSCALE_HEAD" 2>/dev/null || true) '
            "| tr ' ' '\\n' | awk -F= '$1 == \"NodeAddr\" && !n++ {print $2}')\""
        ),
        Shell(
            'if [ -z "$MASTER_ADDR" ]; then echo "hpcscale: no address for $HPCSCALE_HEAD, the '
            'first host of job $SLURM_JOB_ID (scontrol show node): its ranks cannot meet" >&2; '
            "exit 2; fi"
        ),
        Shell(f"MASTER_PORT=$(( {PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN} ))"),
        Shell("export MASTER_ADDR MASTER_PORT"),
    ]
