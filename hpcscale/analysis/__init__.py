"""Scaling analysis: pure functions over the collector's tidy DataFrame (one row per run).

Nothing here reads files, plots or prints; the report formats what these functions return.

Input frame contract (column names are exact; `frame.normalise` fills the optional ones):

Run fields (from `run.json`)
    run_id, campaign, system, program, model, scaling ('weak' | 'strong' | 'none'), device
    ('cpu' | 'gpu'), nodes, tasks_per_node, threads_per_task, gpus_per_node, replicas_per_task,
    ranks, batch_per_rank, global_batch, strategy (one of model.registry.STRATEGIES),
    cross_device_ops
    ('nccl' | 'reduce_to_one' | 'hierarchical_copy' | None), mpi, fusion_threshold_mb,
    cycle_time_ms, fp16_allreduce, hierarchical_allreduce, mixed_precision, launcher, epochs,
    timeline, mark_cycles, time_limit_min, repeat
    args.<name>     one column per workload argument (e.g. args.lr; None where a run has none)

A cell is the runs equal in every run field and workload argument but `repeat`
(`vocab.cell_keys`): runs that differ in args.lr or epochs are never folded as repeats.

Metrics (from `metrics.json`)
    epoch_time_s    mean per-epoch wall time, s
    images_per_s    global throughput, images/s (images per epoch / epoch time)
    fit_time_s      whole `fit`, s
    epoch_times_s   list of per-epoch wall times, s
    losses          per-epoch losses. Canonical form, as in metrics.json: a dict mapping a loss
                    name to its per-epoch list, e.g. {"d_loss": [...], "g_loss": [...]}. Also
                    accepted: a list of per-epoch dicts, or a plain list of floats (name "loss").
    val_accuracy    list of per-epoch validation accuracies (optional)
    param_count     trainable + non-trainable parameters of all networks
    dataset_size    images in the data set (used for images/s only when images_per_s is missing)

Timeline (per epoch, s; NaN when the run has no timeline)
    comm_s, wait_for_data_s, wait_for_other_tensor_data_s, waits_in_comm_s (the two waits
    unioned in time, inside communication), negotiate_s, transport_s,
    allreduce_bytes_per_step (bytes), bus_bandwidth_gbs (1e9 bytes/s)

Exact view (optional, per epoch, s)
    exact_compute_s, exact_overlap_s, exact_exposed_comm_s

Derived axis column added by `frame.normalise`: gpus = nodes * gpus_per_node.

"The scaled axis" is `nodes`, `ranks` or `gpus`; runs sharing every other setting form a group
whose baseline is the cell with the smallest axis value (see `baseline.group_keys`).

Column names, types, labels and units are defined once in `hpcscale.model.vocab`.

Modules: frame (contract, validation), baseline (grouping, repeats, baselines), sweeps (which
cells a knob sweep or a scaling line holds), scaling (throughput, speedup, efficiency,
overhead), overlap (seed 001's compute/communication split), models (Amdahl, Karp-Flatt,
Gustafson, ring vs parameter-server bytes), extrapolate (predictions), targets (time to target
loss / accuracy plateau, and the report's choice of loss and target), references (campaign
reference checks, in the campaign's schema), tables (display frames in the seeds' shapes).
"""

from __future__ import annotations

# The column names are defined once, in the shared vocabulary; re-exported for existing importers.
from hpcscale.model.vocab import (
    EXACT_COLUMNS,
    LIST_COLUMNS,
    METRIC_COLUMNS,
    TABLE_RUN_FIELDS,
    TIMELINE_COLUMNS,
)

RUN_COLUMNS: tuple[str, ...] = TABLE_RUN_FIELDS
# The scaled axes (not the campaign's matrix axes, which are vocab.AXES).
AXES: tuple[str, ...] = ("nodes", "ranks", "gpus")

__all__ = [
    "AXES",
    "EXACT_COLUMNS",
    "LIST_COLUMNS",
    "METRIC_COLUMNS",
    "RUN_COLUMNS",
    "TIMELINE_COLUMNS",
]
