"""Greedy placement strategies (faithful ports of the Ascend plugin) and the cache lifecycle."""
