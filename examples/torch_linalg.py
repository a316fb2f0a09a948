# torch.solve, torch.eig and torch.symeig were removed: the solvers live in torch.linalg.
# A constrained completion after `torch.linalg.` names what the installed torch has.
import torch


def least_squares(a, b):
    solution = torch.solve(b, a)
    return solution


a = torch.randn(4, 4)
b = torch.randn(4, 1)
x = torch.linalg.