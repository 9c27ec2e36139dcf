"""The greedy search: the state it changes one move at a time, where a replica may go, and
the steps that run in the goals' order.

  ``prepare``       per-replica aggregates and candidate order (numpy; ``spark.job`` does the
                    same with Spark DataFrames for the real job)
  ``state``         ``PlannerState``: loads, counts, targets, ``apply`` and the move budget
  ``placement``     the destination search and source picking every phase shares
  ``core``          the driver: the steps in the goals' order, each keeping the goals before it
  ``byte_phases``   evacuation, rack fixes, capacity relief, broker and disk byte balance
  ``count_phases``  replica and leader counts (proposer rounds, then one move at a time),
                    and leaders by preferred-leader changes (no bytes) first
  ``leader_paths``  what one-hop preferred-leader changes leave, along chains of brokers
  ``propose``       the count phases' candidates in rounds ("the proposer proposes, the driver
                    disposes") -- ``spark.propose`` runs the same array code as Spark jobs
  ``chains``        two-move chains for a broker one move cannot help
  ``exchange``      count moves that trade replicas between two brokers so bytes stay in band
                    (``exchange_search``: the pairs' search)
  ``cancel``        last: a replica moved one way and one moved back both stay put
  ``simplify``      then: two moves between one broker's directories replaced by one

May import ``input`` and ``goals`` (the reachability check the count phases consult is the
goals', ``goals.unachievable``); never ``exact``, ``analysis``, ``spark`` or the pipeline.
Pure: no I/O, no pyspark.
"""
