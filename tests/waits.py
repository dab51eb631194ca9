"""How long a test waits for what must happen (a process to end, a record to appear): a guard
against a hang, never a bound on speed. Far above what the busiest machine takes (a loaded
2-core host gives a process a tenth of a core), below pytest's 300 s per-test timeout."""

HANG_S = 240.0
