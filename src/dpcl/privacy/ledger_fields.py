"""Typed reads of a ledger's fields, for the verifiers: each returns the value or raises
:class:`~dpcl.privacy.ledger.LedgerError` naming the field (a bool is not a number, a float not an
integer), and :func:`at_least` rejects a stated figure that understates the one its parameters give."""

from __future__ import annotations

import math
import numbers
from typing import Any

from .accounting import REL_TOL, Budget, PrivacyBudgetExceeded
from .ledger import LedgerError


def where(path: str) -> str:
    return path or "the file"


def number(value: Any, path: str, *, allow_inf: bool = False) -> float:
    """A real number (never a bool or string), finite unless ``allow_inf`` ("inf" allowed then)."""
    if allow_inf and value in ("inf", math.inf):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LedgerError(f"{where(path)}: expected a number, got {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise LedgerError(f"{where(path)}: expected a finite number, got {value!r}")
    return v


def integer(value: Any, path: str, *, minimum: int = 0) -> int:
    """An exact integer (a JSON int, never a bool or a float) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LedgerError(f"{where(path)}: expected an integer, got {value!r}")
    if int(value) < minimum:
        raise LedgerError(f"{where(path)}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise LedgerError(f"{where(path)}: expected true or false, got {value!r}")
    return value


def mapping(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise LedgerError(f"{where(path)}: expected an object, got {type(value).__name__}")
    return value


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise LedgerError(f"{where(path)}: expected a string, got {value!r}")
    return value


def budget(block: Any, path: str, *, allow_inf: bool = True) -> Budget:
    """An {epsilon, delta} block: ε ≥ 0 (∞ if allowed), δ in [0, 1]."""
    block = mapping(block, path)
    for key in ("epsilon", "delta"):
        if key not in block:
            raise LedgerError(f"{path}: no {key!r}")
    eps = number(block["epsilon"], f"{path}.epsilon", allow_inf=allow_inf)
    delta = number(block["delta"], f"{path}.delta")
    if eps < 0 or not 0 <= delta <= 1:
        raise LedgerError(f"{path}: need ε >= 0 and 0 <= δ <= 1, got ({eps}, {delta})")
    return Budget(eps, delta)


def at_least(stated: float, derived: float, path: str, *, rel_tol: float = REL_TOL) -> None:
    """A stated figure must not understate the derived one (float slack only: ``rel_tol``, relative)."""
    if stated < derived * (1 - rel_tol) - 1e-15:
        raise PrivacyBudgetExceeded(
            f"{path}: the file states {stated!r}, but its parameters give {derived!r}"
        )
