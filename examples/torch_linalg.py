# torch.linalg replaced the old top-level solvers (torch.solve, torch.eig, torch.symeig,
# torch.matrix_rank were removed). Completions after `torch.linalg.` use what is installed.
import torch

a = torch.randn(4, 4)
b = torch.randn(4, 1)
x = torch.linalg.