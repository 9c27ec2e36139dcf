"""Fetches large enough to be sent from the segment files with sendfile return the same bytes,
batch for batch, as the copying path: across segment rolls, and while a replica move copies
the partition to another directory and swaps it in."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kafka.protocol.admin import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceResponse
from spindle.broker.records.batch import validate

from .conftest import Etcd, make_broker
from .wire import Wire, alter_replica_log_dirs, create_topic, fetch_request, produce_request

SENDFILE_MIN_BYTES = 65536  # spindle.broker.server.apis.produce_fetch: at or above it, no copy
TOPIC = "zero-copy"


def _read_log(wire: Wire, *, per_fetch: int, until: int) -> tuple[bytes, list[int]]:
    """Raw record bytes of offsets [0, until) and the size of each fetch's answer."""
    out = bytearray()
    sizes = []
    offset = 0
    while offset < until:
        part = (
            wire.call(fetch_request(TOPIC, offset, partition_max_bytes=per_fetch), FetchResponse)
            .responses[0]
            .partitions[0]
        )
        assert part.error_code == 0
        batches = [h for h in validate(part.records) if h.base_offset < until]
        assert batches
        assert batches[0].base_offset <= offset
        end = batches[-1].position + batches[-1].size
        out += part.records[:end]
        sizes.append(len(part.records))
        offset = batches[-1].next_offset
    return bytes(out), sizes


def _produce(wire: Wire, start: int, count: int) -> None:
    for i in range(start, start + count):
        values = [f"{i:06d}-{j:03d}".encode() * 100 for j in range(20)]  # one ~20 KB batch
        resp = wire.call(produce_request(TOPIC, 0, values), ProduceResponse)
        assert resp.responses[0].partition_responses[0].error_code == 0


def _fd_count_settles(pid: int, *, at_most: int, within_s: float = 10.0) -> bool:
    """Whether the process's open descriptors fall to ``at_most`` within ``within_s``."""
    deadline = time.monotonic() + within_s
    while len(os.listdir(f"/proc/{pid}/fd")) > at_most:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _placement(wire: Wire) -> set[tuple[str, bool]]:
    resp = wire.call(DescribeLogDirsRequest[4](topics=None), DescribeLogDirsResponse)
    return {
        (r.log_dir, p.is_future_key)
        for r in resp.results
        for t in r.topics
        if t.name == TOPIC
        for p in t.partitions
    }


def test_sendfile_fetches_match_copied_batches_across_rolls_and_a_move_swap(
    tmp_path: Path, etcd: Etcd
) -> None:
    broker = make_broker(
        tmp_path,
        etcd,
        dirs=2,
        extra={
            "log.segment.bytes": "300000",
            # ~0.5 s per MB copied: the move is in progress for many fetches, then swaps.
            "replica.alter.log.dirs.io.max.bytes.per.second": "2000000",
        },
    )
    broker.start()
    try:
        with Wire(broker.port) as wire:
            create_topic(wire, TOPIC)
            _produce(wire, 0, 60)  # 60 batches, 1200 offsets, ~1.2 MB in 5 segments
            leo = 60 * 20
            copied, copied_sizes = _read_log(wire, per_fetch=30_000, until=leo)
            assert max(copied_sizes) < SENDFILE_MIN_BYTES  # one batch a fetch: copied
            spliced, spliced_sizes = _read_log(wire, per_fetch=1 << 20, until=leo)
            assert min(spliced_sizes) >= SENDFILE_MIN_BYTES  # every answer sent with sendfile
            assert len(spliced_sizes) >= 4  # answers end at segment boundaries: crossed rolls
            assert spliced == copied
            # Every range handed to a response is closed once sent: no descriptor leaks.
            assert broker.proc is not None
            fds = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
            for _ in range(5):
                assert _read_log(wire, per_fetch=1 << 20, until=leo)[0] == copied
            # At most as many as before once the broker has finished with the last answer: it
            # may close an idle descriptor of its own meanwhile (seen under load: 17 -> 16), and
            # the last answer's segment range may still be open for a moment after its bytes
            # arrived (seen under load: 17 -> 18). A leak stays; a range being closed does not.
            assert _fd_count_settles(broker.proc.pid, at_most=fds), fds

            (src,) = {d for d, _ in _placement(wire)}
            dest = next(d for d in broker.log_dirs if d != src)
            resp = alter_replica_log_dirs(wire, dest, [TOPIC], version=1)
            assert resp.results[0].partitions[0].error_code == 0
            passes_during_move = 0
            produced = 60
            deadline = time.monotonic() + 120
            while _placement(wire) != {(dest, False)}:
                assert time.monotonic() < deadline, _placement(wire)
                passes_during_move += 1
                if passes_during_move <= 8:  # appends roll segments during the move, then
                    _produce(wire, produced, 2)  # stop so the copy catches up and swaps
                    produced += 2
                spliced, _ = _read_log(wire, per_fetch=1 << 20, until=leo)
                assert spliced == copied
            assert passes_during_move >= 2
            end = produced * 20
            after_copy, _ = _read_log(wire, per_fetch=30_000, until=end)
            after_spliced, sizes = _read_log(wire, per_fetch=1 << 20, until=end)
            assert max(sizes) >= SENDFILE_MIN_BYTES
            assert after_spliced == after_copy
            assert after_copy.startswith(copied)
            assert len(validate(after_copy)) == produced
    finally:
        broker.stop()
