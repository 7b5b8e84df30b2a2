"""Collecting what runs wrote: metrics.json (schema in `hpcscale.formats.metrics`), Horovod
timelines (`timeline/`, `intervals`), the compute/communication split (`split`) and the tidy run
table (`collector`)."""
