"""The pool of large-frame buffers (server/frame_pool.py): a buffer comes back only when
nothing refers to it any more, resized to the next frame; the pool stays bounded."""

from __future__ import annotations

from spindle.broker.server.frame_pool import FramePool


def test_a_buffer_nothing_else_holds_is_reused_resized_to_the_next_frame() -> None:
    pool = FramePool()
    frame = pool.take(1000)
    frame[:] = b"\xaa" * 1000
    first = id(frame)
    assert pool.give(frame)
    del frame
    frame = pool.take(1500)
    assert id(frame) == first
    assert len(frame) == 1500
    assert pool.reused == 1
    assert pool.give(frame)
    del frame
    frame = pool.take(10)
    assert id(frame) == first
    assert bytes(frame) == b"\xaa" * 10


def test_a_buffer_still_viewed_or_referenced_is_not_taken_back() -> None:
    pool = FramePool()
    frame = pool.take(100)
    records = memoryview(frame)[10:20]  # a handler kept a record set
    assert not pool.give(frame)
    records.release()
    kept = [frame]  # or the frame itself
    assert not pool.give(frame)
    kept.clear()
    assert pool.give(frame)
    assert pool.take(100) is frame
    assert pool.take(100) is not frame  # taken out: never handed out twice


def test_the_pool_keeps_a_bounded_number_of_bounded_buffers() -> None:
    pool = FramePool(buffers=2, max_bytes=1000)
    assert not pool.give(bytearray(1001))
    assert pool.give(bytearray(10))
    assert pool.give(bytearray(10))
    assert not pool.give(bytearray(10))
    big = pool.take(5000)  # larger than pooled buffers are: a fresh one
    assert len(big) == 5000
    assert pool.reused == 0
