"""The ActorQ paper-style report, built from run directories or their curated records (``actorq report DIR...
--out OUT``).

Modules, from the bottom up (each imports only modules above it in this list; no circles):

* ``multitest``: Holm's correction of a family of p-values;
* ``preregistration``: a preregistered grid file's frozen design (its ``preregistration`` block) and its sha256;
* ``stats``: pure statistics on numbers (smoothing, thresholds, time to threshold after the first learner
  update, the untrained score, medians over seeds, curve bands, projections);
* ``bootstrap``: the interval type, the speed-up's bootstrap interval (censored times, paired by seed), and the
  rate limiter's blocked shares, the relative loss E% paired by seed;
* ``intervals``: the intervals packages give: IQM, mean and probability of improvement with rliable's stratified
  bootstrap, the Kaplan-Meier median time to threshold with lifelines;
* ``censored``: ratios of censored times that stay finite (RMST, log-normal AFT), the log-rank test, and the words
  an interval allows;
* ``coverage``: each interval's real coverage at the number of seeds used, by simulation (the speed-ups' also under
  true ratios of 1, 2 and 3 at a comparison's own censoring);
* ``regime``: the one regime model (learner capacity C, actor supply S_p, ``min(S_p, C / spi)``, each run's
  label and the predicted speed-up);
* ``paper``: the ActorQ paper's own numbers;
* ``runs``: reading one run directory (summary, config, metrics) into a ``RunData``;
* ``disturbance``: how much of the machine other processes used during a run;
* ``measure``: per-run measurements (rates, breakdown, energy, blocked shares) from a run or its record;
* ``records``: curated run records, written by ``actorq experiment`` and read by the report (``load_runs``);
* ``paired``: reward against fp32 seed by seed at equal env steps or learner steps;
* ``pairing``: when two labels' runs pair seed by seed (only inside one cell, experiment and machine);
* ``plan_input``: ``actorq report --plan``: the regime model's C and S_p from an ``actorq plan --json`` file,
  refused when its config or machine is not the runs';
* ``analysis``: runs grouped per task and label into tables (threshold, times, speed-ups, regimes);
* ``comparisons``: every speed-up the report reads (same setting; best against best with the choice inside the
  bootstrap) with its Kaplan-Meier medians, ratio of medians, RMST and AFT ratios and log-rank p;
* ``replication``: ``actorq report --preregistered``: a preregistered claim judged by its frozen criterion, counting
  only the runs made from the frozen file;
* ``markdown``, ``comparisons_md``, ``grid_md``, ``projection_md``, ``behaviour_md``, ``versions_md``: the report's text and tables
  (``behaviour_md``: how often quantized actors act otherwise than fp32, from ``evaluator.evaluate_quantized`` runs;
  ``comparisons_md``: the finite ratios' table, its unbounded count and simulated coverage;
  ``versions_md``: how many weight versions the threshold's evaluations scored, and the caveat when precisions
  differ);
* ``model_check``: the regime model checked run by run (predicted env steps/s, as planned and at each run's memory
  bandwidth, against delivered);
* ``machines``: where a task's runs ran, one line per machine, and the caveat when they come from several;
* ``render``: the figures;
* ``sections``: the report's markdown section per task and per benchmark file;
* ``cli``: ``actorq report``.

The QAT study's statistics and report (``actorq qat-report``) are study code: :mod:`actorq.studies.qat_stats`,
``qat_plots`` and ``qat_md``, which use this package's intervals.
"""
