"""vit-pytorch's vision transformers on "tpu" train as on CPU: ViT, SimpleViT (plain, FFT
patches, qk-norm, register tokens, value residual, relative position bias), CaiT, DeepViT,
CCT, CvT, LeViT, T2T, PiT, Twins-SVT, MaxViT, RegionViT, NesT, RvT, ScalableViT, parallel
ViT, LookViT, nViT, XCiT and ATS-ViT.

vit_pytorch's ``__init__`` imports its DINO module, which imports torchvision (not installed
here, and not to be: it pins its own torch). The model modules themselves need only torch and
einops, so they are loaded as submodules of an empty ``vit_pytorch`` package. ATS-ViT samples
tokens with Gumbel noise from the device's generator; its test replaces the noise by a fixed
ramp."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import pytest
import torch
from model_zoo_checks import check_training

_spec = importlib.util.find_spec("vit_pytorch")
if _spec is None:
    pytest.skip("vit_pytorch is not installed", allow_module_level=True)


@pytest.fixture
def vit_module(monkeypatch):
    """``vit_pytorch.<name>`` without running the package's ``__init__``."""
    if "vit_pytorch" not in sys.modules or not hasattr(sys.modules["vit_pytorch"], "ViT"):
        package = types.ModuleType("vit_pytorch")
        package.__path__ = list(_spec.submodule_search_locations)
        monkeypatch.setitem(sys.modules, "vit_pytorch", package)
    return lambda name: importlib.import_module(f"vit_pytorch.{name}")


_g = torch.Generator().manual_seed(0)
IMAGES, LABELS = torch.randn(2, 3, 32, 32, generator=_g), torch.tensor([1, 3])
BASE = dict(image_size=32, patch_size=8, num_classes=5, dim=32, depth=2, heads=4, mlp_dim=64)


def _loss(model, device):
    logits = model(IMAGES.to(device))
    return torch.nn.functional.cross_entropy(logits, LABELS.to(device))


MODELS = {
    "vit.ViT": BASE,
    "simple_vit.SimpleViT": BASE,
    "simple_vit_with_fft.SimpleViT": dict(BASE, freq_patch_size=8),
    "simple_vit_with_qk_norm.SimpleViT": BASE,
    "simple_vit_with_register_tokens.SimpleViT": dict(BASE, num_register_tokens=2),
    "simple_vit_with_value_residual.SimpleViT": BASE,
    "simple_vit_with_relative_proj_pos_bias.SimpleViT": BASE,
    "cait.CaiT": dict(BASE, cls_depth=1, layer_dropout=0.0),
    "deepvit.DeepViT": BASE,
    "cct.CCT": dict(img_size=32, embedding_dim=32, n_conv_layers=2, kernel_size=3, stride=1,
                    padding=1, pooling_kernel_size=3, pooling_stride=2, pooling_padding=1,
                    num_layers=2, num_heads=4, mlp_ratio=2.0, num_classes=5,
                    positional_embedding="learnable", attention_dropout=0.0,
                    stochastic_depth_rate=0.0),
    "cvt.CvT": dict(num_classes=5, s1_emb_dim=16, s1_depth=1, s1_heads=1, s2_emb_dim=32,
                    s2_depth=1, s2_heads=2, s3_emb_dim=32, s3_depth=1, s3_heads=2),
    "levit.LeViT": dict(image_size=32, num_classes=5, stages=3, dim=(16, 32, 32), depth=1,
                        heads=(2, 2, 2), mlp_mult=2),
    "t2t.T2TViT": dict(dim=32, image_size=32, depth=2, heads=4, mlp_dim=64, num_classes=5,
                       t2t_layers=((7, 4), (3, 2), (3, 2))),
    "pit.PiT": dict(image_size=32, patch_size=4, dim=32, num_classes=5, depth=(1, 1), heads=4,
                    mlp_dim=64),
    "max_vit.MaxViT": dict(num_classes=5, dim_conv_stem=16, dim=16, dim_head=8, depth=(1, 1),
                           window_size=4, mbconv_expansion_rate=2, mbconv_shrinkage_rate=0.25,
                           dropout=0.0),
    "regionvit.RegionViT": dict(dim=(16, 32, 32, 32), depth=(1, 1, 1, 1), window_size=2,
                                num_classes=5, tokenize_local_3_conv=False, use_peg=True),
    "nest.NesT": dict(image_size=32, patch_size=4, dim=16, heads=2, num_hierarchies=2,
                      block_repeats=(1, 1), num_classes=5),
    "rvt.RvT": dict(BASE, use_rotary=True, use_glu=True),
    "parallel_vit.ViT": dict(BASE, num_parallel_branches=2),
    "look_vit.LookViT": dict(image_size=32, num_classes=5, dim=32, depth=1, heads=2,
                             patch_size=8, highres_patch_size=4, mlp_factor=2, dropout=0.0),
    "normalized_vit.nViT": BASE,
    "xcit.XCiT": dict(BASE, cls_depth=1, layer_dropout=0.0, local_patch_kernel_size=3),
    "ats_vit.ViT": dict(BASE, max_tokens_per_depth=(10, 6)),
}


@pytest.mark.slow
def test_vit_trains_as_on_cpu(vit_module):
    check_training(lambda: vit_module("vit").ViT(**BASE), _loss)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_models_train_as_on_cpu(name, vit_module, monkeypatch):
    module_name, cls = name.rsplit(".", 1)
    module = vit_module(module_name)
    if module_name == "ats_vit":
        monkeypatch.setattr(module, "sample_gumbel", lambda shape, device, dtype, eps=1e-6:
                            torch.linspace(0, 1, shape[-1], device=device,
                                           dtype=dtype).expand(shape))
    check_training(lambda: getattr(module, cls)(**MODELS[name]), _loss)
