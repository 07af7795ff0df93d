"""Reading triton_dist's environment variables (booleans, integers) with errors that name the variable.

Internal: the public names are re-exported by :mod:`triton_dist.utils` (import them from there).
"""
from __future__ import annotations

import os

__all__ = ["get_bool_env", "get_int_env"]

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")


def get_bool_env(name: str, default: bool) -> bool:
    """``True`` for 1/true/on/yes, ``False`` for 0/false/off/no (any case); ``default`` when unset. Any other value
    raises ValueError naming the variable and the accepted values."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean: use one of 1/0, true/false, on/off, yes/no")


def get_int_env(name: str, default: int) -> int:
    """The integer value of ``name``; ``default`` when unset. A non-integer raises ValueError naming it."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value.strip(), 0)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None
