"""Micro-benchmarks behind ``actorq bench``: ``policy`` (actor inference latency, weight-update cost, message size
per precision)."""
