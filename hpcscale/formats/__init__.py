"""The files hpcscale and its jobs exchange, each defined once and shared by writer and reader.

`metrics` (metrics.json), `steps` (steps.json), `run_record` (run.json), `exit_record`
(exit.json, how the job script ended) and `atomic` (how any of them reaches the disk); the job's
command line is hpcscale.model.job_cli's. Only the standard library and msgspec here: `jobs/`
imports this package under TensorFlow or torch, where pandas and pydantic have no business, and
the core must import it without TensorFlow.
"""
