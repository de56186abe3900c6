"""A tiny library for the make example."""
