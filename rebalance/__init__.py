"""Spindle's rebalance planner: a PySpark job turning a cluster snapshot into a reassignment plan
across brokers and log directories.

One plan flows through these modules (``pipeline.make_plan`` runs them in order):

  ``model``         snapshot JSON -> validated columns (numpy), goal settings
  ``scope``         what the mode may touch: dirs to empty, dirs that may receive, goals in play
  ``prepare``       per-replica aggregates and candidate order (numpy) -- ``spark_job`` does
                    the same with Spark DataFrames for the real job
  ``bands``         the balance band ``[(2 - f) * mean, f * mean]`` every soft goal uses
  ``goals``         one module per goal (capacity, rack, broker bytes, disk bytes, replica and
                    leader counts) behind one interface: scope, band, violations, figures,
                    destination score, rows in the exact model
  ``core``          the sequential greedy over the replicas it moves: ``STEPS``, its goals in order
  ``state``         ``PlannerState``: loads, counts, targets, ``apply`` and the move budget
  ``placement``     the destination search and source picking every phase shares
  ``byte_phases``   evacuation, rack fixes, capacity relief, broker and disk byte balance
  ``count_phases``  replica and leader counts (proposer rounds, then one move at a time),
                    and leaders by preferred-leader changes (no bytes) first
  ``leader_paths``  what one-hop preferred-leader changes leave, along chains of brokers
  ``propose``       the count phases' candidates in rounds ("the proposer proposes, the driver
                    disposes") -- ``propose_spark`` runs the same array code as Spark jobs
  ``chains``        two-move chains for a broker one move cannot help: refill it, then it
                    gives (counts); a full rack-mate vents, then it takes (bytes)
  ``exchange``      count moves that trade replicas between two brokers so bytes stay in band
  ``cancel``        last: a replica moved from one broker to another and one moved back the
                    other way both stay put where both brokers' bands stay no worse
  ``simplify``      then: two moves between one broker's directories replaced by one where
                    that moves fewer bytes for the same directory bands
  ``exact``         the mixed-integer program (HiGHS) for small clusters the greedy falls short on;
                    the goals add their own rows to its ``Model``
  ``report``        reassignment JSON, balance figures, lower bounds, independent hard-rule check
  ``bound_lp``      the lower bound as a linear program (HiGHS) over brokers and directories,
                    with the count goals and rack repairs that the closed-form bound leaves out
  ``achievable``    which soft-goal bands the hard rules put out of reach (Offline-dir brokers,
                    racks), so the summary tells a planner shortfall from a real limit
  ``pipeline``      ``make_plan``: the order above, a second greedy pass over the first's
                    result when an achievable goal is left unmet, the exact fallback, the summary
  ``cli``           ``spindle-rebalance plan|generate``; also the ``spark-submit`` entry point
  ``generator``     synthetic skewed clusters (shape families) for tests and the benchmarks

Only ``spark_job`` and ``propose_spark`` import pyspark (``pipeline`` and ``cli`` reach them
only when given a Spark session); an import-linter contract keeps the rest free of it.
Pure planning (everything but ``spark_job``, ``cli`` and ``model.load_snapshot``) does no I/O.
"""
