"""`harness gate`: the loop, its stopping rule, its calibration."""
