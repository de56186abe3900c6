import math

from shapes import circle, rectangle


def test_rectangle():
    assert rectangle(2, 3) == 6


def test_circle():
    assert math.isclose(circle(1), math.pi)
