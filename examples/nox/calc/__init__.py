"""A tiny package for the nox example."""
