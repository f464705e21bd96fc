"""One torchrun worker: Lightning's Trainer and Fabric on two processes (DDP), on the device
its argument names (``accelerator=`` that name, ``devices=2``, nothing else); rank 0 writes
the trained parameters as JSON into the file its second argument names."""

from __future__ import annotations

import json
import os
import sys

import torch

device, out = sys.argv[1], sys.argv[2]
if device == "tpu":
    import torchtpu  # noqa: F401
import lightning.pytorch as pl  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402

rows = torch.randn(64, 6, generator=torch.Generator().manual_seed(0))
data = torch.utils.data.TensorDataset(rows, (rows[:, :3].sum(1) > 0).long())


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 3))

    def training_step(self, batch, index):
        loss = torch.nn.functional.cross_entropy(self.net(batch[0]), batch[1])
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


pl.seed_everything(0, verbose=False)
model = Module()
trainer = pl.Trainer(accelerator=device, devices=2, max_epochs=2, logger=False,
                     enable_progress_bar=False, enable_checkpointing=False,
                     enable_model_summary=False)
trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8))
kinds = [type(trainer.strategy).__name__, str(trainer.strategy.root_device),
         float(trainer.callback_metrics["train_loss"])]

fabric = Fabric(accelerator=device, devices=2)
fabric.launch()
fabric.seed_everything(0, verbose=False)
net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
net, opt = fabric.setup(net, torch.optim.SGD(net.parameters(), lr=0.1))
for x, y in fabric.setup_dataloaders(torch.utils.data.DataLoader(data, batch_size=8)):
    fabric.backward(torch.nn.functional.cross_entropy(net(x), y))
    opt.step()
    opt.zero_grad()
kinds += [type(fabric.strategy).__name__, str(fabric.device)]

if int(os.environ["RANK"]) == 0:
    with open(out, "w") as f:
        json.dump({"kinds": kinds,
                   "trainer": [p.detach().cpu().flatten().tolist() for p in model.parameters()],
                   "fabric": [p.detach().cpu().flatten().tolist() for p in net.parameters()]}, f)
