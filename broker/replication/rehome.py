"""Re-homing a replica whose log directory failed, live (a Spindle extension).

Kafka gives such a replica a new home on the same broker only when the broker restarts
without the directory: the controller sees the replica's directory LOST, the broker creates
it empty in a live directory and it fetches everything again from the leader (KIP-858). A
broker with a failed disk would have to be bounced for that. Spindle does the same without the
bounce when asked through AlterReplicaLogDirs for a replica that is offline here (Kafka
answers KAFKA_STORAGE_ERROR):

1. refused while this broker leads the partition (a replica in a failed directory never
   should; the controller moves leadership as soon as it hears of the failure) and while it
   has no leader (nothing to refetch from: the failed directory may hold the only copy);
2. storage makes an empty replica in the requested directory (online and not cordoned,
   :meth:`~spindle.broker.storage.LogManager.recreate_offline_replica`);
3. the new directory is recorded with the controller (AssignReplicasToDirs), which makes the
   replica eligible for the ISR again (its directory is no longer LOST or offline);
4. the replica follows its leader from offset 0 (or the leader's log start: the fetcher's
   OFFSET_OUT_OF_RANGE handling) and rejoins the ISR once caught up, through the leader's
   ordinary ISR expansion.

Asked twice, the second request finds the replica online in that directory: success, nothing
done. Event loop only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

WHY = {
    ErrorCode.LOG_DIR_NOT_FOUND: "it is not one of this broker's log.dirs",
    ErrorCode.KAFKA_STORAGE_ERROR: "it is offline (or already holds a directory for it)",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "it is cordoned (cordoned.log.dirs)",
}


async def rehome_offline_replica(
    replicas: ReplicaManager, tp: TopicPartition, path: str
) -> ErrorCode:
    """Give the offline replica ``tp`` of this broker a new, empty home in ``path`` (see the
    module docstring); the error code to answer, each refusal logged with its reason (the
    AlterReplicaLogDirs response has no room for a message)."""
    node = replicas.node_id
    topic = replicas.metadata.topics.get(tp.topic)
    part = topic.partitions.get(tp.partition) if topic is not None else None
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if node not in part.replicas:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if part.leader == node or part.leader < 0:
        # Leading it: wait until the controller moves leadership off the failed directory.
        # No leader: nothing to refetch from -- the failed directory may hold the only copy.
        who = "this broker leads it" if part.leader == node else "it has no leader"
        log.warning("%s: not re-homed into %s: %s", tp, path, who)
        return ErrorCode.KAFKA_STORAGE_ERROR
    code = replicas.logs.recreate_offline_replica(tp, path)
    if code is not ErrorCode.NONE:
        log.warning("%s: not re-homed into %s: %s (%s)", tp, path, WHY.get(code, ""), code.name)
        return code
    replicas.producers.forget_partition(tp)
    created = replicas.logs.get_log(tp)
    dir_id = replicas.dir_ids().get(created.logdir_path) if created is not None else None
    log.info("%s: its directory is offline; re-created empty in %s, refetching", tp, path)
    if dir_id is not None:
        await replicas.assigner.assign_replica_dirs(node, {tp: dir_id})
    replicas.roles.apply({name: t.partitions for name, t in replicas.metadata.topics.items()})
    return ErrorCode.NONE
