"""Property-based checks of segments and the offset index against a plain model."""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import LogManager

from .conftest import crash, make_settings

TP = TopicPartition("prop", 0)


def _open(dirs: list[str], segment_bytes: int, index_interval: int) -> LogManager:
    return LogManager.open(
        make_settings(
            dirs, **{"log.segment.bytes": segment_bytes, "log.index.interval.bytes": index_interval}
        ),
        cluster_id="test-cluster",
        node_id=1,
        background=False,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=40),
    segment_bytes=st.integers(min_value=300, max_value=3000),
    index_interval=st.sampled_from([0, 100, 1000, 4096]),
    tear=st.integers(min_value=1, max_value=60),
)
def test_every_offset_reads_its_batch_and_a_torn_tail_recovers_to_the_last_whole_batch(
    batches: list[int], segment_bytes: int, index_interval: int, tear: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [os.path.join(tmp, "d0")]
        lm = _open(dirs, segment_bytes, index_interval)
        log = lm.get_or_create_log(TP)
        spans = []  # (base, last) per appended batch: the model
        for i, n in enumerate(batches):
            r = log.append(build_batch([bytes([i % 251]) * 20] * n))
            spans.append((r.base_offset, r.last_offset))
        assert log.log_end_offset == spans[-1][1] + 1
        for base, last in spans:
            for offset in range(base, last + 1):
                first = validate(log.read(offset, 1).records)[0]
                assert (first.base_offset, first.last_offset) == (base, last)
        # Tear the last write: recovery must end at the last whole batch.
        active = log.segment_states()[-1]
        crash(lm)
        with open(active.log_path, "ab") as f:
            f.write(build_batch([b"t" * 40])[:tear])
        lm2 = _open(dirs, segment_bytes, index_interval)
        try:
            log2 = lm2.get_log(TP)
            assert log2 is not None
            assert log2.log_end_offset == spans[-1][1] + 1
            assert os.path.getsize(active.log_path) == active.size
        finally:
            lm2.close()
