"""The part of the broker that owns disks: log directories, segments, partition logs,
the log manager, the single disk-failure channel and the replica mover (KIP-112, KIP-113, KIP-858).
"""
