"""Spindle's rebalance planner: a PySpark job turning a cluster snapshot into a reassignment plan
across brokers and log directories.

One plan flows through these modules (``pipeline.make_plan`` runs them in order):

  ``model``      snapshot JSON -> validated columns (numpy), goal settings
  ``scope``      what the mode may touch: dirs to empty, dirs that may receive, goals in play
  ``prepare``    per-replica aggregates and candidate order (numpy) -- ``spark_job`` does the
                 same with Spark DataFrames for the real job
  ``core``       the sequential greedy over the replicas it moves
  ``report``     reassignment JSON, balance figures, lower bounds, independent hard-rule check
  ``achievable`` which soft-goal bands the hard rules put out of reach (Offline-dir brokers,
                 racks), so the summary tells a planner shortfall from a real limit
  ``cli``        ``spindle-rebalance plan|generate``; also the ``spark-submit`` entry point
  ``generator``  synthetic skewed clusters for tests and ``bench/rebalance.py``

Pure planning (everything but ``spark_job``, ``cli`` and ``model.load_snapshot``) does no I/O.
"""
