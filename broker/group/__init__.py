"""The group coordinator (classic protocol) and the committed offsets of consumer groups.

Kafka's ``GroupCoordinator`` as its own component, beside replication and the controller:
the server's request handlers only translate wire messages into calls here. A broker
coordinates the groups whose ``__consumer_offsets`` partition it leads
(``abs(hash(group_id)) % offsets.topic.num.partitions``, Java's ``String.hashCode``), loads them
from that partition when it becomes its leader and forgets them when it stops, so coordination
moves with leadership. Offsets and group metadata are records of that partition in Kafka's
key/value formats (:mod:`.records`).

Runs on the event loop (not thread-safe); time comes from an injected clock and timers are
driven by :meth:`GroupCoordinator.tick`, so tests run on fake time. Disk access goes through
the storage layer's ``Log`` (and its failure channel).
"""
