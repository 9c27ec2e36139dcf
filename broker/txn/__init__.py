"""The transaction coordinator (issue #40: transactions and exactly-once). Empty today; this
docstring is its contract.

Kafka's ``TransactionCoordinator`` as its own component, beside the group coordinator
(:mod:`spindle.broker.group`) and shaped like it: a broker coordinates the transactional ids
whose ``__transaction_state`` partition it leads (``abs(hash(transactional.id)) %
transaction.state.log.num.partitions``, Java's ``String.hashCode``), loads their state from that
partition when it becomes its leader and forgets it when it stops, so coordination moves with
leadership. What lives here: the transaction state machine (Empty, Ongoing, PrepareCommit,
PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence, Dead) as pure code, producer
id and epoch fencing with the producer ids the controller hands out (``apis/producer_ids``),
the records of ``__transaction_state`` in Kafka's formats, timeouts
(``transaction.max.timeout.ms``, ``transactional.id.expiration.ms``) driven by a ``tick`` on an
injected clock, and the sender of the WriteTxnMarkers to partition leaders.

What does not live here: the partition side of a transaction (the last stable offset, aborted
transactions in ``.txnindex``, ongoing transactions in the producer state) belongs to storage
and replication, where appends already keep producer state; and the wire handlers
(InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers,
DescribeTransactions, ListTransactions) are one API family module in ``server/apis/`` that only
translates messages into calls here.

Layering (import-linter): beside ``group``, ``replication`` and ``controller``; it may use
storage's ``Log`` (through the failure channel) and the common layer, never the server, and
the two coordinators stay independent of each other.
"""
