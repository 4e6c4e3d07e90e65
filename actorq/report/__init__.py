"""The ActorQ paper-style report, built from run directories alone (``actorq report DIR... --out OUT``).

``stats`` holds the pure statistics (thresholds, time to threshold on noisy curves, medians over seeds, regime
diagnosis, projections), ``runs`` reads run directories, ``analysis`` turns runs into the report's tables,
``render`` draws the figures and ``markdown`` writes the text; ``paper`` holds the ActorQ paper's own numbers.
"""
