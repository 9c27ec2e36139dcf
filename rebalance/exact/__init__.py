"""The exact planner for small clusters: the mixed-integer program solved by HiGHS (``mip``:
the model, the solve, the result), and the repair that re-plans only the neighbourhood of the
brokers the greedy left out of band (``repair``).

May import ``input`` and ``goals``; never ``search`` (the two planners share nothing but the
goals), ``analysis`` (which judges them, above) or ``spark``. Pure: no I/O, no pyspark.
"""
