"""Scale-out: one replay sharded over Ray actors (see docs/distributed.md).

Ray is optional (`pip install 'agentic-harness[ray]'`); importing this package does not need it,
`run_replay_distributed` says how to get it when it is missing.
"""

from harness.distributed.coordinator import DistributedReplayResult, run_replay_distributed

__all__ = ["DistributedReplayResult", "run_replay_distributed"]
