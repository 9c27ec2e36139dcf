"""Kafka wire protocol: framing, request/response headers and schema-driven codecs.

Never touches sockets or disks.
"""
