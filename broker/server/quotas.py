"""Client quotas as Kafka defines them (pure; no I/O, time passed in).

A quota is a value of one of Kafka's keys (``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``, ``controller_mutation_rate``; ``connection_creation_rate`` for an IP)
set on an *entity*: a user, a client id, a user and a client id, or an IP address -- each name
possibly the default (``None``), which covers every name without one of its own. A request's
quota is found as Kafka's ``DefaultQuotaCallback`` finds it: the first of these entities that
sets the key, most specific first::

    user=U, client-id=C      user=U, client-id=<default>      user=U
    user=<default>, client-id=C      user=<default>, client-id=<default>      user=<default>
    client-id=C      client-id=<default>

and the rate is measured per that entity (a quota on ``user=alice`` is shared by all of
alice's clients). The rate is Kafka's sampled rate (``quota.window.num`` windows of
``quota.window.size.seconds``, measured over at least all but one of them), and a client over
its quota is told to wait ``(rate - quota) / quota * window`` milliseconds (``throttle_time_ms``),
for which its connection is also muted (KIP-219).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

CLIENT_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
IP_KEYS = frozenset({"connection_creation_rate"})
_WHOLE_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"})

QUOTA_RECORDS = "quotas"
"""The kind of the metadata store's security records that hold quotas."""

Entity = tuple[tuple[str, str | None], ...]
"""Entity types and names, sorted by type: ``(("client-id", None), ("user", "alice"))``;
a ``None`` name is the default."""


class InvalidQuota(ValueError):
    """A quota request Kafka refuses (INVALID_REQUEST), with the reason."""


def entity_of(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of AlterClientQuotas' ``entity`` list, checked as Kafka checks it."""
    items = list(parts)
    types = [t for t, _ in items]
    if not items:
        raise InvalidQuota("Invalid empty client quota entity")
    if len(set(types)) != len(types):
        raise InvalidQuota(f"Duplicate entity type in client quota entity: {types}")
    unknown = sorted(set(types) - {USER, CLIENT_ID, IP})
    if unknown:
        raise InvalidQuota(f"Unsupported client quota entity type: {unknown[0]}")
    if IP in types:
        if len(types) > 1:
            raise InvalidQuota("Invalid quota entity combination: ip cannot be combined")
        name = items[0][1]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise InvalidQuota(f"{name} is not a valid IP or resolvable host") from None
    return tuple(sorted(items))


def check_value(entity: Entity, key: str, value: float) -> None:
    """Refuse a key the entity cannot have or a value no quota can be."""
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in keys:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if key in _WHOLE_KEYS and not float(value).is_integer():
        raise InvalidQuota(f"Configuration {key} must be a Long value")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuota(f"Invalid value {value} for configuration key {key}: must be positive")


def apply_ops(
    current: Mapping[str, float], ops: Iterable[tuple[str, float, bool]]
) -> dict[str, float]:
    """The entity's quotas after AlterClientQuotas' ops (key, value, remove)."""
    out = dict(current)
    for key, value, remove in ops:
        if remove:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def quota_record(entity: Entity, values: Mapping[str, float]) -> tuple[str, bytes]:
    """The id and value of an entity's record in the metadata store (id: a hash of the
    entity, so each entity has one record)."""
    ident = json.dumps([list(p) for p in entity], separators=(",", ":"))
    value = json.dumps(
        {"entity": [list(p) for p in entity], "values": dict(sorted(values.items()))},
        separators=(",", ":"),
    ).encode()
    return hashlib.sha256(ident.encode()).hexdigest()[:32], value


def quotas_from_records(records: Mapping[str, bytes]) -> dict[Entity, dict[str, float]]:
    out: dict[Entity, dict[str, float]] = {}
    for value in records.values():
        d = json.loads(value)
        out[tuple((t, n) for t, n in d["entity"])] = {k: float(v) for k, v in d["values"].items()}
    return out


@dataclass(frozen=True, slots=True)
class Component:
    """One DescribeClientQuotas filter component: match type 0 exact name, 1 the default,
    2 any specified (non-default) name."""

    entity_type: str
    match_type: int
    match: str | None

    def matches(self, name: str | None) -> bool:
        if self.match_type == 0:
            return name == self.match
        if self.match_type == 1:
            return name is None
        return name is not None


def check_components(components: list[Component]) -> None:
    types = [c.entity_type for c in components]
    if len(set(types)) != len(types):
        raise InvalidQuota(f"Duplicate entity type in filter: {types}")
    for c in components:
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidQuota(f"Custom entity type {c.entity_type} not supported")
        if c.match_type not in (0, 1, 2):
            raise InvalidQuota(f"Unknown match type {c.match_type}")
        if c.match_type == 0 and c.match is None:
            raise InvalidQuota("An exact match needs a name")


def describe(
    quotas: Mapping[Entity, Mapping[str, float]], components: list[Component], strict: bool
) -> list[tuple[Entity, dict[str, float]]]:
    """The entities a DescribeClientQuotas filter selects, with their quotas: each component's
    type must be in the entity and match its name; ``strict`` also leaves out entities with
    types the filter does not name."""
    check_components(components)
    wanted = {c.entity_type: c for c in components}
    out = []
    for entity, values in sorted(quotas.items(), key=lambda kv: repr(kv[0])):
        names = dict(entity)
        if strict and set(names) != set(wanted):
            continue
        if all(t in names and c.matches(names[t]) for t, c in wanted.items()) and values:
            out.append((entity, dict(values)))
    return out


def resolve(
    quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[Entity, float] | None:
    """The entity whose quota ``key`` applies to a request of ``user`` (its principal's
    name: ``ANONYMOUS`` when unauthenticated, as in Kafka) with ``client_id``, and the quota;
    None if unlimited."""
    candidates: list[Entity] = []
    for u in (user, None):
        candidates += [
            ((CLIENT_ID, client_id), (USER, u)),
            ((CLIENT_ID, None), (USER, u)),
            ((USER, u),),
        ]
    candidates += [((CLIENT_ID, client_id),), ((CLIENT_ID, None),)]
    for entity in candidates:
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return entity, value
    return None


@dataclass
class Rate:
    """Kafka's sampled rate (``SampledStat`` with ``Rate``): ``samples`` windows of
    ``window_ms``; the rate is the sum over the live windows divided by the time they span,
    at least ``samples - 1`` whole windows (so a burst at start-up is not read as a huge rate)."""

    samples: int = 11
    window_ms: int = 1000
    _windows: list[list[float]] = field(default_factory=list)  # [start_ms, total]

    def record(self, value: float, now_ms: float) -> None:
        self._expire(now_ms)
        if not self._windows or now_ms - self._windows[-1][0] >= self.window_ms:
            self._windows.append([now_ms, 0.0])
        self._windows[-1][1] += value

    def _expire(self, now_ms: float) -> None:
        horizon = now_ms - self.samples * self.window_ms
        self._windows = [w for w in self._windows if w[0] > horizon]

    def window_span_ms(self, now_ms: float) -> float:
        self._expire(now_ms)
        oldest = self._windows[0][0] if self._windows else now_ms
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        minimum = self.samples - 1
        if full < minimum:
            elapsed += (minimum - full) * self.window_ms
        return elapsed

    def rate(self, now_ms: float) -> float:
        """Per second."""
        span = self.window_span_ms(now_ms)
        total = sum(w[1] for w in self._windows)
        return total / (span / 1000.0) if span > 0 else 0.0


def throttle_ms(rate: Rate, quota: float, now_ms: float) -> int:
    """How long a client over ``quota`` must wait so its rate falls back to it (Kafka's
    ``ClientQuotaManager.throttleTime``); 0 within the quota."""
    observed = rate.rate(now_ms)
    if observed <= quota:
        return 0
    return int((observed - quota) / quota * rate.window_span_ms(now_ms))
