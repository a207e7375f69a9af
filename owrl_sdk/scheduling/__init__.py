"""Scheduling episodes: the executors (local and Ray) and evaluation of task suites."""
