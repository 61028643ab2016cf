"""``npu-place replay``: a generated (or recorded) day of a cluster replayed with several
engines, counted in image pulls, gigabytes and minutes."""
