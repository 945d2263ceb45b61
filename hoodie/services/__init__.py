"""Table services: planners and executors with the same shape for every service.

A planner turns a table snapshot and a policy into a plan in Hudi's own format (or None);
scheduling writes it as a REQUESTED instant. An executor moves the instant to INFLIGHT, runs the
per-file-group work through a :class:`~hoodie.services.base.Runner` (in process, or on Spark via
``jobs``), and completes the instant under the table lock after re-checking its preconditions
against a fresh timeline.
"""
