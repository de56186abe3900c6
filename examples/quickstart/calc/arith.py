def add(a: float, b: float) -> float:
    return a + b


def mul(a: float, b: float) -> float:
    return a * b
