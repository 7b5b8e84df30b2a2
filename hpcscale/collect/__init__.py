"""Collecting what runs wrote: metrics.json (schema in `hpcscale.formats.metrics`), the runs'
traces (`traces/`, one reader per format, and `intervals`), the compute/communication split
(`split`) and the tidy run table (`collector`)."""
