"""The HTTP target: the timed wire, its settings, the preflight, failures and deadlines. The APIs
it speaks are their own package (harness/driver/apis/). Its public names are these; nothing outside
this package imports its modules (tests/driver/test_http_wing.py)."""

from __future__ import annotations

from harness.driver.http.cache_rules import CacheRules, Prices
from harness.driver.http.config import HTTPSettings, HTTPTargetConfig, endpoint_url
from harness.driver.http.sampling import Sampling
from harness.driver.http.sse import SSEParser
from harness.driver.http.target import HTTPTarget

__all__ = [
    "CacheRules",
    "HTTPSettings",
    "HTTPTarget",
    "HTTPTargetConfig",
    "Prices",
    "SSEParser",
    "Sampling",
    "endpoint_url",
]
