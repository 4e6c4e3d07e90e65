"""Train with the launchpad launcher: the roles as nodes of one Launchpad program (LOCAL_MULTI_PROCESSING).

``python launch/train_launchpad.py CONFIG [section.key=value ...] [actorq train flags]`` is
``actorq train CONFIG ... --launcher launchpad``; the launcher itself is :mod:`actorq.launchers`.
"""

import sys

from actorq.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:], "--launcher", "launchpad"]))
