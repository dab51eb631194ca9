"""Tasks (a main session with its subagents): spawn/join graphs, critical paths, completion."""
