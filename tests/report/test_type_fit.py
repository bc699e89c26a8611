"""The report's type-fit section: a job on a type >= 2x slower for it while a faster one sat idle."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd

from slurm_fair.report.data import JobSpeed, ReportInputs
from slurm_fair.report.type_fit import type_fit_frame
from slurm_fair.report.window import Window

T0 = datetime(2026, 1, 1)


def frame(rows):
    return pd.DataFrame([{"job_id": j, "tenant": "a", "gpu_type": k, "gpus": g, "start": pd.Timestamp(T0 + timedelta(hours=s)),
                          "end": pd.Timestamp(T0 + timedelta(hours=e))} for j, k, g, s, e in rows])


def inputs(speeds, capacity):
    return ReportInputs(Window(T0, T0 + timedelta(days=1)), (), capacity, {"a": 1.0}, speeds)


def test_slow_type_with_an_idle_fast_one_is_listed_and_a_busy_one_is_not():
    jobs = frame([("1", "k80", 1, 0, 2), ("2", "v100", 4, 0, 3), ("3", "k80", 1, 4, 5)])
    speeds = {"1": JobSpeed({"k80": 0.2, "v100": 1.0}, "learned"), "2": JobSpeed({"k80": 0.2, "v100": 1.0}, "prior"),
              "3": JobSpeed({"k80": 0.2, "v100": 1.0}, "learned")}
    fit = type_fit_frame(jobs, inputs(speeds, {"k80": 8, "v100": 4}))
    # job 1 started while job 2 held every v100; job 3 started with the v100s idle
    assert fit["job_id"].tolist() == ["3"]
    assert fit.iloc[0]["better_type"] == "v100" and fit.iloc[0]["speedup"] == 5.0 and fit.iloc[0]["idle_gpus"] == 4


def test_less_than_2x_or_flat_speeds_are_not_listed():
    jobs = frame([("1", "p100", 1, 0, 2), ("2", "k80", 1, 0, 2)])
    speeds = {"1": JobSpeed({"p100": 0.6, "v100": 1.0}, "class-table"),
              "2": JobSpeed({"k80": 1.0, "v100": 1.0}, "flat")}
    assert type_fit_frame(jobs, inputs(speeds, {"p100": 4, "v100": 4, "k80": 4})).empty
