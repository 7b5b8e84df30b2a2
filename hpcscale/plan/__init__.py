"""From a campaign to its runs: the matrix expanded, each cell resolved by its framework."""
