"""The controller role: cluster metadata in etcd, changed only with compare-on-revision txns.

``etcd`` is the client, ``model`` the pure metadata records and planners, ``store`` the
durable, cached view of the metadata, and ``controller`` the operations that validate and apply
changes. In this version one broker is its own controller (``SingleBrokerController``); the
multi-broker controller (elected through an etcd lease) implements the same ``Controller``
protocol over the same store, so the request handlers do not change when it arrives.
"""
