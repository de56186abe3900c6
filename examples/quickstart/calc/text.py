def parse(expr: str) -> list[str]:
    """Splits ``"1 + 2"`` into tokens."""
    return expr.split()
