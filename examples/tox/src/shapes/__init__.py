"""Areas and perimeters of simple shapes (memotest's tox example)."""

from shapes.area import circle, rectangle

__all__ = ["circle", "rectangle"]
