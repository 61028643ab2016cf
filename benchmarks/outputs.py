"""Output folders of ``bench``, ``sweep`` and ``replay``: one rule for all three.

A run writes into its ``--out`` folder only when the folder is absent or empty, unless
``--force`` (``sweep --resume`` continues the sweep in it): an earlier run's results are
never overwritten by accident.  The folder is checked before any work, so that an ``--out``
naming a file, or a folder in use, fails at once rather than after an hour of replay.

Inside the folder nothing is written through a symbolic link or into anything but a
regular file: the files are opened with ``O_NOFOLLOW`` (a ``summary.csv`` planted as a link
to another file is refused, never followed) and ``O_NONBLOCK`` (a named pipe without a
reader is refused instead of blocking), and the names a run will write are checked up
front when ``--force`` lets it into a used folder.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from models.errors import InputError


def check_out_dir(out_dir: Path, option: str = "--out", *, force: bool = False,
                  resume: bool | None = None, files: Iterable[str] = ()) -> None:
    """Refuse to write a run into a folder that already holds files.

    Parameters
    ----------
    out_dir
        The output folder (absent or empty is fine).
    option
        The option that named it (in the message).
    force
        Write anyway: files of the same names are replaced, others are left alone.
    resume
        ``sweep --resume`` given (the folder is expected to hold the sweep to continue);
        ``None`` for a command without ``--resume``.
    files
        The names the run writes in the folder: with ``force`` or ``resume``, each that
        exists must be a regular file, not a symbolic link (checked again when written,
        :func:`open_output`).

    Raises
    ------
    InputError
        When ``out_dir`` is a file, a folder with files and neither flag is given, or one
        of ``files`` is a symbolic link or not a regular file.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError([f"{option} {out_dir}: a file, not a folder"])
    if not out_dir.exists():
        return
    if force or resume:
        for name in files:
            _check_replaceable(out_dir / name, option)
        return
    try:
        used = next(out_dir.iterdir(), None) is not None
    except OSError as exc:
        raise InputError([f"{option} {out_dir}: cannot read the folder: {exc.strerror}"]
                         ) from None
    if used:
        raise InputError([f"{option} {out_dir}: the folder is not empty (an earlier run?); "
                          "add --force to write over its results, or choose another "
                          f"{option}" + (", or add --resume to continue that sweep"
                                         if resume is not None
                                         and (out_dir / "results.csv").exists() else "")])


def _check_replaceable(path: Path, option: str) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError([f"{option} {path}: cannot check it: {exc.strerror}"]) from None
    if stat.S_ISLNK(info.st_mode):
        raise InputError([f"{option} {path}: a symbolic link; npu-place never writes "
                          "through one (remove it, or choose another folder)"])
    if not stat.S_ISREG(info.st_mode):
        raise InputError([f"{option} {path}: not a regular file (a folder, pipe or "
                          "device); remove it, or choose another folder"])


def open_output(path: Path, binary: bool = False) -> IO[Any]:
    """Open ``path`` for writing (created or truncated) without following a symbolic
    link, and only when it is (or becomes) a regular file.

    Text mode writes UTF-8 with ``newline=""`` (the csv module's own line ends).

    Raises
    ------
    InputError
        Naming the file when it is a symbolic link or not a regular file.
    OSError
        When it cannot be created (permissions, a full disk, ...).
    """
    flags = (os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError([f"{path}: a symbolic link; npu-place never writes through "
                              "one (remove it, or choose another folder)"]) from None
        if exc.errno == errno.ENXIO:  # a named pipe without a reader
            raise InputError([f"{path}: not a regular file (a named pipe)"]) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError([f"{path}: not a regular file (a pipe or device)"])
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        handle = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
    if binary:
        return handle
    return io.TextIOWrapper(handle, encoding="utf-8", newline="")


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) through :func:`open_output`."""
    with open_output(path) as handle:
        handle.write(text)


def save_figure(fig: Any, path: Path, dpi: int, metadata: dict[str, str] | None = None
                ) -> None:
    """Save a matplotlib figure as PNG to ``path`` through :func:`open_output`.

    ``metadata`` becomes text chunks of the PNG (matplotlib's ``savefig(metadata=)``): the
    manual's plots record there the hash of the data file they were drawn from.
    """
    with open_output(path, binary=True) as handle:
        fig.savefig(handle, format="png", dpi=dpi, metadata=metadata)
