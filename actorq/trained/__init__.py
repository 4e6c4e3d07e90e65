"""Using a trained run: its learner's policy evaluated at a precision (``actorq evaluate``), recorded as video, and
exported as a self-contained file (``actorq export``).

Runtime, not lab: it reads a run directory with the runtime's own rules (learner checkpoint, TF -> torch mapping,
the quantizer's encoding, the actors' verified kernels) and never imports the report, bench, experiments or
studies. :mod:`actorq.trained.cli` registers the commands without importing TensorFlow or torch.
"""

FORMATS = ("onnx", "torchscript", "state-dict")
"""The file formats ``actorq export`` writes."""
