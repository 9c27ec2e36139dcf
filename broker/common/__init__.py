"""Shared vocabulary of the broker: error codes, topic-partition ids, clocks and settings.

Pure data and small helpers; imports nothing else from the broker. It is also the broker's
contract with the operator, the only part of the broker the operator may import
(import-linter): ``registration`` is the layout of a broker's registration record in etcd,
which the operator reads each directory's id from.
"""
