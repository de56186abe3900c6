import math


def rectangle(width: float, height: float) -> float:
    return width * height


def circle(radius: float) -> float:
    return math.pi * radius * radius
