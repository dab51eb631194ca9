"""A made-up fourth API, added the way CONTRIBUTING.md ("Adding an API") says: one folder (in the
harness it would be harness/driver/apis/toy/) and one registry entry, `TOY`.

The Toy format: `POST /v1/toy` with `{"model", "tokens": [ids] , "limit": n, "stream": true}`;
the stream is `data: {"type": "piece", "text": ...}` per output token, then
`data: {"type": "tally", "prompt": P, "output": n, "cached": C}` (tests/driver/toy_server.py)."""

from harness.driver.apis.api import API
from tests.driver.toy_api.request import ToyRequest

TOY = API("toy", "/toy", ToyRequest, chat_template=False)
