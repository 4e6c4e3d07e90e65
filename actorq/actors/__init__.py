"""CPU actors: the quantized torch policy (``policy``) and the Acme-style actor around it (``actor``).

Nothing here imports TensorFlow: actors receive the learner's weights as encoded messages
(:mod:`actorq.quantize.codec`) keyed by torch names (:mod:`actorq.networks.mapping`).
"""
