"""Spindle's Kubernetes operator (kopf): Broker, LogVolume, Reassignment and Rebalance resources."""
