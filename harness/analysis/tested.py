"""What was tested: target, model, API, sampling, load, token scale, content, device, duration, trace.

Read from the run folder only (manifest, trace header), so a reader sees what the numbers are of
before reading them (summary.json `tested`). The device is the one the server said it ran on:
the in-process engine's, or an HTTP server's own `/v1/models` card (the reference server's
`metadata`); a server that does not say (vLLM) leaves it null, and TPGS is then per the GPU
count given (`--gpus`, default 1), whatever the hardware.
"""

from __future__ import annotations

from harness.analysis.loader import Run
from harness.trace.profile import content_form


def what_was_tested(run: Run) -> dict:
    m = run.manifest
    target, replay = _section(m, "target"), _section(m, "replay")
    imported = m.get("imported") or {}
    settings = imported.get("settings") or {}
    return {
        "target": _target(m, target, imported),
        "endpoints": list(
            m.get("endpoints") or []
        ),  # redacted by the driver: no user info, no query
        "served_by": _served_by(target),
        "model": target.get("model") or settings.get("model_id"),
        "api": replay.get("api"),
        "prompt_format": replay.get("prompt_format"),
        "sampling": target.get("sampling"),  # what each request asked for; null: older runs
        "load": _load(replay, settings),
        "token_scale": _scale(run),
        "content": _content(run),
        "device": device(target),
        "simulated": run.simulated,
        "duration_s": m.get("duration_s"),
        "trace": _trace(run, m),
        "scenario": m.get("scenario"),
        "network": network_text(target.get("network")),
    }


def network_text(network: dict | None) -> str | None:
    """How the requests reached the endpoints, where it was not the plain way (the manifest's
    `target.network`): the proxy, the CA bundle, a client certificate, no verification."""
    if not isinstance(network, dict):
        return None
    parts = []
    proxies = network.get("proxy") or {}
    for via in dict.fromkeys(proxies.values()):
        schemes = "/".join(s for s, p in proxies.items() if p == via)
        parts.append(f"{schemes} through the proxy {via}")
    if network.get("ca_bundle"):
        parts.append(f"CA bundle {network['ca_bundle']}")
    if network.get("client_cert"):
        parts.append(f"client certificate {network['client_cert']}")
    if network.get("insecure"):
        parts.append("INSECURE: certificates not verified (--insecure)")
    return "; ".join(parts) or None


def network_warnings(m: dict) -> list[str]:
    """--insecure, said on every screen a run's figures are shown on."""
    network = _section(m, "target").get("network")
    if isinstance(network, dict) and network.get("insecure"):
        return ["certificates were not verified (--insecure): the endpoint was not authenticated"]
    return []


def _section(m: dict, key: str) -> dict:
    value = m.get(key)
    return value if isinstance(value, dict) else {}


def _target(m: dict, target: dict, imported: dict) -> str:
    if imported:
        return f"imported from {imported.get('tool')}"
    kind = target.get("kind")
    if kind == "engine-inprocess":
        runner = target.get("runner") or (target.get("engine") or {}).get("runner") or "torch"
        replicas = target.get("replicas") or 1
        many = f", {replicas} replicas" if replicas > 1 else ""
        return f"reference engine, in-process ({runner} runner{many})"
    return ", ".join(m.get("endpoints") or []) or str(kind or "unknown")


def _served_by(target: dict) -> str | None:
    """What the endpoints' /v1/models cards say serves the model (vLLM: owned_by "vllm")."""
    names = []
    for s in target.get("served_by") or []:
        name = s.get("engine") or s.get("owned_by")
        if name and s.get("runner"):
            name = f"{name} ({s['runner']} runner)"
        if name and name not in names:
            names.append(name)
    return ", ".join(names) or None


def device(target: dict) -> dict:
    """{"name", "gpu", "source"}: the device the server said it ran on, or nulls if it did not."""
    if target.get("kind") == "engine-inprocess":
        configured = (target.get("engine") or {}).get("device")
        said = [target if target.get("device") else {"device": _unless_auto(configured)}]
        source = "the engine" if target.get("device") else "the engine's configuration"
    else:
        said = [s for s in target.get("served_by") or [] if s.get("device")]
        source = "the server's /v1/models"
    names = list(dict.fromkeys(_device_name(s) for s in said if s.get("device")))
    if not names:
        return {"name": None, "gpu": None, "source": None}
    gpu = all(not n.startswith(("cpu", "simulated")) for n in names)
    return {"name": ", ".join(names), "gpu": gpu, "source": source}


def _unless_auto(device: str | None) -> str | None:
    """A configured device, unless "auto" (resolved at start: older manifests did not say to what)."""
    return None if device in (None, "auto") else device


def _device_name(said: dict) -> str:
    name = str(said["device"])
    if name == "simulated" and said.get("modelled_device"):
        return f"simulated (cost model of {said['modelled_device']})"
    return name


def _load(replay: dict, settings: dict) -> dict:
    return {
        "mode": replay.get("load") or ("requests" if settings else None),
        "concurrency": replay.get("concurrency") or settings.get("max_concurrency"),
        "session_rate": replay.get("session_rate") or settings.get("request_rate"),
        "arrival": replay.get("arrival"),
        "time_scale": replay.get("time_scale"),
        "max_duration_s": replay.get("max_duration"),
        "cycle_trace": replay.get("cycle_trace"),
    }


def _scale(run: Run) -> float | None:
    meta = run.trace.header.meta if run.trace is not None else {}
    scale = meta.get("scale") if isinstance(meta, dict) else None
    return float(scale) if isinstance(scale, int | float) else None


def _content(run: Run) -> dict | None:
    """What the prompts said: `words` or `code`, plain or tool-shaped turns (the trace's knobs;
    an imported trace is words); null without a trace."""
    if run.trace is None:
        return None
    meta = run.trace.header.meta if isinstance(run.trace.header.meta, dict) else {}
    kind, form = content_form(meta)
    return {"kind": kind, "turn_form": form}


def _trace(run: Run, m: dict) -> dict:
    t = run.trace
    return {
        "name": (t.header.profile if t is not None else None) or m.get("scenario"),
        "sha256": m.get("trace_sha256"),
        "tasks": len(t.main_sessions) if t is not None else None,
        "sessions": len(t.sessions) if t is not None else None,
    }
