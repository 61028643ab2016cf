"""Whole numbers and natural order read from text: ASCII digits ``0``-``9`` only.

Text from files, labels, annotations, names and headers is read through this module and
nowhere else.  Python's own tests accept more than a person or the Go side means:
``str.isdigit()`` is true for ``²``, ``¹`` and other digit-like characters that ``int()``
refuses (an uncaught ``ValueError``), ``int()`` accepts every Unicode decimal digit
(``'٣'`` is 3), underscores (``'1_000'``) and surrounding whitespace, and refuses strings
of more than 4,300 digits (``sys.get_int_max_str_digits``).  Here a number is an optional
sign and ASCII digits, at most ``max_digits`` of them (leading zeros included), and
natural order compares digit runs of any length without converting them.
"""

from __future__ import annotations

import re

#: Digits of a 64-bit integer literal (Go's ``strconv.Atoi``): 19 plus a leading zero.
INT64_DIGITS = 20

_SIGNED = re.compile(r"[+-]?[0-9]+")
_DIGIT_RUNS = re.compile(r"([0-9]+)")


def is_ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits ``0``-``9`` and nothing else."""
    return text.isascii() and text.isdigit()


def parse_int(text: str, *, max_digits: int = INT64_DIGITS, signed: bool = False) -> int | None:
    """The whole number written in ``text``, or ``None``.

    Parameters
    ----------
    text
        The text, without surrounding whitespace (strip it first when that is allowed).
    max_digits
        Most digits accepted (leading zeros count): a longer literal is ``None``, whatever
        its value, so no caller ever converts an unbounded digit string.
    signed
        Accept a leading ``+`` or ``-``.

    Returns
    -------
    int or None
        ``None`` unless ``text`` is ASCII digits (with a sign when ``signed``), at most
        ``max_digits`` of them.
    """
    if not _SIGNED.fullmatch(text):
        return None
    digits = text.lstrip("+-")
    if len(digits) != len(text) and not signed:
        return None
    if len(digits) > max_digits:
        return None
    return int(text)


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key giving natural order: ``node-9`` < ``node-10``.

    Runs of ASCII digits compare as numbers (leading zeros ignored, any length); every
    other character, non-ASCII digits included, compares as text.
    """
    out = []
    for part in _DIGIT_RUNS.split(name):
        if not part:
            continue
        if part[0].isascii() and part[0].isdigit():
            digits = part.lstrip("0") or "0"
            out.append((1, len(digits), digits))
        else:
            out.append((0, 0, part))
    return tuple(out)


__all__ = ["INT64_DIGITS", "is_ascii_digits", "natural_key", "parse_int"]
