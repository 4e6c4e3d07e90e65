"""One-off recipe probe on one study cell: python probe.py PAIR BITS SEED LR OUT"""

import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

from actorq.studies import qat_study

torch.set_num_threads(1)
pair_key, bits, seed, lr, out = (
    sys.argv[1],
    int(sys.argv[2]),
    int(sys.argv[3]),
    float(sys.argv[4]),
    Path(sys.argv[5]),
)
pair = qat_study.PAIRS[pair_key]
pair = dataclasses.replace(pair, recipe=dataclasses.replace(pair.recipe, learning_rate=lr))
t0 = time.perf_counter()
rec = qat_study.run_qat_cell(pair, bits, seed, 10, "finetune", Path("/tmp/qatw/qat_recipe"))
rec["cell_seconds"] = round(time.perf_counter() - t0, 1)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(rec, indent=1))
print(out, sum(rec["qat_deployed"]) / len(rec["qat_deployed"]))
