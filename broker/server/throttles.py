"""Client quotas enforced: the byte rates of produce and fetch, per quota entity, and the
throttle time each response carries (Kafka's ``ClientQuotaManager``).

The rules are :mod:`.quotas`' (which entity's quota applies, the sampled rate, the throttle
time); this module keeps the rates, one per quota key and entity, and is told the quotas in
force whenever the metadata watch applies a change to them. A produce over its quota is still
appended and answered with ``throttle_time_ms``; a fetch over its quota is answered empty with
``throttle_time_ms`` and its bytes not counted, as Kafka does (KIP-219); in both cases the
connection then reads nothing for that long (:mod:`.connection`), so a client that ignored the
throttle time gains nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from spindle.broker.common.clock import Clock

from .quotas import Entity, Rate, quotas_from_records, resolve, throttle_ms
from .security.authorizer import RequestContext

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"


def user_of(principal: str) -> str:
    """The user a quota names: the principal's name (``User:alice`` -> ``alice``;
    ``User:ANONYMOUS`` -> ``ANONYMOUS``, as in Kafka)."""
    return principal.partition(":")[2] or principal


class ClientQuotaManager:
    """The produce and fetch byte rates of every quota entity (event loop only)."""

    def __init__(self, clock: Clock, *, samples: int = 11, window_ms: int = 1000) -> None:
        self._clock = clock
        self._samples = samples
        self._window_ms = window_ms
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[str, Entity], Rate] = {}

    def set_quotas(self, records: Mapping[str, bytes]) -> None:
        """The quotas in force, from the metadata store's quota records. Rates of entities
        that lost their quota are dropped."""
        self._quotas = quotas_from_records(records)
        self._rates = {k: r for k, r in self._rates.items() if k[1] in self._quotas}

    @property
    def active(self) -> bool:
        return bool(self._quotas)

    def _now_ms(self) -> float:
        return self._clock.monotonic() * 1000.0

    def _rate(self, key: str, ctx: RequestContext) -> tuple[Rate, float] | None:
        found = resolve(self._quotas, key, user_of(ctx.principal), ctx.client_id or "")
        if found is None:
            return None
        entity, quota = found
        rate = self._rates.get((key, entity))
        if rate is None:
            rate = self._rates[(key, entity)] = Rate(self._samples, self._window_ms)
        return rate, quota

    def record_produce(self, ctx: RequestContext, nbytes: int) -> int:
        """Count ``nbytes`` appended for this client; the throttle time its answer carries."""
        found = self._rate(PRODUCE, ctx)
        if found is None:
            return 0
        rate, quota = found
        now = self._now_ms()
        rate.record(nbytes, now)
        return throttle_ms(rate, quota, now)

    def fetch_cap(self, ctx: RequestContext) -> int | None:
        """The most bytes one fetch may return to this client: what its quota allows over the
        rate's window (Kafka's ``getMaxValueInQuotaWindow``), so that no single answer is
        over the quota by itself -- it would be refused, uncounted, every time."""
        found = self._rate(FETCH, ctx)
        if found is None:
            return None
        rate, quota = found
        return max(1, int(quota * rate.window_span_ms(self._now_ms()) / 1000))

    def record_fetch(self, ctx: RequestContext, nbytes: int) -> int:
        """Count ``nbytes`` about to be sent to this client, unless that takes it over its
        quota: then nothing is counted and the answer (sent empty) carries the throttle time."""
        found = self._rate(FETCH, ctx)
        if found is None:
            return 0
        rate, quota = found
        now = self._now_ms()
        rate.record(nbytes, now)
        throttle = throttle_ms(rate, quota, now)
        if throttle > 0:
            rate.record(-nbytes, now)
        return throttle
