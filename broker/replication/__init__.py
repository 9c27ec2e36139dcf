"""Replicas between metadata and storage: the replica manager (``replica_manager``: local
replicas created and deleted as the metadata says, the append path, the high watermark,
acks=all waits, directories reported back to the controller), the roles of each replica
(``roles``: leader state or a follower's fetching), the leader's view of its followers
(``isr``: log ends, high watermark, ISR expand/shrink; pure), follower fetching over the Kafka
protocol (``fetcher``), the replication throttles (``quota``: leader and follower byte-rate
quotas for the throttled replicas; pure), idempotent-producer state (``producer_state``) and the protocols through
which it reads the metadata (``metadata``).

Runs on the broker's event loop (not thread-safe); reads the metadata and writes ISR changes
and directory reports through protocols, so it never imports the controller (a sibling layer).
"""
