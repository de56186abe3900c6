"""A tiny library for the quickstart example."""

from calc.arith import add, mul
from calc.text import parse

__all__ = ["add", "mul", "parse"]
