"""Backends: how rendered runs are queued and tracked (slurm, local, dry).

Each backend takes rendered runs and the campaign's ledger; none knows about templates.
"""
