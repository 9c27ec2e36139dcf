"""Spindle's rebalance planner: a PySpark job turning a cluster snapshot into a reassignment plan
across brokers and log directories.
"""
