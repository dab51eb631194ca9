"""The simulated runner: the real scheduler and block pool, no model math.

Each step takes the time the cost model gives for its shape, times `step_time_scale` (an injected
slowdown: 1.3 models every step 30 % longer), slept in wall time scaled by `sim_time_scale` (0, or
`clock: virtual`, only advances `sim_time_s`: the virtual engine then waits it out on the event
loop's simulated clock). Outputs are deterministic token ids: a function
of the request's last token and position, so runs are repeatable and caching cannot change them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from harness.engine.config import EngineConfig
from harness.engine.runners.cost_model import CostModel, StepShape
from harness.engine.runners.roofline import RooflineCost
from harness.engine.scheduler import ScheduledChunk

_FIRST_ID = 1000  # outputs avoid the special and role-marker ids
_MAX_PRICES = 1 << 16  # step shapes remembered (`SimRunner._step_seconds`), then forgotten


class SimRunner:
    simulated = True
    device_name = "simulated"

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        roofline = (  # a device we do not have: priced from its peaks
            RooflineCost.of(config.device, config.sim_model, config.tensor_parallel_size)
            if config.roofline and config.sim_model is not None
            else None
        )
        self.cost = roofline if roofline is not None else CostModel.load(config.cost_model)
        self.vocab_size = config.model.vocab_size
        # (tokens, attended, samples) -> seconds, of the fitted cost model `_priced` (the cost
        # may be replaced after init: whatif.replay sets its own)
        self._prices: dict[tuple[int, int, int], float] = {}
        self._priced: CostModel | None = None
        self.sim_time_s = 0.0  # modelled time of every step so far
        self.last_step_s = 0.0
        self._transfer_s = 0.0  # KV tier moves charged to the next step
        self.page_bytes = (
            roofline.kv_bytes_per_block(config.block_size)
            if roofline is not None
            else config.model.kv_bytes_per_page(config.dtype, config.block_size)
        )

    def execute(self, chunks: list[ScheduledChunk]) -> dict[str, int]:
        if not chunks:
            return {}
        step = self._step_seconds(chunks) * self.config.step_time_scale
        seconds = step + self._transfer_s
        self._transfer_s = 0.0
        self.sim_time_s += seconds
        self.last_step_s = seconds
        if self.config.sim_time_scale > 0 and self.config.clock == "wall":  # virtual: no sleep
            time.sleep(seconds * self.config.sim_time_scale)
        return {c.request.request_id: self._token(c) for c in chunks if c.samples}

    def _step_seconds(self, chunks: list[ScheduledChunk]) -> float:
        """The cost model's seconds for the step. A fitted `CostModel` reads only the shape's
        `key`, so each key is priced once (most steps repeat an earlier one's; the same dot, so
        the same bits)."""
        cost, shape = self.cost, StepShape.of(chunks)
        if type(cost) is not CostModel:  # a roofline reads the shape's other fields too
            return cost.step_seconds(shape)
        if cost is not self._priced or len(self._prices) >= _MAX_PRICES:
            self._prices, self._priced = {}, cost
        seconds = self._prices.get(shape.key)
        if seconds is None:
            seconds = self._prices[shape.key] = cost.step_seconds(shape)
        return seconds

    def _token(self, c: ScheduledChunk) -> int:
        req = c.request
        x = (req.last_token * 2654435761 + req.num_tokens * 40503 + self.config.seed * 97) % 2**32
        return _FIRST_ID + x % (self.vocab_size - _FIRST_ID)

    # The tiers store only hashes and token ids for the simulated runner: there is no KV to copy.
    # What a copy would cost is charged instead (`charge_transfers`).
    def save_block(self, block_id: int) -> None:
        return None

    def load_block(self, block_id: int, payload: None) -> None:
        return None

    def encode_block(self, payload: None) -> bytes:
        return b""

    def decode_block(self, data: bytes) -> None:
        return None

    def charge_transfers(self, moves: Mapping[tuple[str, str], int]) -> None:
        """Blocks moved between the device and its tiers: their modelled seconds go into the next
        step, at the cost model's per-tier bandwidth and latency."""
        self._transfer_s += self.cost.transfer_seconds(moves, self.page_bytes)
