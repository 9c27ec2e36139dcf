"""Client quotas' rules (``server.quotas``, pure): entities, keys, Kafka's precedence, the
sampled rate and the throttle time it gives."""

from __future__ import annotations

import pytest
from spindle.broker.server.quotas import (
    Component,
    InvalidQuota,
    Rate,
    check_value,
    describe,
    entity_of,
    quota_record,
    quotas_from_records,
    resolve,
    throttle_ms,
)
from spindle.broker.server.security.authorizer import RequestContext
from spindle.broker.server.throttles import ClientQuotaManager

ALICE_APP = entity_of([("user", "alice"), ("client-id", "app")])
ALICE = entity_of([("user", "alice")])
ANY_USER = entity_of([("user", None)])
APP = entity_of([("client-id", "app")])
ANY_CLIENT = entity_of([("client-id", None)])


def test_the_most_specific_entity_that_sets_the_key_wins() -> None:
    quotas = {
        ANY_CLIENT: {"producer_byte_rate": 1.0},
        APP: {"producer_byte_rate": 2.0},
        ANY_USER: {"producer_byte_rate": 3.0, "consumer_byte_rate": 30.0},
        ALICE: {"producer_byte_rate": 4.0},
        ALICE_APP: {"consumer_byte_rate": 50.0},
    }
    assert resolve(quotas, "producer_byte_rate", "alice", "app") == (ALICE, 4.0)
    assert resolve(quotas, "consumer_byte_rate", "alice", "app") == (ALICE_APP, 50.0)
    assert resolve(quotas, "producer_byte_rate", "bob", "app") == (ANY_USER, 3.0)
    # an unauthenticated client is the user ANONYMOUS, as in Kafka: the default user's quota
    assert resolve(quotas, "producer_byte_rate", "ANONYMOUS", "other") == (ANY_USER, 3.0)
    del quotas[ANY_USER]
    assert resolve(quotas, "producer_byte_rate", "ANONYMOUS", "other") == (ANY_CLIENT, 1.0)
    assert resolve(quotas, "producer_byte_rate", "ANONYMOUS", "app") == (APP, 2.0)
    assert resolve({}, "producer_byte_rate", "alice", "app") is None


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ([], "empty"),
        ([("user", "a"), ("user", "b")], "Duplicate"),
        ([("group", "g")], "Unsupported client quota entity type: group"),
        ([("ip", "10.0.0.1"), ("user", "a")], "ip cannot be combined"),
        ([("ip", "not-an-ip")], "not a valid IP"),
    ],
)
def test_entities_kafka_refuses_are_refused_with_the_reason(
    parts: list[tuple[str, str | None]], message: str
) -> None:
    with pytest.raises(InvalidQuota, match=message):
        entity_of(parts)


def test_keys_and_values_are_checked_against_the_entity() -> None:
    check_value(ALICE, "producer_byte_rate", 1024)
    check_value(entity_of([("ip", "10.0.0.1")]), "connection_creation_rate", 5)
    with pytest.raises(InvalidQuota, match="Invalid configuration key connection_creation_rate"):
        check_value(ALICE, "connection_creation_rate", 5)
    with pytest.raises(InvalidQuota, match="must be a Long"):
        check_value(ALICE, "producer_byte_rate", 10.5)
    with pytest.raises(InvalidQuota, match="must be positive"):
        check_value(ALICE, "request_percentage", -1)


def test_describe_selects_by_exact_default_or_any_name_and_strict_drops_wider_entities() -> None:
    quotas = {
        ALICE: {"producer_byte_rate": 1.0},
        ALICE_APP: {"producer_byte_rate": 2.0},
        ANY_USER: {"producer_byte_rate": 3.0},
    }
    exact = [Component("user", 0, "alice")]
    assert [e for e, _ in describe(quotas, exact, strict=False)] == sorted(
        [ALICE, ALICE_APP], key=repr
    )
    assert [e for e, _ in describe(quotas, exact, strict=True)] == [ALICE]
    assert [e for e, _ in describe(quotas, [Component("user", 1, None)], strict=True)] == [ANY_USER]
    specified = describe(quotas, [Component("user", 2, None)], strict=True)
    assert [e for e, _ in specified] == [ALICE]


def test_records_round_trip_one_per_entity() -> None:
    rid, value = quota_record(ALICE_APP, {"producer_byte_rate": 5.0})
    rid2, _ = quota_record(ALICE_APP, {"producer_byte_rate": 9.0})
    assert rid == rid2
    assert quotas_from_records({rid: value}) == {ALICE_APP: {"producer_byte_rate": 5.0}}


def test_the_rate_spans_at_least_all_but_one_window() -> None:
    """A first burst is read over ten seconds, as Kafka reads it, not as a huge rate."""
    rate = Rate(samples=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    assert rate.rate(now_ms=0) == pytest.approx(1000.0)  # 10,000 bytes over 10 s
    assert throttle_ms(rate, quota=500.0, now_ms=0) == 10_000  # (1000-500)/500 * 10 s
    assert throttle_ms(rate, quota=2000.0, now_ms=0) == 0


def test_old_windows_expire_so_the_rate_falls_back() -> None:
    rate = Rate(samples=3, window_ms=1000)
    rate.record(3000, now_ms=0)
    assert rate.rate(now_ms=500) == pytest.approx(1200.0)  # 3000 bytes over 2.5 s
    assert rate.rate(now_ms=3500) == 0.0


def test_a_client_waiting_its_throttle_time_is_back_at_its_quota() -> None:
    rate = Rate(samples=11, window_ms=1000)
    now, sent = 0.0, 0
    for _ in range(400):  # a producer of 1,000-byte batches that waits what it is told
        rate.record(1000, now)
        sent += 1000
        now += max(throttle_ms(rate, quota=1000.0, now_ms=now), 1)
    assert sent / (now / 1000) == pytest.approx(1000.0, rel=0.05)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def wall_ms(self) -> int:
        return int(self.t * 1000)

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def _ctx(client_id: str, principal: str = "User:ANONYMOUS") -> RequestContext:
    return RequestContext(principal, client_id, "127.0.0.1:5000", "PLAINTEXT")


def test_a_fetch_is_capped_at_what_the_quota_allows_over_the_window_and_a_throttled_one_is_not_counted() -> (
    None
):
    clock = _Clock()
    manager = ClientQuotaManager(clock)
    rid, value = quota_record(APP, {"consumer_byte_rate": 1000.0, "producer_byte_rate": 500.0})
    manager.set_quotas({rid: value})
    assert manager.fetch_cap(_ctx("app")) == 10_000  # 1,000 B/s over the 10 s minimum window
    assert manager.fetch_cap(_ctx("other")) is None
    assert manager.record_fetch(_ctx("app"), 10_000) == 0  # exactly the quota
    throttled = manager.record_fetch(_ctx("app"), 5_000)
    assert throttled == 5_000  # (15,000/10 s - 1,000) / 1,000 * 10 s
    clock.t += 0.5
    # the throttled 5,000 bytes were not counted: the rate is back under the quota
    assert manager.record_fetch(_ctx("app"), 0) == 0
    assert manager.record_produce(_ctx("app"), 10_000) == 10_000
    manager.set_quotas({})
    assert manager.record_produce(_ctx("app"), 10_000) == 0
