"""What a user sees of an `Analysis`: the HTML report, terminal tables, plots, compare and trend
output. It presents and never computes: every figure comes from `harness.analysis`."""
