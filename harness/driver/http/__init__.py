"""The HTTP target and the APIs it speaks (apis/: one folder and one registry entry each),
streamed over one aiohttp session per run. Its public names are these; nothing outside this
package imports its modules (tests/driver/test_http_wing.py). Each is imported on first use,
so that reading a scenario neither imports aiohttp nor runs into the driver's own config."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.driver.http.apis import API, APIS, RequestForm, api_named
    from harness.driver.http.cache_rules import CacheRules, Prices
    from harness.driver.http.config import HTTPSettings, HTTPTargetConfig, endpoint_url
    from harness.driver.http.sampling import Sampling
    from harness.driver.http.sse import SSEParser
    from harness.driver.http.target import HTTPTarget

_MODULE = {
    "API": "apis",
    "APIS": "apis",
    "RequestForm": "apis",
    "api_named": "apis",
    "CacheRules": "cache_rules",
    "Prices": "cache_rules",
    "HTTPSettings": "config",
    "HTTPTargetConfig": "config",
    "endpoint_url": "config",
    "Sampling": "sampling",
    "SSEParser": "sse",
    "HTTPTarget": "target",
}
__all__ = [
    "API",
    "APIS",
    "CacheRules",
    "HTTPSettings",
    "HTTPTarget",
    "HTTPTargetConfig",
    "Prices",
    "RequestForm",
    "SSEParser",
    "Sampling",
    "api_named",
    "endpoint_url",
]


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE[name]}"), name)
