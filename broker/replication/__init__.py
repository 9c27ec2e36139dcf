"""Replicas between metadata and storage: the replica manager (``replica_manager``: local
replicas created and deleted as the metadata says, the append path, the high watermark,
directories reported back to the controller) and idempotent-producer state
(``producer_state``). Follower fetchers and ISR tracking arrive with the multi-broker issue.

Runs on the broker's event loop (not thread-safe); reads the metadata through protocols, so it
never imports the controller (a sibling layer).
"""
