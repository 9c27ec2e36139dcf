"""The planner's Spark side: the preparation (``job``: per-replica aggregates and the
candidate order as DataFrames, and the session) and the count phases' proposer rounds as
Spark jobs (``propose``), running the same array code as ``search.propose``.

The only planner modules that import pyspark. May import ``input``, ``goals`` and ``search``.
"""
