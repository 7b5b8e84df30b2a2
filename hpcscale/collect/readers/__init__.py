"""How a run's figures are read, one reader per kind of workload (design: "the next shape").

`metrics_json` is the bundled programs' own file (hpcscale.collect.run_row); `extract` pulls
figures from a command's output with regular expressions; `mllog` reads `:::MLLOG` lines (the
MLPerf logging format, written by `hpcscale.probe` too). Presets are data (`presets`), not code.
"""
