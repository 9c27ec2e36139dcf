"""Judging a placement from the snapshot alone, independent of the planner that made it:

  ``report``      reassignment JSON, balance figures, lower bounds, the hard-rule check
  ``bound_lp``    the lower bound as a linear program (HiGHS) over brokers and directories
  ``achievable``  which soft-goal bands the hard rules put out of reach, so the summary
                  tells a planner shortfall from a real limit

May import ``input``, ``goals`` and ``highs``; never the optimisers (``search``, ``exact``):
a check that shared the greedy's running totals would share its mistakes.
"""
