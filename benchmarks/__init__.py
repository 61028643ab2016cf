"""Benchmarks: seeded scenario generators, the solver-vs-greedy suite and reports."""
