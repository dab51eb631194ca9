"""The network settings resolved as curl and requests read the environment: which proxy for
which URL, NO_PROXY's forms, the CA bundle's sources, and the one-line errors of each."""

from __future__ import annotations

import pytest

from harness.driver.http import Network, NetworkSettings
from harness.errors import InputError


def proxy(env: dict, url_scheme: str = "http", host: str = "api.example.com", port: int = 80):
    found = Network(NetworkSettings(), env).proxy_for(url_scheme, host, port)
    return None if found is None else found.shown


def test_each_scheme_has_its_variable_and_all_proxy_covers_both():
    env = {"HTTP_PROXY": "http://p1:3128", "ALL_PROXY": "p2:8080"}
    assert proxy(env) == "http://p1:3128 (from HTTP_PROXY)"
    assert proxy(env, "https", port=443) == "http://p2:8080 (from ALL_PROXY)"


def test_lower_case_wins_and_cgi_ignores_upper_case_http_proxy():
    assert proxy({"http_proxy": "http://low:1", "HTTP_PROXY": "http://up:2"}).startswith(
        "http://low:1"
    )
    assert proxy({"HTTP_PROXY": "http://up:2", "REQUEST_METHOD": "GET"}) is None
    assert proxy({"HTTPS_PROXY": "http://up:2", "REQUEST_METHOD": "GET"}, "https") is not None


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "bypassed"),
    [
        ("example.com", "api.example.com", 80, True),
        (".example.com", "api.example.com", 80, True),
        ("example.com", "notexample.com", 80, False),
        ("*", "anything", 80, True),
        ("10.0.0.0/8, 127.0.0.1", "10.2.3.4", 80, True),
        ("10.0.0.0/8", "11.2.3.4", 80, False),
        ("api.example.com:8000", "api.example.com", 8000, True),
        ("api.example.com:8000", "api.example.com", 80, False),
        ("::1", "[::1]", 80, True),
        ("", "api.example.com", 80, False),
    ],
)
def test_no_proxy_forms(no_proxy, host, port, bypassed):
    env = {"HTTP_PROXY": "http://p:1", "NO_PROXY": no_proxy}
    assert (proxy(env, "http", host, port) is None) is bypassed


def test_the_setting_overrides_the_environment_and_none_sends_directly():
    env = {"HTTP_PROXY": "http://env:1", "NO_PROXY": "internal"}
    given = Network(NetworkSettings(proxy="http://u:secret@given:3128"), env)
    p = given.proxy_for("https", "api.example.com", 443)
    assert p is not None and p.shown == "http://given:3128 (from --proxy)"
    assert p.authorization is not None and "secret" not in p.shown
    assert given.proxy_for("http", "internal", 80) is None  # NO_PROXY applies to it too
    assert Network(NetworkSettings(proxy="none"), env).proxy_for("http", "a.b", 80) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [("socks5://p:1080", "only http:// proxies"), ("http://p:99999", "out of range")],
)
def test_a_proxy_that_cannot_be_used_is_one_line_naming_its_source(value, says):
    with pytest.raises(InputError) as err:
        Network(NetworkSettings(), {"HTTPS_PROXY": value})
    assert "HTTPS_PROXY" in str(err.value) and says in str(err.value)
    assert "\n" not in str(err.value)


def test_the_ca_bundle_comes_from_the_setting_then_requests_then_curl_then_openssl(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")  # read only when a bundle is used: an empty one is refused below
    env = {"REQUESTS_CA_BUNDLE": "/r.pem", "CURL_CA_BUNDLE": "/c.pem", "SSL_CERT_FILE": "/s.pem"}

    def source(settings: NetworkSettings, environ: dict) -> str | None:
        try:  # a bundle given is read at once; one from the environment at the first TLS use
            network = Network(settings, environ)
            network.tls_context()
        except InputError as exc:
            return f"refused: {exc}"
        return network.describe()["ca_bundle"]

    assert source(NetworkSettings(), {"SSL_CERT_FILE": "/s.pem"}) == "/s.pem (from SSL_CERT_FILE)"
    assert "refused" in source(NetworkSettings(), env) and "/r.pem" in source(
        NetworkSettings(), env
    )
    del env["REQUESTS_CA_BUNDLE"]
    assert "/c.pem" in source(NetworkSettings(), env)
    assert "refused" in source(NetworkSettings(ca_bundle=str(bundle)), env)


def test_an_unreadable_bundle_in_the_environment_stops_no_http_run():
    env = {"REQUESTS_CA_BUNDLE": "/no/such/bundle.pem"}
    assert Network(NetworkSettings(), env).proxy_for("http", "h", 80) is None  # built: no error


def test_a_client_key_without_a_certificate_is_refused():
    with pytest.raises(InputError, match="--client-cert"):
        Network(NetworkSettings(client_key="/k.pem"), {})


def test_a_run_that_made_no_tls_connection_names_no_ca_bundle():
    # an http:// endpoint: the environment's bundle was never used, so no screen names it
    network = Network(NetworkSettings(), {"SSL_CERT_FILE": "/s.pem"})
    assert network.describe()["ca_bundle"] is None
    network.tls_context()
    assert network.describe()["ca_bundle"] == "/s.pem (from SSL_CERT_FILE)"
