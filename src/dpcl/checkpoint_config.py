"""The pretrained config that comes with a local checkpoint file.

timm describes the preprocessing a checkpoint was trained with in its ``pretrained_cfg``
(``mean``, ``std``, ``input_size``, ``interpolation``, ``crop_pct``, ``crop_mode``,
``fixed_input_size``, ...). For a local checkpoint it is read from (the first that has one):

1. the file itself: a ``.pth``/``.bin`` dict's ``pretrained_cfg`` entry (beside its
   ``state_dict``/``model`` or its tensors), or a ``.safetensors`` file's metadata entry
   ``pretrained_cfg`` (a JSON object as a string: safetensors metadata holds strings);
2. ``config.json`` in the checkpoint's folder, the timm / Hugging Face hub layout that
   ``timm.models.save_for_hf`` and ``push_to_hf_hub`` write: its ``pretrained_cfg`` object
   (files of older timm versions hold those keys at the top level) and ``model_args``, the
   ``timm.create_model`` arguments the checkpoint was built with (e.g. ``img_size``).

Every value read is checked here, and an error names the file and the key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

# the pretrained_cfg keys that decide the preprocessing or how the model is built
PREPROCESSING_KEYS = (
    "mean",
    "std",
    "input_size",
    "interpolation",
    "crop_pct",
    "crop_mode",
    "fixed_input_size",
)


class CheckpointConfigError(ValueError):
    """A checkpoint's pretrained config is unreadable or holds an invalid value."""


@dataclass(frozen=True)
class CheckpointConfig:
    """What a local checkpoint says about itself.

    ``pretrained_cfg``: the checked :data:`PREPROCESSING_KEYS` it sets (others are ignored);
    ``model_args``: ``timm.create_model`` arguments (config.json only); ``architecture``:
    the timm arch it names, if any; ``source``: where it was read, for the log.
    """

    source: str
    pretrained_cfg: dict = field(default_factory=dict)
    model_args: dict = field(default_factory=dict)
    architecture: str | None = None


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CheckpointConfigError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def check_triple(value, where: str, positive: bool = False) -> tuple[float, float, float]:
    """Three finite numbers (per-channel mean or std; ``positive``: each > 0)."""
    if isinstance(value, str | bytes) or not hasattr(value, "__len__") or len(value) != 3:
        raise CheckpointConfigError(f"{where}: expected three numbers (one per RGB channel), got {value!r}")
    out = tuple(_number(v, where) for v in value)
    if positive and min(out) <= 0:
        raise CheckpointConfigError(f"{where}: every entry must be > 0, got {list(value)!r}")
    return out


def _checked(cfg: dict, where: str) -> dict:
    """The :data:`PREPROCESSING_KEYS` of a pretrained config, type-checked (None = absent)."""
    if not isinstance(cfg, dict):
        raise CheckpointConfigError(f"{where}: pretrained_cfg must be an object, got {type(cfg).__name__}")
    out = {}
    for key in PREPROCESSING_KEYS:
        value = cfg.get(key)
        if value is None:
            continue
        at = f"{where}: pretrained_cfg.{key}"
        if key in ("mean", "std"):
            out[key] = check_triple(value, at, positive=key == "std")
        elif key == "input_size":
            size = value[-1] if isinstance(value, list | tuple) and value else value
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise CheckpointConfigError(
                    f"{at}: expected [channels, height, width] of integers, got {value!r}"
                )
            out[key] = (3, int(size), int(size))
        elif key == "crop_pct":
            pct = _number(value, at)
            if not 0 < pct <= 1:
                raise CheckpointConfigError(f"{at}: must be in (0, 1], got {value!r}")
            out[key] = pct
        elif key == "fixed_input_size":
            if not isinstance(value, bool):
                raise CheckpointConfigError(f"{at}: expected true or false, got {value!r}")
            out[key] = value
        else:  # interpolation, crop_mode: names that dpcl.backbones checks against what it supports
            if not isinstance(value, str):
                raise CheckpointConfigError(f"{at}: expected a name, got {value!r}")
            out[key] = value
    return out


def _from_dict(cfg: dict, where: str, source: str) -> CheckpointConfig:
    """timm's config.json layout: ``pretrained_cfg`` and ``model_args`` objects (older files:
    the pretrained config's keys at the top level)."""
    pcfg = cfg.get("pretrained_cfg", cfg)
    model_args = cfg.get("model_args") or {}
    if not isinstance(model_args, dict):
        raise CheckpointConfigError(f"{where}: model_args must be an object, got {model_args!r}")
    arch = cfg.get("architecture") or (pcfg.get("architecture") if isinstance(pcfg, dict) else None)
    return CheckpointConfig(
        source=source,
        pretrained_cfg=_checked(pcfg, where),
        # the backbone is used headless: the checkpoint's classifier size does not matter
        model_args={k: v for k, v in model_args.items() if k != "num_classes"},
        architecture=str(arch) if arch else None,
    )


def _stored_in_file(path: Path) -> dict | None:
    """The ``pretrained_cfg`` stored inside the checkpoint file (None: none stored)."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
        except Exception as exc:  # a damaged or foreign file: the state dict loader reports it
            raise CheckpointConfigError(f"checkpoint file {path} could not be read ({exc})") from exc
        if "pretrained_cfg" not in meta:
            return None
        try:
            return json.loads(meta["pretrained_cfg"])
        except json.JSONDecodeError as exc:
            raise CheckpointConfigError(
                f"{path}: metadata entry pretrained_cfg is not a JSON object ({exc})"
            ) from exc
    if path.suffix in (".pth", ".pt", ".bin", ".ckpt"):
        import torch

        try:  # mmap: a look at the top-level keys without reading every tensor
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception:
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:
                raise CheckpointConfigError(f"checkpoint file {path} could not be read ({exc})") from exc
        if isinstance(obj, dict) and isinstance(obj.get("pretrained_cfg"), dict):
            return obj["pretrained_cfg"]
    return None


def read_checkpoint_config(path: str | Path) -> CheckpointConfig | None:
    """The pretrained config stored with the local checkpoint ``path`` (see the module
    docstring for where it is looked for); None when there is none."""
    path = Path(path)
    stored = _stored_in_file(path)
    if stored is not None:
        where = f"checkpoint {path} (its pretrained_cfg entry)"
        return _from_dict({"pretrained_cfg": stored}, str(path), where)
    cfg_file = path.parent / "config.json"
    if not cfg_file.is_file():
        return None
    try:
        cfg = json.loads(cfg_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointConfigError(
            f"{cfg_file} (beside checkpoint {path.name}) is not valid JSON: {exc}"
        ) from exc
    if not isinstance(cfg, dict):
        raise CheckpointConfigError(f"{cfg_file}: expected a JSON object, got {type(cfg).__name__}")
    return _from_dict(cfg, str(cfg_file), f"{cfg_file} (beside the checkpoint)")
