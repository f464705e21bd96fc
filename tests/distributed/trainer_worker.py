"""One torchrun worker: the Hugging Face Trainer on a tiny GPT-2, on the device its argument
names; rank 0 writes the logged losses as JSON into the file its second argument names."""

from __future__ import annotations

import json
import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

device, out = sys.argv[1], sys.argv[2]
if device == "tpu":
    import torchtpu  # noqa: F401

torch.manual_seed(0)
config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(config)
rows = torch.randint(0, 100, (16, 16), generator=torch.Generator().manual_seed(0))
args = TrainingArguments(
    output_dir=os.path.join(os.path.dirname(out), f"trainer_{device}"), max_steps=3,
    per_device_train_batch_size=2, logging_steps=1, report_to=[], save_strategy="no",
    use_cpu=device == "cpu", learning_rate=1e-3, seed=0,
    ddp_find_unused_parameters=False)  # DDP's unused-parameter search is not on tpu (README)
trainer = Trainer(model=model, args=args,
                  train_dataset=[{"input_ids": r, "labels": r} for r in rows])
trainer.train()
if int(os.environ["RANK"]) == 0:
    with open(out, "w") as f:
        json.dump({"parallel_mode": str(trainer.args.parallel_mode),
                   "device": next(model.parameters()).device.type,
                   "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}, f)
# Both ranks aborted now and then at interpreter exit on a loaded 2-core machine ("terminate
# called without an active exception", after training had finished, with and without
# destroy_process_group, on cpu runs that never import torchtpu): a C++ thread torn down
# during teardown. Results are written; once both ranks are here, leave without teardown.
torch.distributed.barrier()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
