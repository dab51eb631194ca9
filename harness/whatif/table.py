"""The what-if's terminal table: the run itself (measured, then as the model replays it), then
the changed setting, so a reader sees how far the model is from its own run before trusting it."""

from __future__ import annotations


def lines(doc: dict) -> list[str]:
    m, own, new = doc["measured"], doc["predicted_self"], doc["predicted"]
    sends = doc["predicted_self_at_measured_sends"]
    out = [
        f"what-if for {doc['run']}  (block size {doc['block_size']}, {doc['block_size_source']};"
        f" step times: {doc['time_model']})",
        f"{'':22} {'hit rate':>9} {'sd, range over replays':>24} {'TTFT p50':>10} {'ok':>6}"
        f" {'refused':>8}  setting",
        _row("the run, measured", m, _spread(m), ""),
        _row("the run, as replayed", own, _spread(own), _setup(own["setup"])),
        _row("  at measured sends", sends, _spread(sends), ""),
    ]
    out += _exact(doc.get("predicted_self_exact"))  # older whatif.json: none
    out.append(_row("what-if", new, _spread(new), _setup(new["setup"])))
    out += _band(new)
    draws = doc["draws"]
    if draws["replays"] > 1:
        out.append(
            f"replays: {draws['replays']}, each step's time jittered by sigma "
            f"{draws['step_jitter']:.3f} ({draws['source']}); figures are their means"
        )
    out.append(f"note: {doc['note']}")
    return out


def _row(name: str, r: dict, spread: str, setting: str) -> str:
    return (
        f"{name:22} {_pct(r['cache_hit_rate']):>9} {spread:>24} {_ms(r['ttft_p50_s']):>10} "
        f"{r['requests_ok']:>6} {r['requests_refused']:>8}  {setting}"
    ).rstrip()


def _exact(r: dict | None) -> list[str]:
    """The run replayed once, exactly, at its sends on its clock: its figures and where it parts
    (exact.py)."""
    if r is None:
        return []
    same = f"{r['requests_as_measured']} of {r['requests_compared']} as measured"
    label = "  on the run's clock" if "clock" in r else "  exact, no jitter"  # older: no clock
    steps = r.get("steps_words")  # older whatif.json: none
    return [_row(label, r, same, ""), f"{'':24}{r['words']}" + (f"; {steps}" if steps else "")]


def _band(r: dict) -> list[str]:
    """The what-if's interval and its regime in words (older whatif.json: none)."""
    if "interval" not in r:
        return []
    band, regime = r["interval"], r["regime"]
    lo, hi = band["cache_hit_rate"]
    return [
        f"{'  interval':22} {100 * lo:.2f}-{100 * hi:.2f} %  (+-{band['half_width_pp']:.1f} pp: "
        f"draws' 2 sd {band['draws_pp']:.1f} pp, regime {band['regime_pp']:.1f} pp, "
        f"floor {band.get('floor_pp', 0):.1f} pp)",
        f"{'  regime':22} {regime['words']}",
    ]


def _spread(r: dict) -> str:
    if "cache_hit_rate_sd" not in r:
        return ""
    lo, hi = r["cache_hit_rate_range"]
    return f"{100 * r['cache_hit_rate_sd']:.2f} pp, {100 * lo:.2f}-{100 * hi:.2f} %"


def _setup(s: dict) -> str:
    text = f"{s['num_gpu_blocks']} blocks of {s['block_size']}"
    if s["cpu_offload_blocks"]:
        text += f", CPU tier {s['cpu_offload_blocks']}"
    if s["replicas"] > 1:
        text += f", {s['replicas']} replicas {s['routing']}"
    return text


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.1f} ms"
