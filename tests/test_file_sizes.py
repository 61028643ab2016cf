"""No long room without a reason: a source file over :data:`LIMIT` lines says why.

Every ``.py`` file under the packages (``models``, ``heuristics``, ``solver``,
``benchmarks``) with more than :data:`LIMIT` lines must state in its module docstring why
it is one file, in a paragraph that starts with :data:`MARK`.  Split a file that has
separable parts instead (by what each part does, e.g. a package whose ``__init__``
re-exports the names others import).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "heuristics", "solver", "benchmarks")
#: Lines a source file may have without stating why it is long.
LIMIT = 700
#: What the module docstring of a longer file must contain.
MARK = "Why this file is long:"


def line_count(text: str) -> int:
    """Lines of ``text`` as ``wc -l`` counts them for a file ending in a newline."""
    return len(text.splitlines())


def unexplained_long_files(root: Path, limit: int = LIMIT) -> list[str]:
    """``path (N lines)`` of every package file over ``limit`` lines whose module
    docstring lacks :data:`MARK`, sorted by path."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            lines = line_count(text)
            if lines <= limit:
                continue
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if MARK not in docstring:
                found.append(f"{path.relative_to(root).as_posix()} ({lines} lines)")
    return sorted(found)


def test_every_long_file_states_why() -> None:
    missing = unexplained_long_files(ROOT)
    assert not missing, (
        f"files over {LIMIT} lines without '{MARK}' in their module docstring: split them "
        "by what each part does, or state the reason there:\n  " + "\n  ".join(missing))


def test_the_checker_sees_a_long_file_without_a_reason(tmp_path: Path) -> None:
    body = "x = 1\n" * 20
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "models" / "short.py").write_text('"""Short."""\n' + "x = 1\n" * 19,
                                                 encoding="utf-8")
    (tmp_path / "solver" / "deep").mkdir()
    (tmp_path / "solver" / "deep" / "long.py").write_text('"""Long, no reason."""\n' + body,
                                                         encoding="utf-8")
    (tmp_path / "heuristics" / "reasoned.py").write_text(
        f'"""Long.\n\n{MARK} one algorithm.\n"""\n' + body, encoding="utf-8")
    (tmp_path / "benchmarks" / "comment.py").write_text(f"# {MARK} not in the docstring\n"
                                                        + body, encoding="utf-8")
    assert unexplained_long_files(tmp_path, limit=20) == [
        "benchmarks/comment.py (21 lines)", "solver/deep/long.py (21 lines)"]
    assert unexplained_long_files(tmp_path, limit=21) == []
