"""Shared vocabulary of the broker: error codes, topic-partition ids, clocks and settings.

Pure data and small helpers; imports nothing else from the broker.
"""
