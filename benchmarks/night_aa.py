"""A/A nights simulated: how often the gate's history rule calls an unchanged server `regressed`.

Each night's figure (a gated row, on its log scale) is a night effect N(0, tau^2) shared by its runs
plus each run's own noise N(0, sigma^2); `runs` runs a night. Tonight (one more night, drawn alike)
is judged against `n_nights` earlier ones by the rule `harness gate --history` applies:
`noise.night_spread` at `Rule().alpha_once` (one look), on two independent gated rows; a row is
called regressed when its interval lies wholly on the worse side (the threshold left at 0, so the
figure is the test's own rate, which the threshold can only lower). For contrast, the same draws by
the old run-level rule: `noise.spread` with every earlier run one sample, looked at after 3 to 10 of
tonight's runs at `alpha_interim` / `alpha_final` (the gate before nights were the unit).

`--screen`: one row's rate when the earlier nights' runs are first screened for outliers as
`harness compare` screened a side spanning several nights (`history.outliers`, robust z of each
run, the floor one run's noise), or by the nights' means instead, against none (today's rule).

    PYTHONPATH=. python benchmarks/night_aa.py --draws 2000
    PYTHONPATH=. python benchmarks/night_aa.py --draws 2000 --screen
    PYTHONPATH=. python benchmarks/night_aa.py --draws 2000 --partial

`--partial`: one row's rate when tonight is one run (`harness compare --run NIGHT/b1` against
earlier nights of `runs` runs), its night weighed as a night of `runs` (before) or as one run
(`nights.mean_share`, now).
"""

from __future__ import annotations

import argparse

import numpy as np

from harness.analysis.compare import history, nights, noise
from harness.app.gate.rule import Rule

SIGMA = 0.03  # one run's own noise (log SD): a quiet simulated night's TPOT p50 spread


def no_within(n: int) -> list[float | None]:
    """No within-run variance: the interval is the between-night one alone, unfloored."""
    return [None] * n


def draw_night(rng, tau: float, runs: int) -> np.ndarray:
    return rng.normal(0.0, tau) + rng.normal(0.0, SIGMA, runs)


def by_night(rng, n_nights: int, tau: float, runs: int, rule: Rule) -> bool:
    """One A/A night judged by night: regressed on any of the two rows."""
    for _ in range(rule.rows):
        past = [draw_night(rng, tau, runs) for _ in range(n_nights)]
        tonight = draw_night(rng, tau, runs)
        keys: tuple[list[str], list[str], list[str]] = (
            [f"n{i}" for i in range(n_nights) for _ in range(runs)],
            ["t"] * runs,
            [],
        )
        nones = (no_within(n_nights * runs), no_within(runs))
        s = noise.night_spread(
            np.concatenate(past), tonight, np.array([]), keys, nones, rule.alpha_once
        )
        if s.half_width is not None and s.change - s.half_width > 0:
            return True
    return False


def by_run(rng, n_nights: int, tau: float, runs: int, rule: Rule) -> bool:
    """The same A/A night by the old run-level gate: looks at 3..max_runs of tonight's runs."""
    rows = [
        (np.concatenate([draw_night(rng, tau, runs) for _ in range(n_nights)]),
         draw_night(rng, tau, rule.max_runs))
        for _ in range(rule.rows)
    ]  # fmt: skip
    for n in range(rule.min_runs, rule.max_runs + 1):
        alpha = rule.alpha_at(n == rule.max_runs)
        for past, tonight in rows:
            nones = (no_within(past.size), no_within(n))
            s = noise.spread(past, tonight[:n], np.array([]), nones, alpha)
            if s.change - s.half_width > 0:  # type: ignore[operator]
                return True
    return False


def screened(rng, n_nights: int, tau: float, runs: int, alpha: float, how: str) -> bool:
    """One row of one A/A night, the earlier nights' runs screened `how` first."""
    x = np.concatenate([draw_night(rng, tau, runs) for _ in range(n_nights)])
    keys = [f"n{i}" for i in range(n_nights) for _ in range(runs)]
    far = set()
    if how == "runs":
        far = {i for i, _ in history.outliers(np.array([]), x, SIGMA)}
    elif how == "nights' means":
        m = nights.means(x, keys)
        mad = max(history.MAD_SD * float(np.median(np.abs(m - np.median(m)))), SIGMA)
        out = {f"n{i}" for i in np.flatnonzero(np.abs(m - np.median(m)) / mad > history.OUTLIER_Z)}
        far = {i for i, k in enumerate(keys) if k in out and n_nights >= history.OUTLIER_MIN_RUNS}
    keep = [i for i in range(x.size) if i not in far]
    tonight = draw_night(rng, tau, runs)
    ks: tuple[list[str], list[str], list[str]] = ([keys[i] for i in keep], ["t"] * runs, [])
    nones = (no_within(len(keep)), no_within(runs))
    s = noise.night_spread(x[keep], tonight, np.array([]), ks, nones, alpha)
    return s.half_width is not None and s.change - s.half_width > 0


def screen_table(args, rule: Rule) -> None:
    hows = ("none", "runs", "nights' means")
    print("| earlier nights | tau / sigma | " + " | ".join(f"screened: {h}" for h in hows) + " |")
    print("| --- | --- | --- | --- | --- |")
    for n_nights in (3, 5, 8):
        for ratio in (3.0, 10.0):
            cells = []
            for how in hows:
                rng = np.random.default_rng([args.seed, n_nights, int(ratio * 10)])
                hits = sum(
                    screened(rng, n_nights, ratio * SIGMA, args.runs, rule.alpha_once, how)
                    for _ in range(args.draws)
                )
                cells.append(rate(hits, args.draws))
            print(f"| {n_nights} | {ratio:g} | " + " | ".join(cells) + " |")


def partial(rng, n_nights: int, tau: float, runs: int, alpha: float) -> tuple[bool, bool]:
    """One row of one A/A night of one run: (regressed as judged now, as judged before)."""
    from scipy import stats

    x = np.concatenate([draw_night(rng, tau, runs) for _ in range(n_nights)])
    keys: tuple[list[str], list[str], list[str]] = (
        [f"n{i}" for i in range(n_nights) for _ in range(runs)],
        ["t"],
        [],
    )
    s = noise.night_spread(
        x, draw_night(rng, tau, 1), np.array([]), keys, (no_within(x.size), no_within(1)), alpha
    )
    before = stats.t.ppf(1 - alpha / 2, s.band.df) * s.band.sd * np.sqrt(1 / n_nights + 1)
    return s.change - s.half_width > 0, s.change - before > 0  # type: ignore[operator]


def partial_table(args, rule: Rule) -> None:
    print("| earlier nights | tau / sigma | one run tonight, now | before |")
    print("| --- | --- | --- | --- |")
    for n_nights in (3, 5):
        for ratio in (0.0, 1.0, 3.0):
            rng = np.random.default_rng([args.seed, n_nights, int(ratio * 10), 1])
            hits = [partial(rng, n_nights, ratio * SIGMA, args.runs, rule.alpha_once)
                    for _ in range(args.draws)]  # fmt: skip
            now, before = (sum(h[i] for h in hits) for i in (0, 1))
            print(
                f"| {n_nights} | {ratio:g} | {rate(now, args.draws)} | {rate(before, args.draws)} |"
            )


def rate(hits: int, draws: int) -> str:
    from scipy import stats

    lo = stats.beta.ppf(0.025, hits, draws - hits + 1) if hits else 0.0
    hi = stats.beta.ppf(0.975, hits + 1, draws - hits) if hits < draws else 1.0
    return f"{hits / draws:.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3, help="usable runs a night")
    p.add_argument("--seed", type=int, default=48)
    p.add_argument("--screen", action="store_true", help="the outlier screens' table instead")
    p.add_argument("--partial", action="store_true", help="one run tonight's table instead")
    args = p.parse_args()
    rule = Rule()
    print(f"alpha {rule.alpha}, {rule.rows} rows, alpha_once {rule.alpha_once:.3f} a row")
    if args.screen or args.partial:
        (screen_table if args.screen else partial_table)(args, rule)
        return
    print("| earlier nights | tau / sigma | by night | old run-level gate |")
    print("| --- | --- | --- | --- |")
    for n in (2, 3, 5):
        for ratio in (0.0, 1.0, 3.0):
            rng = np.random.default_rng([args.seed, n, int(ratio * 10)])
            tau = ratio * SIGMA
            a = sum(by_night(rng, n, tau, args.runs, rule) for _ in range(args.draws))
            b = sum(by_run(rng, n, tau, args.runs, rule) for _ in range(args.draws))
            print(f"| {n} | {ratio:g} | {rate(a, args.draws)} | {rate(b, args.draws)} |")


if __name__ == "__main__":
    main()
