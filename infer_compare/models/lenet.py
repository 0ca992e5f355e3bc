"""LeNet-5 (LeCun et al. 1998) for 1x32x32 grey input, 10 classes, and its training
on scikit-learn's digits so that it has a real accuracy column."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

# Bump when the architecture or the training recipe changes: it keys the weights cache.
RECIPE = "lenet5-relu-avgpool-adam-onecycle-3e-3-bs32-e20-v1"


def build():
    import torch.nn as nn

    class LeNet5(nn.Module):
        """C1 conv 6@5x5, S2 avg-pool, C3 conv 16@5x5, S4 avg-pool, C5 120, F6 84, output 10
        (ReLU in place of the original scaled tanh)."""

        def __init__(self, num_classes: int = 10):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 6, 5), nn.ReLU(), nn.AvgPool2d(2),
                nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2),
            )
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
                nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes),
            )

        def forward(self, x):
            return self.classifier(self.features(x))

    return LeNet5()


def train(model, x: np.ndarray, y: np.ndarray, seed: int = 0, epochs: int = 20,
          log: Callable[[str], None] = lambda m: None) -> dict:
    """Adam + OneCycle (max lr 3e-3), batch 32, 20 epochs: ~6 s on two cores."""
    import torch

    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    bs = 32
    steps = -(-len(xt) // bs)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=epochs * steps)
    lossf = torch.nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    model.train()
    loss = None
    for ep in range(epochs):
        perm = torch.randperm(len(xt), generator=g)
        for i in range(steps):
            idx = perm[i * bs:(i + 1) * bs]
            opt.zero_grad()
            loss = lossf(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
        if ep % 5 == 4:
            log(f"LeNet-5 training: epoch {ep + 1}/{epochs}, loss {loss.item():.3f}")
    model.eval()
    return {"train_s": round(time.perf_counter() - t0, 2), "epochs": epochs, "final_loss": float(loss.item())}
