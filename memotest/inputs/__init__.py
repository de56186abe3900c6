"""The input kinds: one module per kind of observation, and their registries."""
