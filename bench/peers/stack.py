"""stack.py - the step graph example's model (examples/model_backward.c) as an nn.Module, for the PyTorch step peers
(step_torch.py, step_ddp_torch.py): L residual GELU(tanh) MLP layers, x + fc2(gelu(fc1(x)))."""
import torch

MODELS = {"large": (8, 2048, 8192, 8192), "small": (8, 1024, 4096, 2048)}  # layers, D, F, tokens


class Stack(torch.nn.Module):
    def __init__(self, layers, d, f):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(d, f), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(f, d))
            for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x
