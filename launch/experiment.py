"""Train once per precision and seed, interleaved and resumable.

``python launch/experiment.py CONFIG --out DIR [--precisions fp32,fp16,int8] [--seeds 3] ...`` is
``actorq experiment ...``; the orchestration itself is :mod:`actorq.experiments.experiment`.
"""

import sys

from actorq.cli import main

if __name__ == "__main__":
    sys.exit(main(["experiment", *sys.argv[1:]]))
