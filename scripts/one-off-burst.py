#!/usr/bin/env python3
"""Writes examples/one-off-burst-10m.csv, the benchmark of a burst that comes once:
GPU demand every 10 minutes for 11 days, 200 + 100*sin(2*pi*(h-9)/24) + N(0, 8) at
hour of day h, and 300 GPUs more on day 8 (0-based) from 14:00 to 16:00. Seed 1.
Run from the project's root: python3 scripts/one-off-burst.py > examples/one-off-burst-10m.csv"""
import math
import random

random.seed(1)
print("time,value")
for i in range(11 * 144):
    t = i * 600
    h, d = (t / 3600) % 24, t // 86400
    v = 200 + 100 * math.sin(2 * math.pi * (h - 9) / 24) + random.gauss(0, 8)
    if d == 8 and 14 <= h < 16:
        v += 300
    print(f"{t},{max(v, 0):.3f}")
