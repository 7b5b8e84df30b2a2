"""The per-rank wrapper's bootstrap directory (hpcscale.rankwrap --torch-trace puts it first on
the program's PYTHONPATH): its sitecustomize.py runs in the user's Python processes. Never
imported as a package; it is here so the wheel carries it beside rankwrap.py."""
