"""Progress of long runs when the output is not a terminal (a log file, CI): the status
as a plain line once a minute, nothing in between and no terminal control codes."""

from __future__ import annotations

import io

import pytest

from fuzz import progress as progress_module
from fuzz.commands import fuzz as fuzz_command
from fuzz.progress import HEARTBEAT_SECONDS, Progress


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", fake)
    return fake


def test_a_log_gets_a_status_line_once_a_minute(clock):
    log, results = io.StringIO(), io.StringIO()
    p = Progress("random", stream=log, output=results)
    for second in range(0, 150):  # one test a second for two and a half minutes
        clock.now = 1000.0 + second
        p.advance("passed")
    p.print("FAILED seed 7")
    p.close()
    lines = log.getvalue().splitlines()
    assert lines == ["random: 61 (61 passed) 60s 1.0/s", "random: 121 (121 passed) 120s 1.0/s"]
    assert "\r" not in log.getvalue() and "\033" not in log.getvalue()
    assert results.getvalue() == "FAILED seed 7\n"


def test_a_short_run_writes_no_status_to_a_log(clock):
    log = io.StringIO()
    p = Progress("specs", stream=log, output=io.StringIO())
    clock.now += HEARTBEAT_SECONDS - 1
    p.advance("passed", 500)
    p.close()
    assert log.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_live_line_redrawn_at_most_five_times_a_second(clock):
    term, results = _Terminal(), io.StringIO()
    p = Progress("specs", stream=term, output=results)
    p.advance("passed")  # the first one shows at once
    for _ in range(50):  # within the same fifth of a second: no redraw
        p.advance("passed")
    clock.now += 0.3
    p.advance("failed")
    assert term.getvalue().count("\r\033[K") == 2
    assert term.getvalue().endswith("specs: 52 (1 failed, 51 passed) 0s 173.3/s")
    p.print("FAILED x.mod.py")  # above the live line: it is cleared first
    assert term.getvalue().endswith("\r\033[K") and results.getvalue() == "FAILED x.mod.py\n"
    clock.now += 0.3
    p.advance("passed")
    p.close()  # the live line does not stay behind
    assert term.getvalue().endswith("\r\033[K")
    assert term.getvalue().count("\r\033[K") == 5


def test_fuzz_status_reaches_a_log_once_a_minute(clock, monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(fuzz_command.sys, "stderr", log)
    monkeypatch.setattr(fuzz_command.time, "monotonic", clock)
    status = fuzz_command._StatusLine()
    for second in range(0, 130, 10):
        clock.now = 1000.0 + second
        status.show(f"model {second}s #{second * 100} cov 10")
    assert log.getvalue().splitlines() == ["model 60s #6000 cov 10", "model 120s #12000 cov 10"]
