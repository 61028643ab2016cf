"""Tests of ``solver.cli``."""
