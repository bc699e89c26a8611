"""A training job without a GPU: the payload of ``slurm-fair testbed replay``.

Run inside a Slurm job as ``python -m slurm_fair.testbed.emulator --steps N --tput v100=X,...
--node-types v100-1=v100,... --time-scale S --checkpoint FILE``. It

1. finds the GPU type it landed on: the node it runs on (``$SLURMD_NODENAME``, set by slurmd in
   every batch job) looked up in ``--node-types`` (the testbed's fake GPUs are plain files, so
   nothing on the "device" says what it is; the node does, as in gres.conf);
2. "trains" at ``tput[type]`` steps per *trace* second, with ``S`` trace seconds passing per real
   second: it sleeps in small ticks and credits ``elapsed_real * S * tput`` steps per tick, so a
   late wake-up costs no accuracy;
3. writes its progress to ``--checkpoint`` (JSON, atomically: temp file + rename) after every
   tick and on SIGTERM, and resumes from it when Slurm starts it again after a requeue. Every
   run appends a *segment* (GPU type, node, real start/end, steps done), so the replay can check
   afterwards where the work was done and that a requeued job did not start from 0.

Work done between the last checkpoint and a SIGKILL is lost, as in real training (at most one
tick). Progress is not reported as ``fair:tput=`` in the job comment: that would need a Slurm
command from inside the job, and the value would equal the class-table value the controller
already uses for the job's ``fair:class`` tag.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

#: exit code when the GPU type cannot be determined or the job cannot run on it
EXIT_BAD_PLACEMENT = 3


@dataclass
class Segment:
    """One run of the job (between a start and a finish, requeue or kill)."""

    gpu_type: str
    node: str
    started: float  # wall clock (time.time) of the run's start
    ended: float | None = None
    steps: float = 0.0  # steps done in this run
    job_id: str = ""
    restart_count: str = ""


@dataclass
class Checkpoint:
    """Progress of one emulated job, as stored in its checkpoint file."""

    total_steps: float
    steps_done: float = 0.0
    finished: bool = False
    segments: list[Segment] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.segments)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Checkpoint":
        raw = json.loads(text)
        segs = [Segment(**s) for s in raw.get("segments", [])]
        return cls(float(raw["total_steps"]), float(raw.get("steps_done", 0.0)), bool(raw.get("finished", False)), segs)

    def seconds_by_type(self) -> dict[str, float]:
        """Real seconds run per GPU type (finished segments only)."""
        out: dict[str, float] = {}
        for s in self.segments:
            if s.ended is not None:
                out[s.gpu_type] = out.get(s.gpu_type, 0.0) + max(0.0, s.ended - s.started)
        return out


def load_checkpoint(path: Path, total_steps: float) -> Checkpoint:
    """The stored progress, or a fresh one. A checkpoint of another job size is an error
    (two jobs sharing a file would silently corrupt each other)."""
    if not path.is_file():
        return Checkpoint(total_steps)
    ck = Checkpoint.from_json(path.read_text())
    if abs(ck.total_steps - total_steps) > 1e-9 * max(1.0, total_steps):
        raise ValueError(f"{path}: checkpoint is for {ck.total_steps:g} steps, this job has {total_steps:g}")
    return ck


def save_checkpoint(path: Path, ck: Checkpoint) -> None:
    """Write atomically: a reader (or a kill) never sees half a file. Not through
    :mod:`slurm_fair.atomic`: Slurm runs this file as a script (``python emulator.py``), so it
    imports nothing of the package; its checkpoint is its own regular file, every 0.25 s."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(ck.to_json())
    os.replace(tmp, path)


def real_seconds_left(steps_left: float, tput: float, time_scale: float) -> float:
    """Real seconds to do ``steps_left`` at ``tput`` steps per trace second, ``S`` trace s per real s."""
    if tput <= 0:
        raise ValueError("throughput must be > 0")
    return max(0.0, steps_left) / (tput * time_scale)


def parse_map(text: str, what: str, number: bool) -> dict[str, object]:
    """``a=1,b=2`` -> {"a": 1.0, "b": 2.0} (or strings when not ``number``)."""
    out: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{what}: expected KEY=VALUE items, got {item!r}")
        out[key.strip()] = float(value) if number else value.strip()
    return out


def landed_type(env: Mapping[str, str], node_types: Mapping[str, str]) -> tuple[str, str]:
    """(GPU type, node) of the node this job runs on, from the environment slurmd gives it."""
    node = env.get("SLURMD_NODENAME") or env.get("SLURM_NODENAME") or ""
    if not node:
        nodelist = env.get("SLURM_JOB_NODELIST", "")
        node = nodelist if nodelist in node_types else ""
    if node not in node_types:
        raise LookupError(f"cannot tell the GPU type: node {node!r} not in {sorted(node_types)}")
    return str(node_types[node]), node


class _Stop:
    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True


def run(
    checkpoint: Path,
    total_steps: float,
    tput: float,
    gpu_type: str,
    time_scale: float,
    *,
    node: str = "",
    tick_s: float = 0.25,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
    job_id: str = "",
    restart_count: str = "",
) -> Checkpoint:
    """Work until done or ``stop()``; returns the final checkpoint (also written to disk)."""
    if tput <= 0:
        raise ValueError(f"the job cannot run on {gpu_type} (throughput 0)")
    ck = load_checkpoint(checkpoint, total_steps)
    if ck.finished:
        return ck
    seg = Segment(gpu_type, node, clock(), job_id=job_id, restart_count=restart_count)
    ck.segments.append(seg)
    save_checkpoint(checkpoint, ck)
    rate = tput * time_scale  # steps per real second
    last = seg.started
    while ck.steps_done < total_steps and not stop():
        sleep(min(tick_s, real_seconds_left(total_steps - ck.steps_done, tput, time_scale)))
        now = clock()
        done = min(total_steps - ck.steps_done, (now - last) * rate)
        last = now
        ck.steps_done += done
        seg.steps += done
        seg.ended = now
        if ck.steps_done >= total_steps * (1 - 1e-12):
            ck.steps_done, ck.finished = total_steps, True
        save_checkpoint(checkpoint, ck)
    seg.ended = clock() if seg.ended is None else seg.ended
    save_checkpoint(checkpoint, ck)
    return ck


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slurm_fair.testbed.emulator", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=float, required=True, help="total steps of the job")
    p.add_argument("--tput", required=True, help="steps per trace second per GPU type: v100=X,p100=Y")
    p.add_argument("--node-types", default="", help="node -> GPU type: v100-1=v100,k80-1=k80")
    p.add_argument("--gpu-type", default="", help="run as on this GPU type (no Slurm needed)")
    p.add_argument("--time-scale", type=float, default=1.0, help="trace seconds per real second")
    p.add_argument("--checkpoint", required=True, help="progress file (resumed from when present)")
    p.add_argument("--tick", type=float, default=0.25, help="real seconds between progress updates")
    a = p.parse_args(argv)
    try:
        tputs = {k: float(str(v)) for k, v in parse_map(a.tput, "--tput", True).items()}
        if a.gpu_type:
            gpu_type, node = a.gpu_type, os.environ.get("SLURMD_NODENAME", "")
        else:
            nodes = {k: str(v) for k, v in parse_map(a.node_types, "--node-types", False).items()}
            gpu_type, node = landed_type(os.environ, nodes)
        if a.steps <= 0 or a.time_scale <= 0 or a.tick <= 0:
            raise ValueError("--steps, --time-scale and --tick must be > 0")
        tput = tputs.get(gpu_type, 0.0)
        if tput <= 0:
            raise ValueError(f"no throughput for GPU type {gpu_type!r} in --tput")
    except (ValueError, LookupError) as exc:
        print(f"emulator: {exc}", file=sys.stderr)
        return EXIT_BAD_PLACEMENT
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ck = run(
        Path(a.checkpoint), a.steps, tput, gpu_type, a.time_scale, node=node, tick_s=a.tick,
        stop=lambda: stop.requested, job_id=os.environ.get("SLURM_JOB_ID", ""),
        restart_count=os.environ.get("SLURM_RESTART_COUNT", ""),
    )
    seg = ck.segments[-1] if ck.segments else None
    print(
        f"emulator: {gpu_type} on {node or '?'}: {ck.steps_done:.0f}/{ck.total_steps:.0f} steps"
        f" after {ck.runs} run(s)" + (f", this run {seg.steps:.0f} steps" if seg else ""),
        flush=True,
    )
    return 0 if ck.finished else 143  # 143: stopped by SIGTERM (requeue/preemption)


if __name__ == "__main__":
    sys.exit(main())
