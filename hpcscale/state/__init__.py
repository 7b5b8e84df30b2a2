"""Persistent campaign state: the SQLite ledger (a cache of what the run directories and the
scheduler say) and the lock that serialises submitters."""
