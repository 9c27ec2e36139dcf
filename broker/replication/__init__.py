"""Replicas between metadata and storage, and the data path (Kafka's ``ReplicaManager`` with its
delayed operations), one module per job:

* ``replica_manager``: the object the broker holds; wires the parts below and offers their
  entry points, among them the two request paths ``append_records`` and ``fetch_records``
  that the Produce and Fetch handlers call with the records of ``requests``;
* ``lifecycle``: which local replicas exist and which role each takes, as the metadata watch
  says (created, deleted, led, followed), the directory reports, dynamic broker configs, and
  the metadata revision applied here (handlers wait for it instead of creating logs);
* ``appends``: a produce's batches into the leader replicas, with idempotent-producer state
  (``producer_state``) and min.insync.replicas, and its acks=all wait;
* ``reads``: a fetch's reads from the leader replicas, with the leader's replication
  throttle, follower positions and the long poll;
* ``purgatory``: where those requests wait (DelayedProduce, DelayedFetch);
* ``roles`` (leader state or a follower's fetching), ``isr`` (the leader's view of its
  followers: log ends, high watermark, ISR expand/shrink; pure), ``fetcher`` (follower
  fetching over the Kafka protocol), ``leader_epochs`` and ``truncation`` (KIP-101/279 rules,
  pure), ``quota`` (the leader and follower byte-rate quotas of the throttled replicas and
  the follower's pacing; pure), ``rehome`` (AlterReplicaLogDirs of an offline replica), and
  ``metadata`` (the protocols through which all of it reads the metadata).

Runs on the broker's event loop (not thread-safe); reads the metadata and writes ISR changes
and directory reports through protocols, so it never imports the controller (a sibling layer).
Imports storage, peer, protocol, records and common below it; never the server.
"""
