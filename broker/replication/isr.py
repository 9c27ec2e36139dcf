"""A leader's view of its followers: their log end offsets, the high watermark, and when the
ISR should grow or shrink (Kafka's ``Partition``/``Replica`` state). Pure: no I/O, time given.

* A follower's log end offset is the offset it asks to fetch from (it has everything below).
* A follower is *caught up* at a fetch that asks for the leader's log end offset or more; the
  time of its last such fetch is ``last_caught_up``.
* The high watermark is the smallest log end offset among the ISR (the leader's included): an
  offset is committed once every in-sync replica has it. It never goes back.
* A follower outside the ISR joins once its log end offset reaches the high watermark (and the
  start of the leader's epoch, so it is not missing this leader's first records), as its own
  fetch shows: a follower that leaves the ISR forgets its position until it fetches again.
* An ISR follower that has not been caught up for ``replica.lag.time.max.ms`` leaves the ISR.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FollowerState:
    log_end_offset: int = -1
    """-1 until the follower's first fetch."""
    last_caught_up: float = 0.0
    last_fetch: float = 0.0


@dataclass
class LeaderState:
    """One partition led here: ISR and epochs as the metadata says, followers as fetched."""

    node_id: int
    replicas: list[int]
    isr: list[int]
    leader_epoch: int
    epoch_start_offset: int
    """The leader's log end offset when it became leader for ``leader_epoch``."""
    high_watermark: int
    followers: dict[int, FollowerState] = field(default_factory=dict)

    @classmethod
    def become_leader(
        cls,
        *,
        node_id: int,
        replicas: list[int],
        isr: list[int],
        leader_epoch: int,
        log_end_offset: int,
        high_watermark: int,
        now: float,
    ) -> LeaderState:
        """A new term: followers count as caught up now (they get a full lag period to fetch)."""
        followers = {
            b: FollowerState(last_caught_up=now, last_fetch=now) for b in replicas if b != node_id
        }
        return cls(
            node_id,
            list(replicas),
            list(isr),
            leader_epoch,
            log_end_offset,
            high_watermark,
            followers,
        )

    def update_metadata(self, replicas: list[int], isr: list[int], now: float) -> None:
        """The metadata changed the replica set or the ISR (reassignment, controller)."""
        for b in replicas:
            if b != self.node_id and b not in self.followers:
                self.followers[b] = FollowerState(last_caught_up=now, last_fetch=now)
        for b in list(self.followers):
            if b not in replicas:
                del self.followers[b]
            elif b in self.isr and b not in isr:
                # Out of the ISR (lagging, dead, fenced): only a fetch of its own shows it
                # caught up again, not the position it had before it left.
                self.followers[b].log_end_offset = -1
        self.replicas, self.isr = list(replicas), list(isr)

    def on_fetch(self, replica: int, fetch_offset: int, leader_leo: int, now: float) -> None:
        """Record a follower's fetch. Unknown replicas are ignored (the caller refuses them)."""
        state = self.followers.get(replica)
        if state is None:
            return
        state.log_end_offset = fetch_offset
        state.last_fetch = now
        if fetch_offset >= leader_leo:
            state.last_caught_up = now

    def advance_high_watermark(self, leader_leo: int) -> int:
        """Move the high watermark to the smallest log end offset of the ISR (never back)."""
        ends = [leader_leo]
        for b in self.isr:
            if b != self.node_id:
                state = self.followers.get(b)
                ends.append(state.log_end_offset if state else -1)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
        return self.high_watermark

    def to_expand(self) -> list[int]:
        """Followers outside the ISR that have caught up to the high watermark."""
        threshold = max(self.high_watermark, self.epoch_start_offset)
        return [
            b
            for b, s in sorted(self.followers.items())
            if b not in self.isr and b in self.replicas and s.log_end_offset >= threshold
        ]

    def to_shrink(self, leader_leo: int, now: float, lag_max_s: float) -> list[int]:
        """ISR followers that have not been caught up for ``lag_max_s``."""
        out = []
        for b in self.isr:
            if b == self.node_id:
                continue
            s = self.followers.get(b)
            if s is None:
                continue
            if s.log_end_offset < leader_leo and now - s.last_caught_up > lag_max_s:
                out.append(b)
        return out
