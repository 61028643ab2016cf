"""npu-place solver: the CP-SAT model, the time-budgeted solve facade and the CLI."""
