"""``slurm-fair testbed replay``: an emulated trace replayed on the real testbed, scored from sacct.

An experiment, not a performance benchmark (those live in ``benchmarks/``). What one run does
(issue 6, "Real-cluster benchmark"):

1. read the trace CSV (docs/fairness.md format) with the simulator's reader; map its tenants onto the
   testbed's accounts (identity when every trace tenant is an account, else sorted trace tenants
   round-robin onto the accounts in file order: deterministic, and printed) -- :mod:`.plan`;
2. with a policy: write a controller configuration into the run directory (state, audit log,
   policy, round length and interval = the trace round divided by the time scale) and start
   ``slurm-fair run --loop`` as a subprocess; with ``none`` Slurm schedules alone -- :mod:`.controller`;
3. submit every job at ``arrival_s / S`` real seconds after the start, *untyped*
   (``--gres=gpu:N``, one node), ``--requeue``, ``--comment "fair:class=<class> fair:preemptible"``;
   its payload is :mod:`slurm_fair.testbed.emulator`, which works ``total_steps / T(type it landed
   on)`` trace seconds and checkpoints into the run directory -- :mod:`.submit`;
4. wait until no job of the run is pending or running, then clean up (:meth:`.run.Replay._cleanup`,
   the one way out of every run: finished, timed out, failed or interrupted by SIGINT/SIGTERM/SIGHUP,
   :mod:`.interrupt`): stop the controller, cancel the run's own unfinished jobs (that is the
   harness, the controller never cancels anything) and ``slurm-fair revert`` so the next run starts
   from a clean Slurm -- :mod:`.run`;
5. read ``sacct`` through the Slurm adapter, turn each job into a simulator
   :class:`~slurm_fair.sim.metrics.JobRecord` in *trace* seconds (``(t - t0) * S``), and compute
   the metrics with the simulator's own :func:`~slurm_fair.sim.metrics.summarize` -- :mod:`.score`.

Requeues: Slurm holds a requeued job for its credential lifetime + 1 s before it may start again
(reason ``BeginTime``; a relaunch on the same node sooner fails with "credential revoked", so
nobody shortens the hold). The testbed sets a short lifetime (``cluster.cred_expire_s``, default
10 s, so the hold is 11 real s = ``11 * S`` trace s); the result records it as
``requeue_hold_real_s``.

Time: ``t0`` is a whole wall-clock second (sacct stores whole seconds, so arrival 0 is recorded
as exactly 0). One real second is ``S`` trace seconds: Slurm's scheduling latency (about a
second: ``sched_interval=2``, job launch) is therefore ``~S`` trace seconds per start.

Slurm commands: submission, cancellation and the completion poll run through
:meth:`Testbed.run` (this is test infrastructure, like the testbed itself); accounting is read
through the real adapter :class:`~slurm_fair.slurm.cli.SlurmCli`. A requeued job keeps its job id;
its per-type GPU time and first start come from the emulator's checkpoint segments, since
``sacct -X`` shows the last run only.
"""
