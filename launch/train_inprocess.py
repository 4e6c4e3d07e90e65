"""Train with the inprocess launcher: every role a thread of this process (debugging).

``python launch/train_inprocess.py CONFIG [section.key=value ...] [actorq train flags]`` is
``actorq train CONFIG ... --launcher inprocess``; the launcher itself is :mod:`actorq.launchers`.
"""

import sys

from actorq.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:], "--launcher", "inprocess"]))
