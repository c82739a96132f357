"""Output paths: checked before a run, so that a typo or a place nnfuzz cannot write costs
no work, and written so that a result is never lost.

An output file is a regular file (existing or new) in a directory nnfuzz can write, or '-'
(standard output) where the option says so. A symbolic link to a regular file is followed:
the file it points to is written and the link stays. Anything else that exists there — a
directory, a device such as /dev/full, a FIFO, a socket, a dangling link — is refused with
exit status 2 before the run, never replaced by a file. An empty path is refused too (it
used to mean "the default").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from fuzz.commands.arguments import output_file


def writable_file(text: str) -> str:
    """argparse type: a file to write at the end of a run, or '-' (standard output);
    refused now if it could not be written then."""
    if text == "-":
        return text
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file")
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text} ends in '/' (a directory): name a file")
    output_file(text)  # its directory exists
    problem = unwritable_file(Path(text))
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def writable_directory(text: str) -> str:
    """argparse type: a directory to write files into (created when written; it may
    exist), refused now if that could not be done."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no directory")
    problem = unwritable_directory(Path(text))
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def writable_file_or_directory(text: str) -> str:
    """argparse type: a file as :func:`writable_file` (no '-'), or a directory — one that
    exists, or any path ending in '/' — to write files into (created when written)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file or directory")
    if text.endswith(("/", os.sep)) or Path(text).is_dir():
        return writable_directory(text)
    return writable_file(text)


def output_target(out: str, name: str, *, into_directory: bool = False) -> Path:
    """Where an option checked by :func:`writable_file_or_directory` puts the file
    ``name``: in ``out`` if it is a directory (or ends in '/', or ``into_directory``: the
    command writes several files), else ``out`` itself."""
    if into_directory or out.endswith(("/", os.sep)) or Path(out).is_dir():
        return Path(out) / name
    return Path(out)


def unwritable_file(path: Path) -> str | None:
    """Why ``path`` cannot be written as a regular file, or None."""
    real = Path(os.path.realpath(path))
    if os.path.islink(path) and not real.exists():
        return f"{path} is a symbolic link to nothing ({real})"
    if real.is_dir():
        return f"{path} is a directory"
    if real.exists() and not real.is_file():
        return f"{path} is not a regular file (a device, FIFO or socket): nnfuzz writes files"
    problem = _cannot_create_in(real.parent)
    return f"cannot write {path}: {problem}" if problem else None


def unwritable_directory(path: Path) -> str | None:
    """Why files cannot be written into the directory ``path`` (created later if missing:
    then its nearest existing ancestor is checked), or None."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory (to write into {path})"
    problem = _cannot_create_in(existing)
    return f"cannot write into {path}: {problem}" if problem else None


def _cannot_create_in(directory: Path) -> str | None:
    # Try it: permission bits say nothing to root, nor about /proc or a read-only mount.
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".nnfuzz-probe-")
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(probe)
    return None


def write_output(path: str | Path, text: str) -> None:
    """Write ``text`` to the file ``path`` (through a symbolic link) whole or not at all: a
    temporary file beside it, renamed over it. If that fails, the text is saved in the
    temporary directory (else the current one) and the :class:`OSError` raised names
    ``path`` — not the temporary file — and where the text is."""
    real = Path(os.path.realpath(path))
    tmp = real.with_name(f".{real.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if real.is_file():
            shutil.copymode(real, tmp)  # replacing a file keeps its permissions
        os.replace(tmp, real)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        saved = save_elsewhere(real.name, text)
        where = f"the output is saved in {saved}" if saved else "nor could it be saved elsewhere"
        raise OSError(e.errno, f"{e.strerror or e}; {where}", str(path)) from None


def save_elsewhere(name: str, text: str) -> Path | None:
    """Save ``text`` that could not be written where asked in a new file named after
    ``name``: in the temporary directory, else the current one; None if neither works."""
    stem, dot, suffix = name.partition(".")
    for directory in (tempfile.gettempdir(), os.getcwd()):
        try:
            fd, saved = tempfile.mkstemp(prefix=f"{stem}-", suffix=dot + suffix, dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            return Path(saved)
        except OSError:
            continue
    return None
