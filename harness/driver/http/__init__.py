"""The HTTP target: the timed wire, its settings, the preflight, failures and deadlines; and the
one plain HTTP client every other request of the harness goes through (the /metrics scrape,
`harness probe`, a capture proxy's upstream side), on the same network settings. The APIs it
speaks are their own package (harness/driver/apis/). Its public names are these; nothing outside
this package imports its modules (tests/driver/test_http_wing.py)."""

from __future__ import annotations

from harness.driver.http.cache_rules import CacheRules, Prices
from harness.driver.http.client import ClientResponse, HTTPClient
from harness.driver.http.config import HTTPSettings, HTTPTargetConfig, endpoint_url, metrics_url
from harness.driver.http.network import Network, NetworkSettings
from harness.driver.http.sampling import Sampling
from harness.driver.http.sse import SSEParser
from harness.driver.http.target import HTTPTarget
from harness.driver.http.wire import WireError

__all__ = [
    "CacheRules",
    "ClientResponse",
    "HTTPClient",
    "HTTPSettings",
    "HTTPTarget",
    "HTTPTargetConfig",
    "Network",
    "NetworkSettings",
    "Prices",
    "SSEParser",
    "Sampling",
    "WireError",
    "endpoint_url",
    "metrics_url",
]
