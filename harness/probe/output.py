"""What `harness probe cache` writes: probe.json (the figures and every probe request), one table,
one figure (probe.png). The table and the figure read the JSON document only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.probe.cache_probe import ProbeResult

JSON_FILE, FIGURE_FILE, TABLE_FILE = "probe.json", "probe.png", "probe.txt"


def document(result: ProbeResult, duration_s: float, ending: str) -> dict:
    adv = dataclasses.asdict(result.advertised) if result.advertised else {}
    pool = adv.get("pool_tokens")
    retained = result.capacity.get("retained_tokens")
    return {
        "endpoint": result.endpoint,
        "model": result.model,
        "retained_tokens": retained,
        "idle_retention_s": result.idle.get("idle_retention_s"),
        "block_size": result.block.get("block_size"),
        "advertised_pool_tokens": pool,
        "retained_share_of_advertised": retained / pool if pool and retained is not None else None,
        "detection": result.detection,
        "reliable": _reliable(result),
        "advertised": adv,
        "calibration": result.calibration,
        "block": result.block,
        "capacity": result.capacity,
        "idle": result.idle,
        "seed": result.seed,
        "stages_done": result.stages_done,
        "ending": ending,
        "duration_s": duration_s,
    }


def _reliable(result: ProbeResult) -> bool | None:
    """Cached-token counts are the server's own; TTFT only where cold and warm stand apart."""
    if result.detection is None:
        return None
    return result.detection == "cached_tokens" or bool(result.calibration.get("ttft_reliable"))


def table(doc: dict) -> str:
    cap, idle, block = doc["capacity"], doc["idle"], doc["block"]
    pool = doc["advertised_pool_tokens"]

    def tokens(v) -> str:
        return "-" if v is None else f"{v:,}"

    share = doc["retained_share_of_advertised"]
    rows = [
        (
            "retained context",
            tokens(doc["retained_tokens"]) + _bound(cap),
            f"{cap.get('contexts_sent', '-')} contexts of {tokens(cap.get('context_tokens'))}"
            f" tokens, re-sent newest first{_fill_note(cap)}",
        ),
        (
            "advertised pool",
            tokens(pool),
            (doc["advertised"] or {}).get("source") or "not advertised",
        ),
        ("retained / advertised", "-" if share is None else f"{share:.1%}", ""),
        ("idle retention", _seconds(idle), _idle_note(idle)),
        ("block size", tokens(doc["block_size"]), _block_note(block)),
        ("detected by", doc["detection"] or "-", _calibration_note(doc["calibration"])),
    ]
    width = max(len(r[0]) for r in rows)
    value = max(len(r[1]) for r in rows)
    lines = [
        f"cache probe of {doc['endpoint']} ({doc['model']}), {doc['duration_s']:.0f} s, {doc['ending']}"
    ]
    lines += [f"  {a:<{width}}  {b:>{value}}  {c}".rstrip() for a, b, c in rows]
    return "\n".join(lines)


def _bound(cap: dict) -> str:
    """'(at least)' when every context was kept after a fill that covered the pool; when the
    fill did not cover it, the figure is no finding and says so."""
    if not cap.get("lower_bound"):
        return ""
    fill = cap.get("fill_of_pool")
    return " (at least)" if fill is None or fill >= 1 else " (fill short of the pool)"


def _fill_note(cap: dict) -> str:
    parts = []
    if cap.get("cacheable_tokens") is not None:
        parts.append(f"{cap['cacheable_tokens']:,} of each in whole blocks")
    if cap.get("fill_of_pool") is not None:
        parts.append(f"the fill {cap['fill_of_pool']:.0%} of the pool")
    if cap.get("not_block_sized"):
        parts.append(cap["not_block_sized"])
    return f" ({'; '.join(parts)})" if parts else ""


def _seconds(idle: dict) -> str:
    v = idle.get("idle_retention_s")
    if v is None:
        return "-"
    return f"{'>= ' if idle.get('lower_bound') else ''}{v:g} s"


def _idle_note(idle: dict) -> str:
    if not idle:
        return "not measured"
    if idle.get("lower_bound"):
        return f"every wait up to {max(w['wait_s'] for w in idle['waits']):g} s still hit"
    return f"lost after {idle['first_lost_after_s']:g} s idle"


def _block_note(block: dict) -> str:
    if not block:
        return "not measured (no cached-token counts)"
    parts = ["hits in whole blocks" if block.get("hits_whole_blocks") else "hits not whole blocks"]
    if block.get("hits_whole_blocks") and not block.get("hits_every_shared_block"):
        parts.append("some hits short of the shared prefix's whole blocks")
    if "last_block_kept" in block:
        parts.append(
            "a whole-block prompt's last block "
            + ("kept" if block["last_block_kept"] else "not kept")
        )
        parts.append(
            "a prompt sent again "
            + ("served whole" if block["whole_prompt_served"] else "recomputes its last block")
        )
    return "; ".join(parts)


def _calibration_note(cal: dict) -> str:
    if not cal:
        return ""
    note = (
        f"cold TTFT {cal['cold_ttft_s']:.3g} s, warm {cal['warm_ttft_s']:.3g} s"
        f" ({cal['context_tokens']} tokens, medians of 3); threshold {cal['ttft_threshold_s']:.3g} s"
    )
    if not cal["ttft_reliable"]:
        note += f"; only {cal['separation']:.1f}x apart: TTFT cannot tell hits (use larger --context-tokens)"
    return note


def write(doc: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / (JSON_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out_dir / JSON_FILE)
    (out_dir / TABLE_FILE).write_text(table(doc) + "\n", encoding="utf-8")
    figure(doc, out_dir / FIGURE_FILE)


def figure(doc: dict, path: Path) -> None:
    """Left: the capacity scan (cached share of each context, newest first, against the tokens
    re-sent so far) with the advertised pool and the retained mark; right: idle waits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), dpi=100, layout="constrained")
    fig.suptitle(f"Cache probe: {doc['endpoint']} ({doc['model']})", fontsize="medium")
    cap = doc["capacity"]
    n = cap.get("context_tokens") or 1
    scan = cap.get("scan_newest_first") or []
    x = [n * (i + 1) for i in range(len(scan))]
    y = [_share(r, n) for r in scan]
    left.bar(x, y, width=0.8 * n, color=["tab:green" if r["kept"] else "tab:red" for r in scan])
    if doc["advertised_pool_tokens"]:
        left.axvline(doc["advertised_pool_tokens"], color="black", ls="--", label="advertised pool")
    if doc["retained_tokens"] is not None:
        left.axvline(doc["retained_tokens"], color="tab:blue", label="retained (measured)")
    left.set_xlabel("context tokens re-sent, newest first")
    left.set_ylabel("share hit")
    left.set_ylim(0, 1.05)
    if left.get_legend_handles_labels()[0]:
        left.legend(fontsize="small", loc="lower left")
    waits = (doc["idle"] or {}).get("waits") or []
    right.bar(
        [str(f"{w['wait_s']:g} s") for w in waits],
        [_share(w, doc["idle"]["context_tokens"]) for w in waits],
        color=["tab:green" if w["kept"] else "tab:red" for w in waits],
    )
    right.set_xlabel("idle wait before the re-send")
    right.set_ylim(0, 1.05)
    right.set_ylabel("share hit")
    fig.savefig(path)
    plt.close(fig)


def _share(row: dict, n: int) -> float:
    if row.get("cached_tokens") is not None:
        return row["cached_tokens"] / n
    return 1.0 if row["kept"] else 0.0
