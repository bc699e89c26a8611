"""Throughput estimates: ``T_jk`` for every job and GPU type of the cluster, in one home.

The controller (phase 3 of a cycle), ``slurm-fair snapshot --json`` and the reports all take a
job's speed from here, so none of them can disagree about it. Modules:

* :mod:`.gavel`: Gavel's measured table (job type x GPU count x GPU type), its loader and
  fallback for unmeasured counts (the simulator reads it directly);
* :mod:`.classes`: the class table (``conf/classes.csv`` or the embedded Gavel rows) and the one
  matcher of ``fair:class`` names (:func:`.classes.known_class`);
* :mod:`.tags`: what the comment tags mean (parsed once, by :func:`slurm_fair.slurm.parse.tags.parse_tags`);
* :mod:`.rules`: per-site class rules from the configuration;
* :mod:`.online`: the online EWMA of reported throughputs (a pure fold; the store saves it);
* :mod:`.estimate`: one job's estimate by the order of precedence below;
* :mod:`.priors`, :mod:`.priors_table`: the sourced type priors and type-name normalisation;
* :mod:`.learn`: the one learner of group speeds from run times; :mod:`.history`: sacct rows to runs;
* :mod:`.runtime`: a job's run time from its time limit and its group's finished runs (use ratios).

Order of precedence (the first that applies wins; documented in ``docs/controller.md``):

1. **observed**: the online estimate of the job's class (or of the job itself when it has no
   class) on that GPU type: an exponentially weighted mean of the ``fair:tput=<steps/s>`` values
   jobs report in their comment while running there (``[throughput].ewma_alpha``);
2. **tag**: the job's ``fair:class=NAME`` comment tag, looked up in the class table
   (``conf/classes.csv``, or the embedded measured Gavel table when none is configured);
3. **rule**: per-site rules: ``[throughput].account_classes`` (account -> class), then
   ``[throughput].name_classes`` (job-name glob -> class, first match in file order), then the
   first entry of ``[tenants.NAME].classes``;
4. ``[throughput].default_class``;
5. **learned**: the job's group (user + job name + GPUs) in the controller's learned table
   (:mod:`.learn`, refreshed from accounting by :mod:`slurm_fair.controller.learned`);
6. **prior**: the type priors (:mod:`.priors`, numbers and sources in :mod:`.priors_table`);
7. **flat**: 1.0 on every GPU type, only when no type of the cluster is a known model.

Steps 1 and 2 work per GPU type: observations exist only where a job ran, so the other types
come from the class table when the class has a row. Both are per gang size: a job of G > 1 GPUs
reads the class's row measured at the largest size <= G (:meth:`.classes.ClassTable.row`) and its
observations are pooled as ``class@G``; 0 in a row means the class cannot run there. A type neither observed nor in the table
gets the known values scaled by its prior (``prior``), else half the job's *slowest* known value
(``assumed``: never "as fast as the best", :func:`.priors.unknown_prior`).
A class name that is neither in the table nor observed is warned about (once per cycle) and the
next rule is tried. Comments are user text: tags are parsed defensively and anything that is not
a sane name or a finite positive number is ignored.
"""
