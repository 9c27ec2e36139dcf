"""What a plan is asked: the snapshot as validated numpy columns with the goal settings
(``model``), and what the request's mode may touch (``scope``).

May import nothing else of the planner: every other stage reads these.
"""
