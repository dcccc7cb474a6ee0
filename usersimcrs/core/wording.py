"""Counts in words for console lines and reports: "1 loop", "3 loops", "1 CRS failure", "2 empty replies"."""

from __future__ import annotations

import re

_ES = re.compile(r"(?:s|x|z|ch|sh)$")
_IES = re.compile(r"[^aeiou]y$")


def plural(noun: str) -> str:
    """The regular English plural of a noun phrase's last word ("empty reply" -> "empty replies")."""
    if _IES.search(noun):
        return noun[:-1] + "ies"
    return noun + ("es" if _ES.search(noun) else "s")


def count_of(n: int, noun: str) -> str:
    """'1 loop', '0 loops', '12 CRS failures': the number and the noun in the number it needs."""
    return f"{n} {noun if n == 1 else plural(noun)}"
