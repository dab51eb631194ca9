"""`harness capacity --simulate` (and `--replicas`, `--routing`): the flags and the verb's body.

The capacity verb's wall-clock search lives in harness/app/capacity/search.py; with `--simulate` it
dispatches here: the exact search on the virtual clock (harness/app/capacity/virtual.py), or with
`--replicas` the fleet table (harness/app/capacity/fleet.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.app.commands.options import formatted, printer


def add_arguments(cap: argparse.ArgumentParser) -> None:
    cap.add_argument(
        "--simulate",
        action="store_true",
        help="search on the virtual clock (the simulated runner, exact: one run per point, "
        "no repeats); its figures are modelled, not measured",
    )
    cap.add_argument(
        "--point-s",
        type=float,
        default=None,
        help="--simulate: simulated seconds per point (default: the scenario's max_duration_s)",
    )
    cap.add_argument(
        "--replicas",
        default=None,
        help="--simulate: replica counts for a fleet table, e.g. 1,2,4,8,16,32 (fleet.json, fleet.md)",
    )
    cap.add_argument(
        "--routing",
        default="all",
        help="--replicas: the routing policies, comma-separated, or all (all)",
    )


def simulate_capacity(args: argparse.Namespace) -> int:
    from harness.app.commands.run import SIMULATE_SETS
    from harness.app.scenario import load_scenario
    from harness.driver.runfolder import make_run_dir
    from harness.errors import InputError

    out = Path(args.output)
    if out.exists() and any(out.iterdir()):
        raise InputError("already exists and is not empty; choose another with -o", path=out)
    if args.point_s is not None and args.point_s <= 0:
        raise InputError(f"must be > 0, got {args.point_s}", field="--point-s")
    scenario = load_scenario(args.scenario, [*SIMULATE_SETS, *args.sets])
    make_run_dir(out)
    if args.replicas:
        return _fleet(args, scenario, out)
    from harness.app.capacity.virtual import CAPACITY_FILE, capacity_virtual

    as_json = args.format == "json"  # stdout holds the one JSON object; the lines go to stderr
    result = capacity_virtual(
        scenario, out, max_concurrency=args.max_concurrency, point_s=args.point_s,
        say=printer(as_json), bar=sys.stderr.isatty(),
    )  # fmt: skip
    print(formatted(args.format, f"capacity: {result['band_text']}", result))
    print(
        f"wrote {out / CAPACITY_FILE} and {out / 'capacity.md'} in {result['wall_s']} s",
        file=sys.stderr if as_json else sys.stdout,
    )
    return 0


def _fleet(args: argparse.Namespace, scenario, out: Path) -> int:
    from harness.app.capacity.fleet import FLEET_FILE, fleet, parse_policies
    from harness.errors import InputError

    try:
        replicas = [int(n) for n in args.replicas.split(",") if n.strip()]
        policies = parse_policies(args.routing)
    except ValueError as exc:
        raise InputError(str(exc), field="--replicas/--routing") from None
    if not replicas or min(replicas) < 1 or max(replicas) > 64:
        raise InputError("replica counts must be in 1..64", field="--replicas")
    result = fleet(
        scenario,
        out,
        replicas=replicas,
        policies=policies,
        point_s=args.point_s,
        resolution=args.resolution,
        say=printer(args.format == "json"),
    )
    as_json = args.format == "json"
    print(formatted(args.format, (out / "fleet.md").read_text(encoding="utf-8"), result))
    print(
        f"wrote {out / FLEET_FILE} and {out / 'fleet.md'} in {result['wall_s']} s",
        file=sys.stderr if as_json else sys.stdout,
    )
    return 0
