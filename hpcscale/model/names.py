"""What a name, an environment variable or an #SBATCH value may look like: checked where a
campaign or a profile is read, relied on where scripts are written (util/shell.py)."""

from __future__ import annotations

import re

# sbatch reads `#SBATCH` lines itself (no shell), so their values must need no quoting at all.
# Whole-text patterns end in \Z, not $ (which also matches before a final newline): use them
# with fullmatch.
SBATCH_SAFE = re.compile(r"[A-Za-z0-9_.:,@%+=/-]+\Z")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A campaign's or a system's name: it names a directory or a file, so no "/", no leading "."
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
