"""Produce while verifying: Kafka's system-test pair (``VerifiableProducer`` and the verifying
consumer of ``ProduceConsumeValidateTest``) for Spindle's own system tests.

:class:`VerifiableProducer` runs an ``acks=all`` idempotent producer (librdkafka, through
confluent-kafka: the client whose idempotence handles leader changes, retries and sequence
resets as Kafka's Java client does) in a background thread. It sends ``"<run>/<partition>-<seq>"``
to every partition in turn, ``seq`` counting up per partition (``run`` tells this producer's
messages from earlier ones in the same topic), and records each acknowledged message with the
offset the broker gave it.

:func:`verify_consumed` then reads every partition from the beginning and checks Kafka's
claims: every acknowledged message is there, at the offset it was acknowledged with (when the
client was told one); no
message appears twice; each partition's messages are in the order they were sent. Messages
that were sent but never acknowledged (in flight when the test ended) may be present or not,
but at most once and in order too.

Written here rather than driving Kafka's ``VerifiableProducer`` jar because the tests need
the acknowledged set in-process while the producer keeps running (to wait for progress
between failures), which the jar only reports as a stream of JSON lines on stdout.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as CTP


class VerifiableProducer:
    """An idempotent acks=all producer in a thread that remembers what was acknowledged.

    ``rate`` caps messages per second over all partitions (the tests share two cores).
    Thread-safe reads of :attr:`acked` go through :meth:`acked_count` / :meth:`snapshot`.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: Iterable[int],
        *,
        rate: float = 200.0,
        config: dict[str, object] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = sorted(partitions)
        self.rate = rate
        self.run = uuid.uuid4().hex[:8]
        self._conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 180_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            # SPINDLE_RDKAFKA_DEBUG=eos (say) prints librdkafka's idempotence decisions.
            **(
                {"debug": os.environ["SPINDLE_RDKAFKA_DEBUG"]}
                if "SPINDLE_RDKAFKA_DEBUG" in os.environ
                else {}
            ),
            **(config or {}),
        }
        self._lock = threading.Lock()
        self.acked: dict[int, list[tuple[int, str]]] = {p: [] for p in self.partitions}
        self.sent: dict[int, int] = dict.fromkeys(self.partitions, 0)
        self.failed: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"produce-{topic}", daemon=True)

    def start(self) -> VerifiableProducer:
        self._thread.start()
        return self

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        value = (msg.value() or b"").decode()
        with self._lock:
            if err is not None:
                self.failed.append((value, str(err)))
            else:
                # librdkafka acknowledges some messages without an offset (None): those it
                # infers were written because the broker acknowledged a later sequence.
                offset = msg.offset()
                self.acked[int(msg.partition() or 0)].append(
                    (-1 if offset is None else offset, value)
                )

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.errors.append(str(err))

    def _run(self) -> None:
        producer = Producer({**self._conf, "error_cb": self._on_error})
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            for p in self.partitions:
                seq = self.sent[p]
                try:
                    producer.produce(
                        self.topic,
                        f"{self.run}/{p}-{seq}".encode(),
                        partition=p,
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    producer.poll(0.1)
                    continue
                self.sent[p] = seq + 1
            producer.poll(0)
            next_at += interval * len(self.partitions)
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0)  # no burst after a long stall
        remaining = producer.flush(self._flush_s)
        with self._lock:
            self.unflushed = remaining

    _flush_s = 120.0
    unflushed = 0

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def wait_acked(self, more: int, timeout_s: float = 60.0) -> None:
        """Wait until ``more`` messages beyond those acknowledged now are acknowledged (proof
        that produce goes on); fails naming the producer's errors if it does not."""
        target = self.acked_count() + more
        deadline = time.monotonic() + timeout_s
        while self.acked_count() < target:
            if time.monotonic() > deadline:
                with self._lock:
                    errors = self.errors[-5:]
                raise AssertionError(
                    f"{self.topic}: only {self.acked_count()} of {target} acknowledged after "
                    f"{timeout_s:.0f}s; last client errors: {errors}"
                )
            time.sleep(0.05)

    def stop(self) -> dict[int, list[tuple[int, str]]]:
        """Stop sending, wait for every message in flight to be acknowledged or failed, and
        return what was acknowledged (partition -> [(offset, value)])."""
        self._stop.set()
        self._thread.join(self._flush_s + 10)
        assert not self._thread.is_alive(), f"{self.topic}: producer did not stop"
        with self._lock:
            return {p: list(v) for p, v in self.acked.items()}


@dataclass
class Verification:
    """What the verifying consumer found (printed by the tests; :meth:`check` asserts)."""

    topic: str
    acked: int
    consumed: int
    sent: int
    missing: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    failed_sends: int = 0
    acked_without_offset: int = 0

    def __str__(self) -> str:
        return (
            f"{self.topic}: sent {self.sent}, acked {self.acked}, consumed {self.consumed}, "
            f"missing {len(self.missing)}, misplaced {len(self.misplaced)}, duplicated "
            f"{len(self.duplicated)}, out of order {len(self.out_of_order)}, failed sends "
            f"{self.failed_sends}, acked without offset {self.acked_without_offset}"
        )

    def check(self) -> None:
        problems = {
            "acked but not consumed": self.missing,
            "consumed at another offset than acked": self.misplaced,
            "consumed twice": self.duplicated,
            "consumed out of order": self.out_of_order,
            "in the wrong partition": self.foreign,
        }
        found = {k: v[:10] for k, v in problems.items() if v}
        assert not found, f"{self}: {found}"


def consume_all(
    bootstrap: str, topic: str, ends: dict[int, int], *, timeout_s: float = 60.0
) -> dict[int, list[tuple[int, str]]]:
    """Read each partition of ``topic`` from the beginning until offset ``ends[p]`` (exclusive)
    is reached: partition -> [(offset, value)]."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    got: dict[int, list[tuple[int, str]]] = {p: [] for p in ends}
    position = dict.fromkeys(ends, -1)
    try:
        consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout_s
        while any(position[p] + 1 < ends[p] for p in ends):
            if time.monotonic() > deadline:
                short = {p: (position[p] + 1, ends[p]) for p in ends if position[p] + 1 < ends[p]}
                raise AssertionError(f"{topic}: consumer stuck short of (at, want) {short}")
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            p, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            got[p].append((offset, (msg.value() or b"").decode()))
            position[p] = max(position[p], offset)
    finally:
        consumer.close()
    return got


def verify_consumed(
    bootstrap: str, producer: VerifiableProducer, *, timeout_s: float = 60.0
) -> Verification:
    """Stop ``producer`` and check everything it had acknowledged against what a consumer
    reads back (see module docstring)."""
    acked = producer.stop()
    ends = {p: max((o for o, _ in v), default=-1) + 1 for p, v in acked.items()}
    consumed = consume_all(bootstrap, producer.topic, ends, timeout_s=timeout_s)
    result = Verification(
        producer.topic,
        acked=sum(len(v) for v in acked.values()),
        consumed=0,
        sent=sum(producer.sent.values()),
        failed_sends=len(producer.failed),
        acked_without_offset=sum(1 for v in acked.values() for o, _ in v if o < 0),
    )
    for p, records in consumed.items():
        at = dict(records)
        seen: set[str] = set()
        last_seq = -1
        for offset, full in records:
            run, _, value = full.partition("/")
            if run != producer.run:
                continue  # an earlier producer's message
            result.consumed += 1
            part, _, seq_text = value.partition("-")
            if part != str(p):
                result.foreign.append(f"{value}@{p}:{offset}")
                continue
            if value in seen:
                result.duplicated.append(f"{value}@{offset}")
            seen.add(value)
            if int(seq_text) <= last_seq:
                result.out_of_order.append(f"{value}@{offset}")
            last_seq = max(last_seq, int(seq_text))
        for offset, full in acked[p]:
            value = full.partition("/")[2]
            if value not in seen:
                result.missing.append(f"{value}@{offset}")
            elif offset >= 0 and at.get(offset) != full:
                result.misplaced.append(f"{value}@{offset} (found {at.get(offset)})")
    return result
