"""Campaign model, expansion, scaling arithmetic and rendering: everything before a scheduler."""
