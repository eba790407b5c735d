"""What each measuring command prints: rich tables and notes built from its result.

A function here takes a :class:`rich.console.Console` and a run's result
object (``sketchsim.runs``, ``sketchsim.experiments``) and prints what the
command shows; it computes nothing the result does not hold (the verdicts and
statistics are the result's own).  The CLI calls them with its console; an API
user can call them with any console (a notebook's, a file's) to see the same
tables.
"""
