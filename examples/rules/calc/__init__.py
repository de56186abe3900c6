"""A tiny library for the rules example."""
