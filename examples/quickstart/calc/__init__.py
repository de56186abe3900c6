"""A tiny library for the quickstart example: calc.arith and calc.text."""
