"""SharedReads: callers asking at once share reads, and none gets a read that began
before it asked."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from onceflow.control.shared_reads import SharedReads


class GatedRead:
    """A read that numbers itself and waits for the test to let it end."""

    def __init__(self) -> None:
        self.begun = 0
        self.started = threading.Semaphore(0)
        self.release = threading.Semaphore(0)

    def __call__(self, key: str) -> tuple[str, int]:
        self.begun += 1
        number = self.begun
        self.started.release()
        assert self.release.acquire(timeout=10), "the test never let the read end"
        return key, number


def test_callers_arriving_during_a_read_share_the_next_one_and_none_gets_the_older() -> None:
    read = GatedRead()
    shared = SharedReads(read)
    with ThreadPoolExecutor(20) as pool:
        first = pool.submit(shared, "pipelines")
        assert read.started.acquire(timeout=10)
        later = [pool.submit(shared, "pipelines") for _ in range(19)]
        _until_waiting(shared, "pipelines", 19)
        read.release.release()  # read 1 ends; the late callers asked after it began
        assert first.result(10) == ("pipelines", 1)
        assert read.started.acquire(timeout=10)
        read.release.release()
        assert {f.result(10) for f in later} == {("pipelines", 2)}
    assert read.begun == 2, "twenty callers, two reads"


def _until_waiting(shared: SharedReads[str, tuple[str, int]], key: str, callers: int) -> None:
    """Until that many callers wait on the key (CPython's Condition keeps its waiters
    in ``_waiters``): each asked while read 1 was under way."""
    deadline = time.monotonic() + 10
    while len(shared._keys[key].changed._waiters) < callers:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the callers never came to wait"
        time.sleep(0.01)


def test_keys_are_read_apart() -> None:
    shared: SharedReads[str, str] = SharedReads(lambda key: key.upper())
    assert (shared("a"), shared("b"), shared("a")) == ("A", "B", "A")


def test_a_failed_read_fails_its_sharers_and_the_next_call_reads_again() -> None:
    calls = []

    def read(key: str) -> str:
        calls.append(key)
        if len(calls) == 1:
            raise ConnectionError("the API server went away")
        return "listed"

    shared = SharedReads(read)
    with pytest.raises(ConnectionError, match="went away"):
        shared("sparkjobs")
    assert shared("sparkjobs") == "listed"
    assert calls == ["sparkjobs", "sparkjobs"]
