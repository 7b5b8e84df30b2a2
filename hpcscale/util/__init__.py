"""Small helpers with no domain knowledge, shared across packages."""
