"""The failure channel: one guard, offline exactly once, even under concurrent failures."""

from __future__ import annotations

import threading

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.storage.failure import LogDirFailureChannel


def test_concurrent_io_errors_take_a_dir_offline_once_and_others_stay_online() -> None:
    calls: list[str] = []
    channel = LogDirFailureChannel(lambda path, exc: calls.append(path))
    start = threading.Barrier(8)
    raised: list[KafkaStorageError] = []

    def fail() -> None:
        start.wait()
        try:
            with channel.guard("/disk1", "append"):
                raise OSError(5, "Input/output error")
        except KafkaStorageError as exc:
            raised.append(exc)

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["/disk1"]
    assert len(raised) == 8
    assert all(e.code is ErrorCode.KAFKA_STORAGE_ERROR for e in raised)
    assert channel.offline_dirs == ["/disk1"]
    with channel.guard("/disk2", "append"):
        pass  # another directory is untouched


def test_offline_dir_fails_at_once_without_running_the_operation() -> None:
    channel = LogDirFailureChannel()
    channel.mark_offline("/disk1", OSError(28, "No space left on device"))
    ran = []
    with pytest.raises(KafkaStorageError, match="No space left"), channel.guard("/disk1", "roll"):
        ran.append(True)
    assert ran == []


def test_errors_that_are_not_io_errors_pass_through_without_taking_the_dir_offline() -> None:
    channel = LogDirFailureChannel()
    with pytest.raises(ValueError, match="bug"), channel.guard("/disk1", "append"):
        raise ValueError("bug")
    assert channel.offline_dirs == []


def test_the_handler_runs_on_the_one_handler_thread_and_the_reporter_waits_for_it() -> None:
    threads: list[str] = []
    channel = LogDirFailureChannel(
        lambda path, exc: threads.append(threading.current_thread().name)
    )
    assert channel.mark_offline("/disk1", OSError(5, "Input/output error"))
    assert threads == ["log-dir-failure-handler"]
    assert not channel.mark_offline("/disk1", OSError(5, "Input/output error"))
    channel.close()
    assert threads == ["log-dir-failure-handler"]
