"""The bundled programs campaigns run, one folder per framework: tf/ (TensorFlow 2 + Horovod or
MirroredStrategy, entry point tf/train.py, its models and arguments declared in tf/manifest.py)
and torch/ (PyTorch DDP, torch/train.py). What every program records alike stays here: the
machine's load (load.py), provenance (provenance.py) and the timed steps (steps.py).

Nothing in hpcscale/ imports this package (hpcscale reads tf/manifest.py by its path). The files
the programs write and their command line are defined in hpcscale.formats and
hpcscale.model.job_cli (standard library and msgspec only), imported from the installed hpcscale.
A site's `jobs_dir` names a copy of this folder: its root, with tf/ and torch/ inside.
"""
