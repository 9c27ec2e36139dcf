"""Kafka record batch (magic v2) format: header parsing, base-offset rewriting, CRC32C checks.

Pure byte manipulation; no I/O here.
"""
