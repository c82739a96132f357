"""Verbose logging by tag, in the spirit of Android's ``VLOG`` (``frameworks/ml/nn``).

Enable it with the environment variable ``NNFUZZ_VLOG``, whose syntax is exactly that of
Android's ``debug.nn.vlog`` property:

* empty or unset: no verbose logging;
* ``1`` or ``all``: every tag;
* otherwise a list of tags separated by spaces, commas or colons, e.g.
  ``NNFUZZ_VLOG=compilation,execution`` or ``NNFUZZ_VLOG="driver:model"``.

Tags (Android's): ``compilation`` (preparing models, the compilation cache), ``cpuexe``
(the reference executor), ``driver`` (device entry points), ``execution`` (executions of
prepared models), ``manager`` (device management, driver loading), ``memory`` (pools and
driver-managed buffers) and ``model`` (model validation). An unknown tag is reported on
stderr once and otherwise ignored, as Android does.

Zero cost when off: :data:`VLOG` has one plain bool attribute per tag, so a call site
guards its message with one attribute test before building anything::

    from driver.log import VLOG, vlog

    if VLOG.execution:
        vlog("execution", "run %d operations, deadline %s", n, deadline)

:func:`vlog` checks the tag itself and formats lazily (``%``-style arguments are only
formatted when the tag is on), so an unguarded call costs a function call and no
formatting. Messages go to the ``nnfuzz.vlog`` :mod:`logging` logger, which writes to
stderr as ``VLOG <tag>: <message>`` once any tag is on (Android writes them to logcat).
Tests and tools may call :func:`set_vlog` to change the mask at run time.
"""

from __future__ import annotations

import logging
import os
import re
import sys

ENV_VAR = "NNFUZZ_VLOG"
TAGS: tuple[str, ...] = (
    "compilation",
    "cpuexe",
    "driver",
    "execution",
    "manager",
    "memory",
    "model",
)
"""Every tag (Android 11's ``VLogFlags``)."""

_ALL = ("1", "all")
_SEPARATORS = re.compile(r"[ ,:]")


class VLogMask:
    """One bool attribute per tag (``VLOG.execution``): what call sites test."""

    __slots__ = TAGS

    def __init__(self, tags: frozenset[str] = frozenset()):
        for tag in TAGS:
            setattr(self, tag, tag in tags)

    def enabled(self) -> frozenset[str]:
        return frozenset(t for t in TAGS if getattr(self, t))

    def __repr__(self) -> str:
        return f"VLogMask({', '.join(sorted(self.enabled())) or 'off'})"


VLOG = VLogMask()
"""The process-wide mask, initialized from ``NNFUZZ_VLOG`` at import."""

logger = logging.getLogger("nnfuzz.vlog")
_handler: logging.Handler | None = None


def parse_vlog(value: str | None) -> tuple[frozenset[str], list[str]]:
    """The tags a ``debug.nn.vlog``-style setting enables, and the unknown words in it.

    ``1``/``all`` anywhere enables every tag (Android stops at that word, so unknown
    words after it are not reported either); empty words between separators are
    skipped."""
    if not value:
        return frozenset(), []
    tags: set[str] = set()
    unknown: list[str] = []
    for word in _SEPARATORS.split(value):
        if not word:
            continue
        if word in _ALL:
            return frozenset(TAGS), unknown
        if word in TAGS:
            tags.add(word)
        else:
            unknown.append(word)
    return frozenset(tags), unknown


def set_vlog(value: str | None) -> frozenset[str]:
    """Set :data:`VLOG` from a setting (``None``: read ``NNFUZZ_VLOG``); returns the
    enabled tags. Unknown words are reported on stderr."""
    global _handler
    if value is None:
        value = os.environ.get(ENV_VAR, "")
    tags, unknown = parse_vlog(value)
    for word in unknown:
        print(f"nnfuzz: unknown {ENV_VAR} tag {word!r} (known: {', '.join(TAGS)})", file=sys.stderr)
    for tag in TAGS:
        setattr(VLOG, tag, tag in tags)
    if tags and _handler is None:
        # Only once something is on: a library must not touch logging otherwise.
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("VLOG %(message)s"))
        logger.addHandler(_handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return tags


def vlog(tag: str, message: str, *args: object) -> None:
    """Log ``message % args`` under ``tag`` if that tag is on; formats nothing otherwise."""
    if getattr(VLOG, tag, False):
        logger.info("%s: %s", tag, _Message(message, args))


class _Message:
    """Formats ``message % args`` only when the record is emitted (a message without
    arguments may contain a literal ``%``)."""

    __slots__ = ("args", "message")

    def __init__(self, message: str, args: tuple[object, ...]):
        self.message = message
        self.args = args

    def __str__(self) -> str:
        return self.message % self.args if self.args else self.message


def vlog_is_on(tag: str) -> bool:
    """``VLOG_IS_ON(tag)`` for a tag held in a variable (call sites with a literal tag
    test ``VLOG.<tag>`` directly)."""
    return bool(getattr(VLOG, tag, False))


set_vlog(None)

__all__ = ["ENV_VAR", "TAGS", "VLOG", "VLogMask", "parse_vlog", "set_vlog", "vlog", "vlog_is_on"]
