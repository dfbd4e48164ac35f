#!/usr/bin/env python3
"""How much a forecast can buy ten minutes ahead on the shared series: a bound.

For each series of GPU demand on 10-minute steps (Helios Earth's running + pending GPUs, each
step's peak of its per-minute values, as the controller's history keeps it; ServeGen m-small at
one GPU per 10 requests/s; Philly's busy GPUs), it prints:

- how predictable the changes from one step to the next are: their autocorrelation at lags 1-3,
  and the share of their variance (R^2) that a least-squares regression on the six changes before,
  the change a day earlier and the time of day explains out of sample (fitted on the first half,
  scored on the second);
- a simplified provisioning model: capacity for the next step is the last value plus a band b,
  shortage is what the next step's demand exceeds it by, excess what it falls short of it (GPU-steps).
  At shortages of 50%, 30% and 10% of a band of 0 (reactive), it prints the excess as a share of the
  mean demand for a constant band (a buffer) and for the best band per hour of day chosen in
  hindsight (each hour's own quantile of its changes, one level for all hours: what a forecast whose
  bands follow the day could at best learn).

Node sizes, boot times and scale-in's window are left out, so the figures are what the changes
allow, not what a simulation costs. Needs numpy. Run from the project's root, with ../shared present:
python3 scripts/band-bound.py"""
import csv
import sys

import numpy as np

STEPS_PER_DAY = 144


def load(path, columns=None, scale=1.0):
    rows = list(csv.DictReader(open(path)))
    if columns:
        v = np.array([sum(float(r[c]) for c in columns) for r in rows])
        v = v[: len(v) // 10 * 10].reshape(-1, 10).max(axis=1)  # per-minute: each 10-minute peak
    else:
        v = np.array([float(r["value"]) for r in rows])
    return v * scale


def predictability(inc):
    acf = [np.corrcoef(inc[k:], inc[:-k])[0, 1] for k in (1, 2, 3)]
    x, y = [], []
    for t in range(STEPS_PER_DAY + 6, len(inc)):
        a = 2 * np.pi * (t % STEPS_PER_DAY) / STEPS_PER_DAY
        x.append(list(inc[t - 6 : t]) + [inc[t - STEPS_PER_DAY], np.sin(a), np.cos(a), 1.0])
        y.append(inc[t])
    x, y = np.array(x), np.array(y)
    n = len(y) // 2
    b = np.linalg.lstsq(x[:n], y[:n], rcond=None)[0]
    res = y[n:] - x[n:] @ b
    return acf, 1 - res.var() / y[n:].var()


def curve(groups, levels):
    """(shortage, excess) for one quantile level of each group's changes."""
    out = []
    for q in levels:
        s = e = 0.0
        for g in groups:
            b = np.quantile(g, q)
            s += np.maximum(g - b, 0).sum()
            e += np.maximum(b - g, 0).sum()
        out.append((s, e))
    out.sort()
    return np.array(out)


def main():
    series = [
        ("Helios Earth", "../shared/traces/helios_earth_vc_sequence_derived/earth_16vc_sum_per_minute.csv",
         ["running_gpu_num_sum16vc", "pending_gpu_num_sum16vc"], 1.0),
        ("ServeGen m-small", "../shared/bench/series/servegen_msmall_10m.csv", None, 0.1),
        ("Philly", "../shared/bench/series/philly_busy_10m.csv", None, 1.0),
    ]
    levels = np.linspace(0.3, 0.999, 400)
    print("series            steps  acf lag 1-3          R^2   shortage  excess: buffer  per hour  ratio")
    for name, path, cols, scale in series:
        try:
            m = load(path, cols, scale)
        except OSError as e:
            print(f"{name}: {e}", file=sys.stderr)
            continue
        inc = np.diff(m)
        acf, r2 = predictability(inc)
        hour = (np.arange(1, len(m)) % STEPS_PER_DAY) // (STEPS_PER_DAY // 24)
        const = curve([inc], levels)
        hourly = curve([inc[hour == h] for h in range(24)], levels)
        reactive = np.maximum(inc, 0).sum()
        for i, f in enumerate((0.5, 0.3, 0.1)):
            ec = np.interp(f * reactive, const[:, 0], const[:, 1]) / len(m) / m.mean()
            eh = np.interp(f * reactive, hourly[:, 0], hourly[:, 1]) / len(m) / m.mean()
            head = f"{name:16s} {len(m):6d}  {acf[0]:+.2f} {acf[1]:+.2f} {acf[2]:+.2f}  {r2:+.3f}" if i == 0 else " " * 46
            print(f"{head}   {f:4.0%}        {ec:6.2%}    {eh:6.2%}  {eh / ec:5.3f}")


if __name__ == "__main__":
    main()
