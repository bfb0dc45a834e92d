"""Resource quantities ("500m", "16Gi", "8") as numbers, for scheduling and quota arithmetic."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import lru_cache

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def parse_quantity(text: str | int | float) -> float:
    """The numeric value of a quantity; ValueError on garbage."""
    return _parse(str(text).strip())


@lru_cache(maxsize=4096)  # a cluster's pods repeat a handful of quantities ("1", "16Gi")
def _parse(raw: str) -> float:
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and raw.endswith(suffix):
            number, scale = raw[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, scale = raw, Decimal(1)
    try:
        return float(Decimal(number) * scale)
    except InvalidOperation as exc:
        raise ValueError(f"quantities must match the regular expression: {raw!r}") from exc


def format_quantity(name: str, value: float) -> str:
    """Render a usage figure the way quota status shows it (cpu in millicores when fractional)."""
    if name.endswith("cpu") and value != int(value):
        return f"{round(value * 1000)}m"
    return str(int(value)) if value == int(value) else str(value)
