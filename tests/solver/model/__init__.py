"""Tests of ``solver.model``."""
