"""The network a run went through, as the first screen says it (analysis/tested.py): the proxy
and where it came from, the CA bundle, and --insecure as a warning on every screen."""

from __future__ import annotations

from harness.analysis.tested import network_text, network_warnings


def test_a_proxied_run_with_a_bundle_names_both():
    network = {
        "proxy": {
            "http": "http://p:3128 (from HTTPS_PROXY)",
            "https": "http://p:3128 (from HTTPS_PROXY)",
        },
        "ca_bundle": "/etc/ca.pem",
        "insecure": False,
    }
    assert network_text(network) == (
        "http/https through the proxy http://p:3128 (from HTTPS_PROXY); CA bundle /etc/ca.pem"
    )


def test_a_plain_run_says_nothing_and_insecure_warns():
    assert network_text({"proxy": None, "insecure": False}) is None
    assert network_text(None) is None
    assert network_warnings({"target": {"network": {"insecure": False}}}) == []
    (warning,) = network_warnings({"target": {"network": {"insecure": True}}})
    assert "--insecure" in warning
    assert "INSECURE" in network_text({"insecure": True})
