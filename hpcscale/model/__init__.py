"""The ground: what a campaign, a system and a run are. Imports nothing else of hpcscale."""
