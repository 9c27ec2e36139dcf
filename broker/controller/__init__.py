"""The controller role: cluster metadata in etcd, changed only with compare-on-revision txns.

Modules: ``etcd`` (the JSON-gateway client: kv, txn, leases), ``watch`` (following a key range
from a revision), ``model`` (pure metadata records), ``store`` (the cached view of the metadata,
kept current by a watch, with conditional writes), ``election`` (one active controller per
cluster, fenced by its term), ``session`` (a broker's registration and heartbeat),
``liveness`` (the active controller's own clock on those sessions, Kafka's heartbeat manager:
a silent broker is fenced at its session timeout, not at etcd's next expiry tick), the pure
decision modules ``placement`` (striped rack-aware placement, directories, KIP-1066 cordons) and
``partition_change`` (leader election, ISR on broker/directory loss, KIP-455 reassignment),
and ``controller`` (the operations the request handlers call; ``SingleBrokerController``
serves a one-broker cluster), and ``modes`` (pure: which controller mode a prefix runs in and
who may join it -- a second broker under a single broker's prefix is refused).

Why etcd watches replace the seeds' controller-to-broker RPCs
-------------------------------------------------------------
In the seeds (004, 003) the controller writes its decision to ZooKeeper and then *also* pushes
it to every affected broker (LeaderAndIsr, StopReplica, UpdateMetadata), because ZooKeeper
watches were one-shot and lossy and reading whole state back was expensive. A push can be lost
(broker down, controller failing over), so Kafka needed epochs on every request and a full
resend on controller failover; KRaft replaced the pushes by a replicated metadata log that each
broker follows from an offset. etcd already is such a log: every committed change has a
revision, and a watch from revision R delivers every later change, in order, exactly once, and
can be resumed from the last revision seen after any disconnect. So Spindle's brokers follow
the metadata with one watch (``MetadataStore.follow``) and nothing is pushed:

* the etcd **revision** is the metadata offset (KRaft's ``highestOffset``); a broker's view is
  "everything up to revision R", and a reload after compaction is KRaft's snapshot load;
* **LeaderAndIsr** -> the watched ``P/topics/<name>`` key: a broker whose id appears in a
  partition's replicas hosts it; ``leader``/``leader_epoch`` say whether it leads or follows and
  whom; ``isr`` and ``partition_epoch`` are what the leader may change (AlterPartition) with a
  compare on that key's revision;
* **StopReplica** -> a broker no longer in a partition's replicas (reassignment finished), or
  the topic key deleted: the broker stops and deletes its replica;
* **UpdateMetadata** -> the same watch: every broker answers Metadata from its own view,
  live brokers being those with a ``P/sessions/<id>`` key;
* **BrokerRegistration / BrokerHeartbeat** (broker -> controller) -> the broker's own
  ``P/brokers/<id>`` and ``P/sessions/<id>`` keys (``session``), the heartbeat being the
  session lease's keepalive and the offline directories the session value; the active
  controller also asks each broker directly every heartbeat interval and ends the session of
  one silent for the session timeout (``liveness``), as Kafka's controller fences on time;
* **controller failover** needs no resend: the new controller loads the same keys and
  continues; a deposed one is fenced by etcd (``election``).
"""
