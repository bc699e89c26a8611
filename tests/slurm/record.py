"""Record real Slurm output for the fake: ``python tests/slurm/record.py [--populate] OUTDIR``.

Runs the adapter's own reads (same argv, same columns) against the Slurm of ``$SLURM_CONF``
with a fixed, readable separator and stores each command's stdout, plus ``meta.json``.
``--populate`` first submits a small mix of jobs (every GPU syntax, three tenants, held, pending
and running ones, a hostile comment) and cancels them after recording. Keep recordings small.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.run import Runner

FS = "|#|"


class CapturingRunner(Runner):
    """A Runner that keeps the stdout of every call, keyed by command and entity."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.captured: dict[str, str] = {}

    def run(self, argv, job_id=None):  # type: ignore[override]
        out = super().run(argv, job_id)
        name = argv[0]
        if name == "sacctmgr":
            name = "assoc" if "assoc" in argv else "qos"
        elif name == "squeue" and "-o" in argv:
            name = "squeue_exc"  # the excluded nodes of pending jobs (-o %x)
        elif name == "scontrol":
            name = "partitions" if "partition" in argv else "scontrol"
        self.captured[name] = out
        return out


def populate(env: dict[str, str], accounts: list[str]) -> list[str]:
    jobs = []
    specs = [
        (accounts[0], ["--hold", "--gres=gpu:2"], "fair:class=resnet50"),
        (accounts[0], ["--begin=now+3600", "--gpus=v100:2"], ""),
        (accounts[1], ["--gpus-per-node=1", "-N", "2", "--hold"], "fair:class=lm fair:preemptible"),
        (accounts[1], ["--gpus-per-task=1", "-n", "2", "--hold"], ""),
        (accounts[2 % len(accounts)], ["--gres=gpu:k80:1"], "$(touch /tmp/x) | `id`; fair:tput=3.5"),
        (accounts[2 % len(accounts)], ["--gpus=1"], ""),
        (accounts[0], ["-n", "1"], "cpu only"),
        (accounts[1], ["--gres=gpu:1", "-c", "4", "--mem=2000", "--hold"], "fair:class=a3c"),
        # a user's choices the controller must never narrow: an exclude list, a node list, two
        # partitions, a time limit; and one more pending job to carry a site factor
        (accounts[0], ["--gres=gpu:1", "-x", "k80-1", "-t", "90", "--begin=now+3600"], ""),
        (accounts[2 % len(accounts)], ["--gres=gpu:2", "-w", "p100-1", "-p", "gpu,p100", "--hold"], ""),
        (accounts[1], ["--gres=gpu:4", "-N", "5", "-t", "1-00:00:00"], ""),
    ]
    for account, args, comment in specs:
        argv = ["sbatch", "--parsable", "-A", account, "-J", f"rec-{account}", "-o", "/dev/null",
                f"--comment={comment}" if comment else "--comment=", *args, "--wrap", "sleep 300"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=True)
        jobs.append(out.stdout.strip().split(";")[0])
    # what job_submit.lua records when it chooses a job's partitions (users cannot set it)
    subprocess.run(["scontrol", "update", f"JobId={jobs[-1]}", "AdminComment=slurm-fair:partition=gpu"],
                   env=env, timeout=30, check=True)
    # an unmet dependency, and a site factor as an administrator sets one
    out = subprocess.run(["sbatch", "--parsable", "-A", accounts[0], "-J", f"rec-{accounts[0]}", "-o", "/dev/null",
                          f"--dependency=afterok:{jobs[0]}", "--gres=gpu:1", "--wrap", "sleep 300"],
                         env=env, capture_output=True, text=True, timeout=30, check=True)
    jobs.append(out.stdout.strip().split(";")[0])
    subprocess.run(["scontrol", "update", f"JobId={jobs[-2]}", "SiteFactor=-1234"], env=env, timeout=30, check=True)
    subprocess.run(["sleep", "3"], check=False)
    return jobs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--populate", action="store_true")
    args = ap.parse_args()
    env = {**os.environ}
    runner = CapturingRunner(env={"SLURM_CONF": env.get("SLURM_CONF")}, timeout_s=60)
    port = SlurmCli(runner=runner, separator=lambda: FS, tres_prefix="gres:")
    jobs = populate(env, sorted(a.name for a in port.accounts())) if args.populate else []
    try:
        taken = datetime.now().replace(microsecond=0)
        port.snapshot()
        port.accounting(taken - timedelta(days=1), taken + timedelta(minutes=1))
        version = subprocess.run(["scontrol", "--version"], env=env, capture_output=True, text=True).stdout.split()[-1]
    finally:
        if jobs:
            subprocess.run(["scancel", *jobs], env=env, check=False)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"sinfo": "sinfo.txt", "squeue": "squeue.txt", "assoc": "assoc.txt", "qos": "qos.txt", "sacct": "sacct.txt",
             "squeue_exc": "squeue_exc.txt", "sprio": "sprio.txt", "partitions": "partitions.txt"}
    for key, fname in files.items():
        (out / fname).write_text(runner.captured.get(key, ""))
    meta = {
        "constructed": False,
        "description": "Captured from the local testbed by tests/slurm/record.py --populate.",
        "slurm_version": version,
        "fs": FS,
        "taken_at": taken.isoformat(),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"recorded {', '.join(files)} into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
