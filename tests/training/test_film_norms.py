"""FiLM on every normalisation layer: LayerNorm, GroupNorm and BatchNorm with frozen
running statistics. Per-sample gradients from opacus's hooks (and the registered samplers), and from
the layers' own backward without hooks (their twins), against one backward pass per sample; the twins
compute each layer's values and input gradient; a BatchNorm that would use batch statistics is
refused; members of a BatchNorm backbone (EfficientNet-Lite0) save, load and swap; the shared
backbone is left without hooks or opacus attributes.

The per-sample reference runs in float64: in float32 a batched and a single-sample forward of a
ReLU6 network differ by ~1e-6, enough to flip a few activations at the clamp boundaries and move
a reference gradient by ~0.1 %, which would hide a real error of that size. In float64 both
sides agree to ~1e-13, so the tolerance below (1e-9 relative) is float64 rounding with margin.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from dpcl.backbones import Preprocessing
from dpcl.seeding import rng
from dpcl.training.clipped_sum import CLIP_MARGIN
from dpcl.training.film import clipped_grad_sum, train_film
from dpcl.training.film_inference import film_logits
from dpcl.training.film_member import FilmMember, film_net, pretrained_member
from dpcl.training.film_model import (
    FrozenBatchNorm,
    check_per_sample,
    film_parameter_count,
    film_parameter_names,
    freeze_batchnorm,
    private_training,
)
from dpcl.training.film_per_sample import HookFreePerSample, _Twin, film_grad_sample_module
from dpcl.training.heads import DPSGDConfig

timm = pytest.importorskip("timm")
layers = pytest.importorskip("timm.layers")

SIZE = 32
PRE = Preprocessing(image_size=SIZE, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), channels_last=False)
RTOL, ATOL = 1e-9, 1e-11  # float64 rounding of sums over ~10^4 terms, with margin


def _randomise_batchnorm_stats(model: nn.Module, seed: int) -> None:
    """Non-trivial running statistics and affine values (a fresh BatchNorm has mean 0, var 1)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.2)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 1.5 + 0.5)
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)


def _nontrivial_affine(model: nn.Module) -> None:
    """Non-trivial affine values for the norms torch initialises to 1, 0 (GroupNorm, LayerNorm)."""
    for m in model.modules():
        if isinstance(m, nn.GroupNorm | nn.LayerNorm):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.normal_(m.bias, 0.0, 0.1)


def _random_timm(arch: str, seed: int) -> nn.Module:
    """A random-weight timm backbone with non-trivial BatchNorm statistics, eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = timm.create_model(arch, pretrained=False, num_classes=0)
    _randomise_batchnorm_stats(model, seed)
    return model.eval()


def lite0(seed: int = 0) -> nn.Module:
    """EfficientNet-Lite0 (the embedded backbone's architecture)."""
    return _random_timm("tf_efficientnet_lite0", seed)


def resnet(seed: int = 0) -> nn.Module:
    """ResNet-18: BatchNorms whose outputs get the shortcut added in place."""
    return _random_timm("resnet18", seed)


class MixedNorms(nn.Module):
    """Every kind of normalisation layer FiLM trains: GroupNorm, timm's GroupNormAct, timm's
    BatchNormAct2d with SiLU (no twin: opacus's hooks and the frozen BatchNorm's sampler; ``act``
    another activation), BatchNorm1d, LayerNorm."""

    num_features = 16

    def __init__(self, seed: int = 0, act: type[nn.Module] = nn.SiLU) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1),
                nn.GroupNorm(2, 8),
                nn.ReLU(),
                nn.Conv2d(8, 8, 3, stride=2, padding=1),
                layers.BatchNormAct2d(8, act_layer=act),
                nn.Conv2d(8, 8, 3, stride=2, padding=1),
                layers.GroupNormAct(8, num_groups=4, act_layer=nn.ReLU6),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(8, 16),
                nn.BatchNorm1d(16),
                nn.LayerNorm(16),
            )
            _nontrivial_affine(self)
        _randomise_batchnorm_stats(self, seed)
        self.eval()

    def forward(self, x):
        return self.features(x)


class TimmNorms(nn.Module):
    """Every timm norm class with a sampler of :mod:`dpcl.training.norm_samplers`: LayerNorm2d, GroupNorm,
    GroupNorm1, GroupNorm1Act (GELU, which no twin computes: opacus's hooks; ``act`` another activation),
    LayerNormAct2d (ReLU), BatchNormAct2d with ReLU, LayerNorm over tokens and LayerNormAct (Hardtanh)."""

    num_features = 8

    def __init__(self, seed: int = 0, act: type[nn.Module] = nn.GELU) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.conv = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1),
                layers.LayerNorm2d(8),
                nn.Conv2d(8, 8, 3, stride=2, padding=1),
                layers.GroupNorm(8, num_groups=4),
                nn.ReLU(inplace=True),  # after a hooked layer: FiLM DP-SGD runs it out of place
                nn.Conv2d(8, 8, 3, stride=2, padding=1),
                layers.GroupNorm1(8),
                nn.Conv2d(8, 8, 3, padding=1),
                layers.GroupNorm1Act(8, act_layer=act),
                nn.Conv2d(8, 8, 3, padding=1),
                layers.LayerNormAct2d(8, act_layer=nn.ReLU),
                nn.Conv2d(8, 8, 3, padding=1),
                layers.BatchNormAct2d(8, act_layer=nn.ReLU),
            )
            self.tokens = nn.Sequential(
                layers.LayerNorm(8), nn.Linear(8, 8), layers.LayerNormAct(8, act_layer=nn.Hardtanh)
            )
            _nontrivial_affine(self)
        _randomise_batchnorm_stats(self, seed)
        self.eval()

    def forward(self, x):
        t = self.conv(x).flatten(2).transpose(1, 2)  # (B, positions, channels): tokens
        return self.tokens(t).mean(dim=1)


def images(n: int, seed: int) -> np.ndarray:
    return rng(seed, "film-norms-images").integers(0, 256, (n, SIZE, SIZE, 3)).astype(np.uint8)


def x64(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, 3, SIZE, SIZE), generator=g, dtype=torch.float64)


def random_head(backbone, n_out: int, seed: int) -> FilmMember:
    """Pre-trained FiLM values with a random head (zero head: zero FiLM gradients)."""
    m = pretrained_member(backbone, n_out)
    g = torch.Generator().manual_seed(seed)
    return FilmMember(
        m.film, torch.randn(m.weight.shape, generator=g) * 0.1, torch.randn(m.bias.shape, generator=g)
    )


def hook_free(model: nn.Module) -> bool:
    """No module hooks and no opacus attribute left anywhere in ``model``."""
    for m in model.modules():
        if m._forward_hooks or m._backward_hooks or m._forward_pre_hooks:
            return False
        if hasattr(m, "autograd_grad_sample_hooks") or hasattr(m, "ft_compute_sample_grad"):
            return False
    attrs = ("grad_sample", "_forward_counter", "_current_grad_sample", "_norm_sample")
    return not any(hasattr(p, a) for p in model.parameters() for a in attrs)


# ----------------------------------------------------------------------------- parameter selection


def test_effnet_lite0_film_parameters_are_its_49_batchnorms_42016_values():
    """EfficientNet-Lite0: 49 BatchNorm(Act2d)s, their weight and bias: 42,016 FiLM parameters, the
    same names before and after freezing (members fit both)."""
    with torch.device("meta"):
        model = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=0)
    names = film_parameter_names(model)
    bns = [n for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert len(bns) == 49 and names == [f"{b}.{p}" for b in bns for p in ("weight", "bias")]
    assert film_parameter_count(model) == 42_016
    assert freeze_batchnorm(model) == 49 and freeze_batchnorm(model) == 0  # idempotent
    assert film_parameter_names(model) == names and film_parameter_count(model) == 42_016
    assert sum(isinstance(m, FrozenBatchNorm) for m in model.modules()) == 49
    acts = [type(m.act).__name__ for m in model.modules() if isinstance(m, FrozenBatchNorm)]
    assert acts.count("ReLU6") == 33 and acts.count("Identity") == 16  # BatchNormAct2d's activations kept


def test_mixed_norms_film_selection():
    net = MixedNorms()
    norms = [m for m in net.modules() if isinstance(m, nn.GroupNorm | nn.LayerNorm | nn.BatchNorm1d)]
    norms += [m for m in net.modules() if isinstance(m, layers.BatchNormAct2d)]
    assert film_parameter_count(net) == 2 * sum(m.weight.numel() for m in norms) == 2 * (8 + 8 + 8 + 16 + 16)


def test_frozen_batchnorm_is_eval_batchnorm_in_every_mode_and_mixes_no_samples():
    model = lite0()
    x = torch.randn(3, 3, SIZE, SIZE)
    with torch.no_grad():
        ref = model(x)
        freeze_batchnorm(model)
        model.train()
        out = model(x)
        single = torch.cat([model(x[i : i + 1]) for i in range(len(x))])
    assert torch.equal(out, ref)  # the same F.batch_norm call as eval mode: bit for bit
    torch.testing.assert_close(single, out, rtol=1e-5, atol=1e-5)  # float32 batched vs single
    stats = {n: b.clone() for n, b in model.named_buffers()}
    with torch.no_grad():
        model(x * 3.0 + 1.0)  # training mode: a BatchNorm would update its running statistics
    assert all(torch.equal(b, stats[n]) for n, b in model.named_buffers())


# ----------------------------------------------------------------------------- per-sample gradients


BACKBONES = {
    "lite0": lite0,
    "resnet": resnet,
    "mixed": MixedNorms,
    "mixed-twins": lambda: MixedNorms(act=nn.ReLU),
    "timm": TimmNorms,
    "timm-twins": lambda: TimmNorms(act=nn.ReLU6),
}
HOOK_FREE = {"lite0", "resnet", "mixed-twins", "timm-twins"}  # every FiLM layer has a twin


@pytest.mark.parametrize("arch", list(BACKBONES))
def test_per_sample_clipping_matches_one_backward_per_sample(arch):
    """The layers' own backward without hooks (every FiLM layer a twin: Lite0; a ResNet, whose shortcut is
    added to a norm's output in place; torch's and timm's GroupNorm and LayerNorm classes) or opacus's hooks
    (a SiLU or GELU after a norm: the frozen-BatchNorm and timm norm samplers, opacus's GroupNorm /
    LayerNorm samplers) + the head's closed form vs plain autograd one sample at a time, float64."""
    backbone = BACKBONES[arch]()
    freeze_batchnorm(backbone)
    backbone.double()
    x = x64(5, seed=1)
    y = torch.tensor([0, 1, 2, 1, 0])
    member = random_head(backbone, 3, seed=2)
    with film_net(backbone, member, device="cpu", trainable=True) as net:
        net.head.double()
        net.train()
        params = [p for p in net.parameters() if p.requires_grad]
        assert len(params) == len(film_parameter_names(backbone)) + 2
        manual = []
        for i in range(len(y)):
            loss = nn.functional.cross_entropy(net(x[i : i + 1]), y[i : i + 1], reduction="sum")
            manual.append(torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)]))
        manual = torch.stack(manual)
        ref_norms = manual.norm(dim=1)
        clip = float(ref_norms.median())  # clips about half the samples
        with private_training(net.backbone):
            gsm = film_grad_sample_module(net.backbone)
        try:
            with private_training(net.backbone):
                sums, norms = clipped_grad_sum(gsm, net.head, params, x, y, clip=clip)
            assert isinstance(gsm, HookFreePerSample) == (arch in HOOK_FREE)
            modules = list(gsm.modules()) if arch not in HOOK_FREE else []
            functorch = [type(m).__name__ for m in modules if hasattr(m, "ft_compute_sample_grad")]
        finally:
            gsm.cleanup()
    assert int((ref_norms > clip).sum()) >= 1 and int((ref_norms < clip).sum()) >= 1
    film_dims = sum(p.numel() for p in params[:-2])
    assert float(manual[:, :film_dims].abs().max()) > 1e-3  # FiLM gradients are not trivially zero
    assert not functorch  # every norm layer has its own sampler: none falls back to functorch
    torch.testing.assert_close(norms, ref_norms, rtol=RTOL, atol=ATOL)
    factors = torch.clamp(clip * CLIP_MARGIN / ref_norms, max=1.0)  # clipped with the float32 margin
    got = torch.cat([s.flatten() for s in sums])
    torch.testing.assert_close(got, (manual * factors[:, None]).sum(dim=0), rtol=RTOL, atol=ATOL)
    assert hook_free(backbone)
    assert all(not isinstance(m, _Twin) for m in backbone.modules())  # the layers are back


def _frozen(act: type[nn.Module] | None) -> FrozenBatchNorm:
    bn = layers.BatchNormAct2d(8, act_layer=act) if act else nn.BatchNorm2d(8)
    _randomise_batchnorm_stats(bn, seed=0)
    return FrozenBatchNorm(bn)


TWINNED = {  # (layer, input shape): every class with a twin, each activation kind, 2-d to 4-d inputs
    "frozen": (lambda: _frozen(None), (6, 8, 9, 7)),
    "frozen-relu6": (lambda: _frozen(nn.ReLU6), (6, 8, 9, 7)),
    "frozen-relu-1d": (lambda: FrozenBatchNorm(nn.BatchNorm1d(8)), (6, 8)),
    "groupnorm": (lambda: nn.GroupNorm(2, 8), (6, 8, 9, 7)),
    "groupnorm-2d": (lambda: nn.GroupNorm(4, 8), (6, 8)),
    "timm-groupnormact-relu": (lambda: layers.GroupNormAct(8, num_groups=4, act_layer=nn.ReLU), (6, 8, 9, 7)),
    "timm-groupnorm1": (lambda: layers.GroupNorm1(8), (6, 8, 3, 3)),
    "layernorm": (lambda: nn.LayerNorm(8), (6, 5, 8)),
    "layernorm-2dims": (lambda: nn.LayerNorm((4, 8)), (6, 3, 4, 8)),
    "timm-layernorm": (lambda: layers.LayerNorm(8), (6, 17, 8)),
    "timm-layernormact-hardtanh": (lambda: layers.LayerNormAct(8, act_layer=nn.Hardtanh), (6, 17, 8)),
    "timm-layernorm2d": (lambda: layers.LayerNorm2d(8), (6, 8, 5, 4)),
    "timm-layernormact2d-relu": (lambda: layers.LayerNormAct2d(8, act_layer=nn.ReLU), (6, 8, 5, 4)),
}


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("name", list(TWINNED))
def test_twins_compute_each_layers_values_and_input_gradient(name, channels_last):
    """In float32, a twin's output is the layer's own, bit for bit (torch's normalisation kernels), in the
    same memory layout; so is the input's gradient, except the frozen BatchNorm's (one product instead of
    ATen's BatchNorm backward: each element within two roundings of it)."""
    make, shape = TWINNED[name]
    if channels_last and len(shape) != 4:
        pytest.skip("channels-last needs a 4-d input")
    g = torch.Generator().manual_seed(0)
    layer = make()
    if not isinstance(layer, FrozenBatchNorm):
        with torch.no_grad():
            layer.weight.copy_(torch.rand(layer.weight.shape, generator=g) + 0.5)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=g) * 0.1)
    layer.train()
    x = torch.randn(shape, generator=g) * 2 + 0.5
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    up = torch.randn(shape, generator=g)
    want = layer(x)
    (want_gx,) = torch.autograd.grad(want, x, up)
    twin = _Twin(layer)
    twin.train()
    got = twin(x)
    (got_gx,) = torch.autograd.grad(got, x, up)
    assert torch.equal(got, want) and got.stride() == want.stride()
    if isinstance(layer, FrozenBatchNorm):
        torch.testing.assert_close(got_gx, want_gx, rtol=2**-22, atol=0.0)
    else:
        assert torch.equal(got_gx, want_gx)
    assert all(getattr(p, "grad_sample", None) is not None for p in layer.parameters())  # set by the twin


def test_frozen_batchnorm_twin_in_float32_is_within_the_summation_bound_of_its_cancellation():
    """The twin's per-sample ∂L/∂γ of a frozen BatchNorm is ρ·(Σ g·x − μ·Σ g) in float32: against float64
    it errs by at most the rounding of those sums, (positions + 2)·2⁻²⁴·ρ·Σ|g|·(|x| + |μ|) per sample and
    channel (the recursive-summation bound), even with a running mean 50 standard deviations away."""
    bn = nn.BatchNorm2d(4)
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([50.0, -50.0, 0.5, 0.0]))
        bn.running_var.copy_(torch.tensor([1.0, 1.0, 0.25, 4.0]))
        bn.weight.fill_(1.0)
    layer = FrozenBatchNorm(bn).train()
    g = torch.Generator().manual_seed(1)
    x64_ = (
        torch.randn((5, 4, 16, 16), generator=g, dtype=torch.float64)
        + bn.running_mean.double()[:, None, None]
    )
    up64 = torch.randn((5, 4, 16, 16), generator=g, dtype=torch.float64)
    got = {}
    for dtype in (torch.float32, torch.float64):
        twin = _Twin(layer.to(dtype)).train()
        twin(x64_.to(dtype)).backward(up64.to(dtype))
        got[dtype] = layer.weight.grad_sample.double()
        del layer.weight.grad_sample, layer.bias.grad_sample
    rho = torch.rsqrt(bn.running_var.double() + bn.eps)
    bound = (
        (16 * 16 + 2)
        * 2**-24
        * rho
        * (up64.abs() * (x64_.abs() + bn.running_mean.double().abs()[:, None, None])).sum(dim=(2, 3))
    )
    err = (got[torch.float32] - got[torch.float64]).abs()
    assert bool((err <= bound).all())
    assert float((err / got[torch.float64].abs()).max()) > 1e-6  # the cancellation does cost bits here


def test_hook_free_applies_only_where_every_film_layer_has_a_twin():
    """A frozen BatchNorm with SiLU, a GroupNorm with GELU, a norm class without a rule (a subclass), or a
    GroupNorm or LayerNorm under autocast (bf16): opacus's hooks instead."""
    from opacus import GradSampleModule

    def film_only(model: nn.Module) -> nn.Module:  # as film_net leaves it: only the FiLM parameters train
        freeze_batchnorm(model)
        names = set(film_parameter_names(model))
        for name, p in model.named_parameters():
            p.requires_grad_(name in names)
        return model

    assert HookFreePerSample.applies(film_only(lite0()))
    assert HookFreePerSample.applies(film_only(lite0()), precision="bf16")  # F.batch_norm: autocast's own
    assert not HookFreePerSample.applies(lite0())  # its convolutions train too: not FiLM
    silu = film_only(nn.Sequential(nn.Conv2d(3, 8, 3), layers.BatchNormAct2d(8, act_layer=nn.SiLU)))
    assert not HookFreePerSample.applies(silu)
    assert not HookFreePerSample.applies(film_only(MixedNorms()))
    assert not HookFreePerSample.applies(film_only(TimmNorms()))  # GELU
    twins = film_only(TimmNorms(act=nn.ReLU6))
    assert HookFreePerSample.applies(twins)
    assert "under autocast" in HookFreePerSample.refusal(twins, precision="bf16")

    class MyGroupNorm(nn.GroupNorm):
        pass

    mine = film_only(nn.Sequential(nn.Conv2d(3, 8, 3), MyGroupNorm(2, 8)))
    assert HookFreePerSample.refusal(mine) == "1: MyGroupNorm has no hook-free rule"
    with pytest.raises(ValueError, match="MyGroupNorm has no hook-free rule"):
        HookFreePerSample(mine)
    for model in (silu, mine):
        gsm = film_grad_sample_module(model)
        try:
            assert isinstance(gsm, GradSampleModule)
        finally:
            gsm.cleanup()


# ----------------------------------------------------------------------------- refusals


def test_batchnorm_with_batch_statistics_is_refused():
    """A BatchNorm left as is trains with the batch's statistics (training mode): every sample's
    output depends on the others, so no per-sample gradient exists. Refused, with the fix named."""
    from opacus.validators import ModuleValidator

    backbone = MixedNorms()
    with torch.no_grad():  # training mode really mixes: the batch's statistics differ from the running ones
        assert (
            float((backbone.train()(x64(4, 0).float()) - backbone.eval()(x64(4, 0).float())).abs().max()) > 0
        )
    # opacus's ModuleValidator checks exact types: it flags the BatchNorm1d but misses timm's
    # BatchNormAct2d (a BatchNorm2d subclass, all 49 of EfficientNet-Lite0's); check_per_sample sees both
    assert len(ModuleValidator.validate(backbone.train(), strict=False)) == 1
    cfg = DPSGDConfig(sample_rate=0.5, epochs=1.0)
    x, y = images(4, seed=0), np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"batch's statistics.*freeze_batchnorm"):
        train_film(backbone, x, y, 2, cfg, noise_multiplier=1.0, rng=rng(0), pre=PRE, device="cpu")
    with pytest.raises(ValueError, match="BatchNormAct2d"):
        check_per_sample(backbone)
    with pytest.raises(ValueError, match="batch's statistics"):
        film_grad_sample_module(backbone)
    freeze_batchnorm(backbone)
    check_per_sample(backbone)  # frozen: accepted, by opacus's validator too
    assert ModuleValidator.validate(backbone.train(), strict=False) == []
    backbone.features.append(nn.BatchNorm1d(16))  # one more, unfrozen: refused again
    with pytest.raises(ValueError, match=r"features\.12 \(BatchNorm1d\)"):
        check_per_sample(backbone)
    with pytest.raises(ValueError, match="track_running_stats"):
        freeze_batchnorm(nn.Sequential(nn.BatchNorm2d(3, track_running_stats=False)))
    with pytest.raises(ValueError, match="drop"):
        freeze_batchnorm(nn.Sequential(layers.BatchNormAct2d(3, drop_layer=nn.Dropout)))


# ----------------------------------------------------------------------------- members on Lite0


def test_lite0_member_trains_saves_loads_and_swaps_leaving_backbone_clean(tmp_path):
    backbone = lite0()
    freeze_batchnorm(backbone)
    params0 = {n: p.detach().clone() for n, p in backbone.named_parameters()}
    flags0 = {n: p.requires_grad for n, p in backbone.named_parameters()}
    x, y = images(8, seed=3), np.array([0, 1, 2, 0, 1, 2, 0, 1])
    cfg = DPSGDConfig(sample_rate=0.5, epochs=2.0, lr=0.01, clip=1.0, normaliser=4.0)
    member, info = train_film(
        backbone, x, y, 3, cfg, noise_multiplier=1.0, rng=rng(5), pre=PRE, physical_batch=3, device="cpu"
    )
    assert info["trainable_parameters"] == 42_016 + 1280 * 3 + 3 == member.n_parameters()
    start = pretrained_member(backbone, 3)
    assert set(member.film) == set(start.film) and not all(
        torch.equal(member.film[k], start.film[k]) for k in start.film
    )  # the BatchNorm scales and shifts moved
    assert all(torch.equal(p, params0[n]) for n, p in backbone.named_parameters())  # restored
    assert {n: p.requires_grad for n, p in backbone.named_parameters()} == flags0
    assert hook_free(backbone)
    np.savez(tmp_path / "m.npz", **member.to_arrays())
    with np.load(tmp_path / "m.npz") as f:
        loaded = FilmMember.from_arrays(dict(f))
    a = film_logits(backbone, member, x, PRE, device="cpu")
    b = film_logits(backbone, loaded, x, PRE, device="cpu")
    assert np.array_equal(a, b) and not np.allclose(a, film_logits(backbone, start, x, PRE, device="cpu"))
    # a member of the frozen backbone fits the original (unfrozen) one too: same names, same eval outputs
    raw = lite0()
    np.testing.assert_allclose(film_logits(raw, loaded, x, PRE, device="cpu"), a, rtol=1e-5, atol=1e-5)
    # seeded, repeatable: the same Poisson samples and the same noise draws. The parameters agree to
    # float32 rounding, not bit for bit: MKL and oneDNN may sum in another order on a second call
    # (buffer alignment), and CI once saw that. A different draw of the noise (std 1 against a
    # normaliser of 4) moves each coordinate by O(lr) = 1e-2 per Adam step; rounding moves it by
    # ~1e-7 relative, so 1e-4 (lr / 100) separates the two with room on both sides.
    again, info_again = train_film(
        backbone, x, y, 3, cfg, noise_multiplier=1.0, rng=rng(5), pre=PRE, physical_batch=3, device="cpu"
    )
    assert info_again["mean_batch_size"] == info["mean_batch_size"]
    moved = max(float((member.film[k] - start.film[k]).abs().max()) for k in start.film)
    assert moved > 1e-3  # training moved some scale or shift by far more than the tolerance below
    for k in member.film:
        torch.testing.assert_close(again.film[k], member.film[k], rtol=0.0, atol=1e-4)
    assert math.isfinite(info["noise_multiplier"])


def test_an_inplace_activation_after_a_hooked_norm_trains_and_is_restored():
    """A GroupNorm followed by ``ReLU(inplace=True)`` (ResNet-50-GN's pattern): opacus's hooks hand the
    norm's output on as a view that autograd forbids modifying in place; FiLM DP-SGD runs the activation
    out of place and restores the flag, leaving the backbone as it was."""
    backbone = TimmNorms()
    freeze_batchnorm(backbone)
    relu = next(m for m in backbone.modules() if type(m) is nn.ReLU)
    assert relu.inplace
    cfg = DPSGDConfig(sample_rate=1.0, epochs=1.0, clip=1.0)
    member, _ = train_film(
        backbone,
        images(4, seed=3),
        np.array([0, 1, 2, 1]),
        3,
        cfg,
        noise_multiplier=1.0,
        rng=np.random.default_rng(0),
        pre=PRE,
        device="cpu",
    )
    assert relu.inplace and hook_free(backbone)
    assert all(torch.isfinite(v).all() for v in member.film.values())


class SubclassedGroupNorm(nn.GroupNorm):
    """A user's norm class: no twin (a subclass may compute something else), opacus's hooks."""


class ShortcutAddedInPlace(nn.Module):
    """A residual block as timm's ResNets write it: the shortcut added to the norm's output in place."""

    num_features = 8

    def __init__(self, norm: type[nn.GroupNorm] = nn.GroupNorm) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = norm(2, 8)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        shortcut = self.conv(x)
        y = self.norm(shortcut)
        y += shortcut
        return self.pool(y).flatten(1)


def test_a_norm_output_modified_in_place_trains_without_hooks_and_is_refused_by_name_with_them():
    """A twin keeps no output of a norm without activation, so the in-place add is allowed; opacus's hooks
    hand the output on as a view that autograd forbids modifying in place: refused, with the cause named."""
    cfg = DPSGDConfig(sample_rate=1.0, epochs=1.0, clip=1.0)
    train = dict(noise_multiplier=1.0, rng=np.random.default_rng(0), pre=PRE, device="cpu")
    x, y = images(4, seed=3), np.array([0, 1, 2, 1])
    member, _ = train_film(ShortcutAddedInPlace().eval(), x, y, 3, cfg, **train)
    assert all(torch.isfinite(v).all() for v in member.film.values())
    cause = (
        r"modifies a normalisation layer's output in place.*norm: SubclassedGroupNorm has no hook-free rule"
    )
    with pytest.raises(RuntimeError, match=cause):
        train_film(ShortcutAddedInPlace(SubclassedGroupNorm).eval(), x, y, 3, cfg, **train)
