"""The controller role: metadata in etcd, leader election, ISR changes and reassignments."""
