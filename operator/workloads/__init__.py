"""Workload launchers: the Kubernetes workloads the operator starts and watches, one module
each, never run in the operator's own process.

``planner`` launches a Rebalance's planner (a Job: Spark in local mode, or ``spark-submit``
in cluster mode) and reads what it wrote; ``plan_job`` is the program that workload runs.
"""
