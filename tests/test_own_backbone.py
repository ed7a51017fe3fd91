"""Your own backbone: any timm arch with a local checkpoint (.pth / .safetensors) and the
pretrained config that comes with it (in the file or a sibling config.json, timm's hub layout)."""

import copy
import json

import numpy as np
import pytest
import timm
import torch

from dpcl.backbones import BackboneError, Preprocessing, backbone_from_config, load_backbone
from dpcl.features import load_feature_cache, preprocess_batch

ARCH = "vit_tiny_patch16_224"
SMALL = {"img_size": 32, "depth": 2, "embed_dim": 48, "num_heads": 2}
MEAN, STD = (0.31, 0.42, 0.53), (0.21, 0.25, 0.29)  # distinctive: neither timm's nor ImageNet's


def _source_model(num_classes=7):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        return timm.create_model(ARCH, pretrained=False, num_classes=num_classes, **SMALL).eval()


@pytest.fixture(scope="module")
def source():
    return _source_model()


@pytest.fixture(scope="module")
def hub_dir(tmp_path_factory, source):
    """timm's own hub layout (save_for_hf): weights and config.json with model_args and the
    distinctive mean/std, both as .safetensors and as .bin."""
    from timm.models import save_for_hf

    d = tmp_path_factory.mktemp("hub")
    pcfg = {"pretrained_cfg": {"mean": list(MEAN), "std": list(STD), "interpolation": "bilinear"}}
    save_for_hf(source, str(d), model_config=pcfg, safe_serialization="both")
    return d


def _reference(model, images, mean, std, size=32, interpolation="bilinear", crop_pct=0.9):
    """Features of the source model itself under the given preprocessing."""
    pre = Preprocessing(
        image_size=size,
        mean=mean,
        std=std,
        interpolation=interpolation,
        crop_pct=crop_pct,
        channels_last=False,
    )
    model = copy.deepcopy(model)
    model.reset_classifier(0)
    with torch.inference_mode():
        return model(preprocess_batch(images, pre)).numpy()


@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin"])
def test_hub_layout_checkpoint_end_to_end(tmp_path, hub_dir, source, name, capsys):
    """The features stage (the function the features rule runs) on a fake ImageNet-R split with a
    checkpoint in timm's hub layout: the model is built from config.json's model_args, its mean
    and std and interpolation are used (and logged with their source), and the features are
    those of the source model under that normalisation."""
    from dpcl.fixtures import make_fake_imagenet_r
    from dpcl.stages.data import obtain_dataset
    from dpcl.stages.features import cache_features

    src = tmp_path / "src"
    src.mkdir()
    make_fake_imagenet_r(src, per_class=(3, 3, 2, 2), n_corrupt=0)
    manifest = tmp_path / "resources" / "imagenet_r" / "MANIFEST.json"
    dcfg = {"source": "local", "local_dir": str(src), "verify": False, "split_seed": 0, "image_size": 40}
    obtain_dataset("imagenet_r", manifest, dcfg)
    bcfg = {"arch": ARCH, "weights": str(hub_dir / name), "batch_size": 2, "channels_last": False}
    meta = cache_features(
        "imagenet_r", manifest.parent, "test", dcfg, "mine", bcfg, out=tmp_path / "f.npz", progress=False
    )
    feats, _, index, _ = load_feature_cache(tmp_path / "f.npz")
    assert tuple(meta["mean"]) == MEAN and tuple(meta["std"]) == STD
    assert meta["image_size"] == 32 and meta["interpolation"] == "bilinear" and feats.shape[1] == 48
    assert meta["checkpoint_sha256"] is not None
    log = capsys.readouterr().err
    assert "backbones.mine" in log and f"mean {list(MEAN)} from {hub_dir / 'config.json'}" in log
    assert "img_size from" in log and "crop_pct 0.9 from" in log

    from dpcl.stages.data import dataset_subset

    ds, idx = dataset_subset("imagenet_r", manifest.parent, "test", dcfg)
    assert np.array_equal(idx, index)
    images = ds.images[idx]
    want = _reference(source, images, MEAN, STD)
    assert np.allclose(feats, want, atol=1e-5)
    # the normalisation matters: timm's default one (0.5) would give other features
    assert not np.allclose(feats, _reference(source, images, (0.5,) * 3, (0.5,) * 3), atol=1e-3)


def test_config_keys_override_the_checkpoint_and_say_so(hub_dir):
    cfg = {"arch": ARCH, "weights": str(hub_dir / "model.safetensors"), "mean": [0.0, 0.0, 0.0]}
    loaded = load_backbone({**cfg, "crop_pct": 1.0, "interpolation": "bicubic"}, name="mine")
    pre = loaded.preprocessing
    assert pre.mean == (0.0, 0.0, 0.0) and pre.std == STD and pre.crop_pct == 1.0
    assert pre.interpolation == "bicubic"
    assert loaded.sources["mean"] == "the config (backbones.mine.mean)"
    assert loaded.sources["std"].startswith(str(hub_dir / "config.json"))
    assert loaded.sources["crop_mode"].startswith(str(hub_dir / "config.json"))  # save_for_hf writes it
    with pytest.raises(BackboneError, match=r"backbones\.mine\.std: every entry must be > 0"):
        load_backbone({**cfg, "std": [1, 0, 1]}, name="mine")
    with pytest.raises(BackboneError, match=r"backbones\.mine\.mean: expected three numbers"):
        load_backbone({**cfg, "mean": [0.5, 0.5]}, name="mine")


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_config_stored_in_the_checkpoint_file(tmp_path, source, suffix):
    """A bare file (no config.json) carrying its pretrained_cfg: a .pth dict entry or a
    .safetensors metadata entry; a headless state dict (no classifier) loads too."""
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in source.state_dict().items() if not k.startswith("head.")}
    pcfg = {"mean": list(MEAN), "std": list(STD), "input_size": [3, 32, 32], "crop_pct": 1.0}
    path = tmp_path / f"mine{suffix}"
    if suffix == ".pth":
        torch.save({"state_dict": state, "pretrained_cfg": pcfg}, path)
    else:
        save_file(state, str(path), metadata={"pretrained_cfg": json.dumps(pcfg)})
    kw = {k: v for k, v in SMALL.items() if k != "img_size"}  # the size comes from the file's input_size
    loaded = load_backbone({"arch": ARCH, "weights": str(path), "model_kwargs": kw})
    pre = loaded.preprocessing
    assert (pre.mean, pre.std, pre.image_size, pre.crop_pct) == (MEAN, STD, 32, 1.0)
    assert loaded.sources["image_size"].startswith("the model as built (img_size from checkpoint")
    assert loaded.sources["interpolation"].startswith("timm's pretrained config")  # the file has none
    images = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    with torch.inference_mode():
        got = loaded.model(preprocess_batch(images, pre)).numpy()
    assert np.allclose(
        got, _reference(source, images, MEAN, STD, crop_pct=1.0, interpolation="bicubic"), atol=1e-5
    )


def test_a_state_dict_without_config_uses_timms_defaults_and_other_heads(tmp_path):
    """No config anywhere: timm's pretrained config of the arch; a 3-class head in a checkpoint of
    a resnet is dropped (headless use), and a resnet's blocks need not be a ViT's."""
    src = timm.create_model("resnet10t", pretrained=False, num_classes=3).eval()
    path = tmp_path / "r.pth"
    torch.save(src.state_dict(), path)
    loaded = load_backbone({"arch": "resnet10t", "weights": str(path), "image_size": 32}, name="r")
    default = timm.models.get_pretrained_cfg("resnet10t").to_dict()
    assert loaded.preprocessing.mean == tuple(default["mean"]) and loaded.preprocessing.image_size == 32
    assert all(
        "timm's pretrained config of resnet10t" in loaded.sources[k] for k in ("mean", "std", "crop_pct")
    )
    x = torch.randn(2, 3, 32, 32)
    src.reset_classifier(0)
    with torch.inference_mode():
        assert torch.allclose(loaded.model(x), src(x), atol=1e-5)


def test_clear_errors(tmp_path, source):
    missing = tmp_path / "nowhere" / "model.safetensors"
    with pytest.raises(
        BackboneError, match=rf"backbones\.b\.weights: checkpoint file {missing} does not exist"
    ):
        backbone_from_config({"arch": ARCH, "weights": str(missing)}, name="b")
    with pytest.raises(BackboneError, match=r"backbones\.b\.arch: 'vit_tiny_patch16_24' is not a timm model"):
        backbone_from_config({"arch": "vit_tiny_patch16_24", "weights": "random"}, name="b")
    # a state dict of another model: the missing and unexpected keys are listed
    other = tmp_path / "other.pth"
    torch.save(timm.create_model("resnet10t", pretrained=False).state_dict(), other)
    with pytest.raises(BackboneError, match="does not fit") as err:
        backbone_from_config({"arch": ARCH, "weights": str(other), "model_kwargs": SMALL}, name="b")
    msg = str(err.value)
    assert "missing: ['blocks.0" in msg and "unexpected: ['bn1.bias'" in msg and "more" in msg
    # a body tensor of another shape
    state = {k: v.contiguous() for k, v in source.state_dict().items()}
    state["blocks.0.norm1.weight"] = state["blocks.0.norm1.weight"][:10]
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(BackboneError, match=r"1 of another shape, e.g. 'blocks.0.norm1.weight': \(10,\)"):
        backbone_from_config({"arch": ARCH, "weights": str(tmp_path / "bad.pth"), "model_kwargs": SMALL})
    # a config.json with an invalid value names the file and the key
    d = tmp_path / "hub"
    d.mkdir()
    torch.save(source.state_dict(), d / "pytorch_model.bin")
    (d / "config.json").write_text(json.dumps({"pretrained_cfg": {"std": [0.5, 0.5, "x"]}}))
    with pytest.raises(BackboneError, match=r"config\.json: pretrained_cfg\.std: expected a finite number"):
        backbone_from_config({"arch": ARCH, "weights": str(d / "pytorch_model.bin"), "model_kwargs": SMALL})
    (d / "config.json").write_text("{not json")
    with pytest.raises(
        BackboneError, match=r"config\.json \(beside checkpoint pytorch_model\.bin\) is not valid"
    ):
        backbone_from_config({"arch": ARCH, "weights": str(d / "pytorch_model.bin"), "model_kwargs": SMALL})


def test_checkpoint_files_are_the_features_rules_inputs(tmp_path, hub_dir):
    """A local checkpoint and its config.json are inputs of the features rule (a change reruns it)."""
    from dpcl.backbones import PYPI_LITE0, checkpoint_files

    assert checkpoint_files({"arch": ARCH, "weights": str(hub_dir / "model.safetensors")}) == [
        str(hub_dir / "model.safetensors"),
        str(hub_dir / "config.json"),
    ]
    assert checkpoint_files({"arch": ARCH, "weights": str(tmp_path / "m.pth")}) == [str(tmp_path / "m.pth")]
    assert all(
        checkpoint_files({"arch": ARCH, "weights": w}) == []
        for w in ("random", "timm-pretrained", PYPI_LITE0)
    )
