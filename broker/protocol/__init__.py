"""Kafka wire protocol: frames, request/response headers and message bodies. Pure: no I/O here.

Bodies are decoded and encoded by kafka-python 3.x's schema-driven codec, which ships Kafka's own
JSON message schemas (``kafka/protocol/schemas/resources``) and handles flexible versions,
compact types and tagged fields. It was evaluated against what the broker needs (decode every
request version we advertise, encode every response version, the ApiVersions v0 fallback) and
found sufficient, so Spindle declares which versions it serves (:mod:`.apis`) and leaves the byte
layout to the schemas. The request header is parsed here by hand because it must be read before
the API and version are known, and must survive unknown keys and versions (KIP-511).
"""
