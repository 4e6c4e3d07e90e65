"""QAT fine-tuning of a zoo agent at one width (item 2 follow-up): python zoo_qat.py ZOO_DIR BITS SEED EPISODES STEPS OUT"""

import json
import sys
import time
from pathlib import Path

import torch

from actorq.studies import qat_finetune, qat_study

torch.set_num_threads(1)
path, bits, seed, episodes, steps, out = (
    sys.argv[1],
    int(sys.argv[2]),
    int(sys.argv[3]),
    int(sys.argv[4]),
    int(sys.argv[5]),
    Path(sys.argv[6]),
)
t0 = time.perf_counter()
rec = qat_study.run_zoo_cell(path, bits, seed, episodes, qat_finetune.QatRecipe(finetune_steps=steps))
rec["cell_seconds"] = round(time.perf_counter() - t0, 1)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(rec, indent=1))
print(json.dumps({k: rec[k] for k in ("fp32", "ptq_wa", "qat_deployed", "cell_seconds")}))
