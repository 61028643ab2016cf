"""Tests of ``solver.simulate``."""
