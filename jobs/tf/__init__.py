"""The TensorFlow 2 programs: `python jobs/tf/train.py` (see --help), one process per rank under
mpirun/srun for `strategy: horovod`, one process for `strategy: mirrored`. Needs TensorFlow;
Horovod only for the `horovod` strategy. Declared in manifest.py (models, arguments, rules),
which hpcscale reads by its path without importing this package.
"""
