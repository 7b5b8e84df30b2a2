"""The command line: a thin layer over hpcscale.api and the backends."""
