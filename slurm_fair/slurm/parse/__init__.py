"""Pure parsers of Slurm's command output (no I/O): text in, model objects out.

The formats seen in the field, all accepted:

* TRES request strings: ``gres:gpu:v100:2`` (Slurm 22.05), ``gres/gpu:v100:2`` (24.05+),
  ``gpu:v100:2``, untyped ``gres:gpu:2`` / ``gpu``, several entries separated by commas;
* node gres (sinfo ``Gres``/``GresUsed``): ``gpu:v100:4(S:0-1)``, ``gpu:v100:2(IDX:0,2-3)``,
  ``gpu:a100:2,gpu:v100:2`` (several types on one node), ``(null)``;
* TRES maps (``AllocTRES``, ``tres-alloc``, ``GrpTRES``): ``cpu=2,gres/gpu=2,gres/gpu:v100=2``;
* hostlists through ClusterShell's ``NodeSet``.

Free text (job names and comments) is user-controlled: records are delimited by a random
per-call separator (see :func:`.records.split_records`), so no byte a user can type breaks a
parse. Modules, one per format or command:

* :mod:`.records`: records of ``n`` fields split on the per-call separator;
* :mod:`.fields`: scalar columns (times, integers, memory sizes, durations, hostlists);
* :mod:`.gres`: gres and TRES strings, GPU requests (:func:`.gres.gpu_request`);
* :mod:`.tags`: the ``fair:`` comment tags (the one parser of them);
* :mod:`.squeue`, :mod:`.sinfo`, :mod:`.sacct`, :mod:`.sacctmgr`, :mod:`.outlook` (one job's squeue
  and sprio): the columns each command is
  asked for, and its records -> model objects.
"""
