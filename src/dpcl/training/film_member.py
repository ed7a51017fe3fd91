"""The FiLM member format and its swap into one shared backbone.

A member stores only its FiLM values and head (:class:`FilmMember`): the normalisation layers' scales
and biases named by :func:`dpcl.training.film_model.film_parameter_names`, and a linear head over the
task's outputs. :func:`film_net` swaps a member's values into the one backbone for training or
inference and restores the backbone's own values afterwards, so T tasks never need T copies.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from ..devices import resolve_device
from .film_model import film_parameter_names


def _feature_dim(backbone) -> int:
    dim = getattr(backbone, "num_features", None)
    if not isinstance(dim, int) or dim <= 0:
        raise ValueError(
            f"backbone {type(backbone).__name__} does not expose num_features (a timm model does)"
        )
    return dim


@dataclass
class FilmMember:
    """One released PEFT-ensemble member Z_t: FiLM values and the head over O_t (CPU float32)."""

    film: dict[str, torch.Tensor]  # parameter name -> LayerNorm weight or bias
    weight: torch.Tensor  # (n_out, dim)
    bias: torch.Tensor  # (n_out,)

    @property
    def n_out(self) -> int:
        return int(self.weight.shape[0])

    def n_parameters(self) -> int:
        """Trainable parameter count: FiLM + |O_t|·dim + |O_t| (App. D)."""
        return sum(t.numel() for t in self.film.values()) + self.weight.numel() + self.bias.numel()

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat name → array mapping for ``.npz``/safetensors files (``film/<name>``, ``head/*``)."""
        out = {f"film/{k}": v.detach().cpu().numpy() for k, v in self.film.items()}
        out["head/weight"] = self.weight.detach().cpu().numpy()
        out["head/bias"] = self.bias.detach().cpu().numpy()
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> FilmMember:
        """Inverse of :meth:`to_arrays`."""
        for key in ("head/weight", "head/bias"):
            if key not in arrays:
                raise ValueError(f"member arrays lack {key!r}; found {sorted(arrays)[:5]}")
        film = {
            k[len("film/") :]: torch.as_tensor(np.array(v))
            for k, v in arrays.items()
            if k.startswith("film/")
        }
        return cls(
            film,
            torch.as_tensor(np.array(arrays["head/weight"])),
            torch.as_tensor(np.array(arrays["head/bias"])),
        )


def pretrained_member(backbone, n_out: int) -> FilmMember:
    """The starting point of Alg. 2: the backbone's pre-trained FiLM values and a zero head over n_out."""
    if not isinstance(n_out, int | np.integer) or n_out < 0:
        raise ValueError(f"n_out must be a non-negative integer, got {n_out!r}")
    params = dict(backbone.named_parameters())
    film = {n: params[n].detach().to("cpu", torch.float32).clone() for n in film_parameter_names(backbone)}
    dim = _feature_dim(backbone)
    return FilmMember(film, torch.zeros(int(n_out), dim), torch.zeros(int(n_out)))


class FilmNet(nn.Module):
    """Backbone features → linear head over O_t (the model of one ensemble member)."""

    def __init__(self, backbone: nn.Module, head: nn.Linear) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


@contextlib.contextmanager
def film_net(backbone, member: FilmMember, device: str = "auto", trainable: bool = False) -> Iterator:
    """The shared ``backbone`` with ``member``'s FiLM values swapped in, plus its head.

    Inside the context only the FiLM parameters and the head require gradients when
    ``trainable``; on exit the backbone's own FiLM values and ``requires_grad`` flags are
    restored, so one backbone serves every member (no T copies). The backbone is moved to
    ``device`` ("auto": CUDA if available) and stays there.
    """

    dev = resolve_device(device)
    backbone.to(dev)
    params = dict(backbone.named_parameters())
    names = film_parameter_names(backbone)
    if set(member.film) != set(names):
        missing = sorted(set(names) - set(member.film))[:3]
        extra = sorted(set(member.film) - set(names))[:3]
        raise ValueError(
            f"member's FiLM parameters do not fit the backbone (missing {missing}, extra {extra})"
        )
    dim = _feature_dim(backbone)
    if member.weight.shape != (member.n_out, dim) or member.bias.shape != (member.n_out,):
        raise ValueError(
            f"member head has shape {tuple(member.weight.shape)}; expected ({member.n_out}, {dim})"
        )
    saved = {n: params[n].detach().clone() for n in names}
    flags = {n: p.requires_grad for n, p in params.items()}
    mode = backbone.training
    # values come from the member: skip the random init (it would consume the global torch RNG)
    with warnings.catch_warnings():  # an empty O_t gives a (0, dim) head: a valid, empty classifier
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors")
        head = nn.utils.skip_init(nn.Linear, dim, member.n_out, device=dev)
    try:
        with torch.no_grad():
            for n in names:
                params[n].copy_(member.film[n])
            head.weight.copy_(member.weight)
            head.bias.copy_(member.bias)
        for n, p in params.items():
            p.requires_grad_(trainable and n in member.film)
        head.requires_grad_(trainable)
        yield FilmNet(backbone, head)
    finally:
        with torch.no_grad():
            for n in names:
                params[n].copy_(saved[n])
        for n, p in params.items():
            p.requires_grad_(flags[n])
        backbone.train(mode)


def member_from_net(net) -> FilmMember:
    """Snapshot of the trainable FiLM values and head of a :func:`film_net` module (CPU float32)."""
    params = dict(net.backbone.named_parameters())
    film = {
        n: params[n].detach().to("cpu", torch.float32).clone() for n in film_parameter_names(net.backbone)
    }
    return FilmMember(film, net.head.weight.detach().cpu().clone(), net.head.bias.detach().cpu().clone())


def trainable_parameters(net) -> list:
    """FiLM parameters then the head's, in a fixed order (noise is drawn in this order)."""
    params = dict(net.backbone.named_parameters())
    return [params[n] for n in film_parameter_names(net.backbone)] + [net.head.weight, net.head.bias]
