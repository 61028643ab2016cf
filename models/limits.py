"""Every bound npu-place puts on its input, and the checks that enforce them.

A placement tool running next to a scheduler must not be taken down by a file or an
argument: every document, section, name and number it accepts is bounded, and anything
outside the bounds is refused with a message (exit code 2 on the command line) in bounded
time and memory.  The values are listed in docs/limits.md; this module is
the one place that defines them, for the file loaders (:mod:`models.io`), the models
(:mod:`models.scenario`), the command line and any service built on the library.

The numeric checks (:func:`check_time_limit`, :func:`check_seed`, ...) raise
:class:`LimitError` (a :class:`ValueError`) with a sentence naming the option; callers
turn it into their own error (an ``argparse`` usage error, an HTTP 400, ...).
"""

from __future__ import annotations

import math
import os
import re
from typing import Annotated

from pydantic import AfterValidator

# --------------------------------------------------------------------------- documents

#: Largest scenario, placement or events file read, in bytes.  A 100,000-node scenario is
#: about 15 MB; reading stops one byte past the limit (``/dev/zero`` is refused at once).
MAX_FILE_BYTES = 32 * 1024 * 1024
#: Deepest nesting of mappings and lists in a document (a scenario needs 5 levels).
MAX_DEPTH = 32
#: Most values (scalars, mappings, lists and keys) one document may hold, counting every
#: expansion of a YAML alias: this is what bounds "billion laughs" documents.
MAX_VALUES = 4_000_000
#: Integers in documents must lie in the signed 64-bit range.
MAX_ABS_INT = 2**63 - 1
#: ``npu-place import``: largest ``kubectl get -o json|yaml`` dump file (or stdin) read, in
#: bytes.  A 10,000-node cluster's nodes with their device info are about 20-30 MB; a
#: larger dump is split (per kind or namespace, or without ``status.images``).  As for
#: scenarios, a larger regular file is refused by its size, anything else one byte past.
MAX_DUMP_FILE_BYTES = 128 * 1024 * 1024
#: ``npu-place import``: most bytes read over all the dump files of one import.
MAX_DUMP_TOTAL_BYTES = 1024 * 1024 * 1024
#: Deepest nesting in a dump file (Kubernetes objects nest deeper than scenarios).
MAX_DUMP_DEPTH = 64
#: Most values in one dump file, every YAML alias expansion counted.
MAX_DUMP_VALUES = 16_000_000
#: At most this many error messages are printed; the rest are counted.
MAX_ERRORS_SHOWN = 50
#: ``replay --snapshots``: largest ``now`` file of a snapshot (unix seconds or an RFC 3339
#: time is under 40 bytes).
MAX_STAMP_FILE_BYTES = 256
#: ``serve --token-file``: largest token file (the token itself is at most 4,096
#: characters; the rest may be whitespace).
MAX_SECRET_FILE_BYTES = 64 * 1024
#: ``serve --ssl-certfile`` / ``--ssl-keyfile``: largest PEM file (a certificate chain of
#: a few certificates is a few kilobytes).
MAX_PEM_FILE_BYTES = 1024 * 1024

# --------------------------------------------------------------------------- sections

#: Nodes in one scenario.
MAX_NODES = 100_000
#: Pending jobs in one scenario (or jobs in one placement).
MAX_JOBS = 10_000
#: Running jobs in one scenario.
MAX_RUNNING_JOBS = 10_000
#: Affinity-cache entries in one scenario.
MAX_CACHE_ENTRIES = 1_000_000
#: Labels on one node.
MAX_LABELS = 256
#: Ranks (tasks) of one job; also bounds ``fault-ranks``, running ``ranks`` and ``scale``.
MAX_TASKS = 1 << 16
#: Longest name (node, job, owner UID, session), as Kubernetes' object names (253).
MAX_NAME_CHARS = 253
#: Longest label key or value, or other free text such as a policy or affinity config.
MAX_TEXT_CHARS = 1024
#: Most levels of a multilevel tree (``resource-level-config``) and of a job's
#: ``affinity-config``.  Upstream's fragment score multiplies the score of the level below
#: by 10 at every level, so with K levels it reaches 10^(K-1) times the level1 remainders:
#: at 8 levels, 100,000 level1 domains and groups of 65,536 pods it stays below 10^17,
#: inside the 64-bit integers CP-SAT and the evaluator count in (20 levels overflowed).
#: Physical trees (node, rack, leaf and spine switches, data centre) have 4 or 5.
MAX_LEVELS = 8
#: Largest ``image-size-gb`` of a job (GB).
MAX_IMAGE_SIZE_GB = 100_000.0
#: Largest absolute ``priority`` (a signed 32-bit integer, as Kubernetes priorities).
MAX_PRIORITY = 2**31 - 1
#: Largest time in seconds (``now``, cache ``updated``, ``ttl-seconds``; the simulated
#: clock may not pass it either): year 5138, far beyond any real clock.
MAX_TIMESTAMP = 10**11
#: Longest single ``advance`` of the simulated clock: 10 years.
MAX_ADVANCE_SECONDS = 10 * 365 * 86_400
#: Sessions in one events file.
MAX_SESSIONS = 10_000
#: Events in one session.
MAX_EVENTS_PER_SESSION = 100_000

# --------------------------------------------------------------------------- options

#: Largest wall-clock budget per placement (``--time-limit``), seconds: one week (the
#: same bound as ``solver.facade.solve``; longer limits only overflow timers).
MAX_TIME_LIMIT = 7 * 24 * 3600.0
#: Largest CP-SAT deterministic time (``--deterministic-time``), as the facade's.
MAX_DETERMINISTIC_TIME = 7 * 24 * 3600.0
#: CP-SAT's ``random_seed`` is a 32-bit integer; seeds are 0 .. 2^31 - 1 (as the facade's).
MIN_SEED = 0
MAX_SEED = 2**31 - 1
#: Most CP-SAT search workers (``--workers``): more only adds memory and contention.
MAX_WORKERS = 64
#: Largest objective weight (``--weights``): the sum of CP-SAT's absolute objective
#: coefficients must stay below 2^31 anyway.
MAX_WEIGHT = 2**31 - 1

#: Characters refused in names and labels: C0/C1 control characters (ANSI escapes
#: start with ESC), zero-width and bidirectional formatting characters, line and
#: paragraph separators, the byte-order mark.
UNSAFE_CHARS = re.compile(
    "[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


class LimitError(ValueError):
    """A value outside its documented bound; the message names the option or field."""


# --------------------------------------------------------------------------- text


def escape_text(text: str, limit: int = 200) -> str:
    """Make untrusted text safe to print: escape unsafe characters, shorten long text.

    Parameters
    ----------
    text
        Any text, such as a name read from a file.
    limit
        Longest result before the text is cut (with ``...``).

    Returns
    -------
    str
        ``text`` with every character of :data:`UNSAFE_CHARS` written as ``\\xNN`` /
        ``\\uNNNN``.
    """
    if len(text) > limit:
        text = text[:limit] + "..."

    def _escape(match: re.Match[str]) -> str:
        code = ord(match.group(0))
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return UNSAFE_CHARS.sub(_escape, text)


def check_text(value: str, max_chars: int = MAX_NAME_CHARS) -> str:
    """Refuse a name or label with unsafe characters or more than ``max_chars``.

    Raises
    ------
    LimitError
        Naming the first unsafe character (escaped) or the length.
    """
    if len(value) > max_chars:
        raise LimitError(f"is {len(value)} characters long; the limit is {max_chars}")
    if value.isprintable():  # the common case, in C: no control or formatting character
        return value
    match = UNSAFE_CHARS.search(value)
    if match is not None:
        raise LimitError(
            f"contains the control or formatting character {escape_text(match.group(0))} "
            f"at position {match.start()} (names and labels must be printable): "
            f"'{escape_text(value, 60)}'"
        )
    return value


def _check_label(value: str) -> str:
    return check_text(value, MAX_TEXT_CHARS)


#: A name (node, job, owner UID): at most :data:`MAX_NAME_CHARS` printable characters.
Name = Annotated[str, AfterValidator(check_text)]
#: A label key or value or other short text: at most :data:`MAX_TEXT_CHARS` printable
#: characters.
Text = Annotated[str, AfterValidator(_check_label)]


# --------------------------------------------------------------------------- numbers


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise LimitError(f"{name} must be a finite number, got {value}")
    return value


def _positive_at_most(value: float, name: str, high: float, unit: str) -> float:
    _finite(value, name)
    if not 0 < value <= high:
        raise LimitError(f"{name} must be > 0 and at most {high:g}{unit}, got {value:g}")
    return float(value)


def check_time_limit(value: float, name: str = "--time-limit") -> float:
    """A wall-clock budget: finite, ``0 < value <= MAX_TIME_LIMIT`` seconds."""
    return _positive_at_most(value, name, MAX_TIME_LIMIT, " seconds")


def check_deterministic_time(value: float, name: str = "--deterministic-time") -> float:
    """A CP-SAT deterministic time: finite, ``0 < value <= MAX_DETERMINISTIC_TIME``."""
    return _positive_at_most(value, name, MAX_DETERMINISTIC_TIME, "")


def check_seed(value: int, name: str = "--seed") -> int:
    """A CP-SAT random seed: ``MIN_SEED <= value <= MAX_SEED`` (0 .. 2^31 - 1)."""
    if not MIN_SEED <= value <= MAX_SEED:
        raise LimitError(f"{name} must be between {MIN_SEED} and {MAX_SEED} (CP-SAT seeds "
                         f"are 32-bit), got {value}")
    return value


def check_range(value: float, name: str, low: float, high: float) -> float:
    """Any other numeric option: finite and ``low <= value <= high``."""
    _finite(value, name)
    if not low <= value <= high:
        raise LimitError(f"{name} must be between {low:g} and {high:g}, got {value:g}")
    return value


def check_workers(value: int, name: str = "--workers") -> int:
    """CP-SAT search workers: ``1 <= value <= MAX_WORKERS``."""
    if not 1 <= value <= MAX_WORKERS:
        cpus = os.cpu_count() or 1
        raise LimitError(f"{name} must be between 1 and {MAX_WORKERS} (this machine has "
                         f"{cpus} CPUs), got {value}")
    return value


def capped(messages: list[str], limit: int = MAX_ERRORS_SHOWN, total: int | None = None
           ) -> list[str]:
    """The first ``limit`` messages and a count of the rest, as the CLI prints them.

    ``total``: how many messages there were when only the first ones were formatted.
    Capping a capped list changes nothing.
    """
    total = len(messages) if total is None else total
    if total <= limit or (len(messages) == limit + 1 and messages[-1].startswith("... and ")):
        return messages
    return [*messages[:limit], f"... and {total - limit} more error(s) not shown"]


def listing(items: object) -> str:
    """Items for a message, as a person reads them: ``'a', 'b'`` for names, ``0, 1`` for
    numbers (never a Python list or tuple)."""
    values = list(items)  # type: ignore[call-overload]
    return ", ".join(str(v) if isinstance(v, int) else f"'{escape_text(str(v), 80)}'"
                     for v in values)
