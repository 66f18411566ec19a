"""Small statistics helpers."""


def total(values):
    """The sum of the values."""
    result = 0
    for value in values:
        result += value
    return result


def average(values):
    """The arithmetic mean of the values."""
    return total(values) / len(values)
