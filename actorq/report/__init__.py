"""The ActorQ paper-style report, built from run directories or their curated records (``actorq report DIR...
--out OUT``).

Modules, from the bottom up (each imports only modules above it in this list; no circles):

* ``multitest``: Holm's correction of a family of p-values;
* ``stats``: pure statistics on numbers (smoothing, thresholds, time to threshold after the first learner
  update, the untrained score, medians over seeds, curve bands, projections);
* ``bootstrap``: the interval type, the speed-up's bootstrap interval (censored times, paired by seed), and the
  rate limiter's blocked shares, the relative loss E% paired by seed;
* ``intervals``: the intervals packages give: IQM, mean and probability of improvement with rliable's stratified
  bootstrap, the Kaplan-Meier median time to threshold with lifelines;
* ``coverage``: each interval's real coverage at the number of seeds used, by simulation;
* ``regime``: the one regime model (learner capacity C, actor supply S_p, ``min(S_p, C / spi)``, each run's
  label and the predicted speed-up);
* ``paper``: the ActorQ paper's own numbers;
* ``runs``: reading one run directory (summary, config, metrics) into a ``RunData``;
* ``disturbance``: how much of the machine other processes used during a run;
* ``measure``: per-run measurements (rates, breakdown, energy, blocked shares) from a run or its record;
* ``records``: curated run records, written by ``actorq experiment`` and read by the report (``load_runs``);
* ``paired``: reward against fp32 seed by seed at equal env steps or learner steps;
* ``plan_input``: ``actorq report --plan``: the regime model's C and S_p from an ``actorq plan --json`` file,
  refused when its config or machine is not the runs';
* ``analysis``: runs grouped per task and label into tables (threshold, times, speed-ups, regimes);
* ``markdown``, ``grid_md``, ``projection_md``, ``behaviour_md``, ``versions_md``: the report's text and tables
  (``behaviour_md``: how often quantized actors act otherwise than fp32, from ``evaluator.evaluate_quantized`` runs;
  ``versions_md``: how many weight versions the threshold's evaluations scored, and the caveat when precisions
  differ);
* ``machines``: where a task's runs ran, one line per machine, and the caveat when they come from several;
* ``render``: the figures;
* ``cli``: ``actorq report``.

The QAT study's statistics and report (``actorq qat-report``) are study code: :mod:`actorq.studies.qat_stats`,
``qat_plots`` and ``qat_md``, which use this package's intervals.
"""
