"""Spindle's broker: a Kafka-protocol broker that keeps partitions in several log directories (JBOD).

Layers import one way: server -> replication/controller -> storage -> protocol/records -> common;
``peer`` (a connection to another broker) sits beside storage.
"""
