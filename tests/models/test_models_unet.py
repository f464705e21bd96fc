import torch

from torchtpu.models.unet import AttnBlock, UNet, UNetConfig, timestep_embedding


def test_ddpm_cifar10_size():
    with torch.device("meta"):
        n = sum(p.numel() for p in UNet(UNetConfig.ddpm_cifar10()).parameters())
    assert round(n / 1e6, 1) == 35.7  # the DDPM paper's CIFAR-10 model


def test_shapes_and_attention_only_at_low_resolution():
    cfg = UNetConfig.tiny(image_size=16)
    model = UNet(cfg)
    # 16x16 input, attention at 8x8: one block down, two up, one in the middle.
    assert sum(isinstance(m, AttnBlock) for m in model.modules()) == 4
    x = torch.randn(2, 3, 16, 16)
    assert model(x, torch.tensor([0, 999])).shape == x.shape


def test_timestep_changes_output():
    torch.manual_seed(0)
    model = UNet(UNetConfig.tiny()).eval()
    torch.nn.init.normal_(model.conv_out.weight, std=0.1)  # zero-initialised by design
    x = torch.randn(1, 3, 16, 16)
    assert not torch.allclose(model(x, torch.tensor([1])), model(x, torch.tensor([500])))


def test_timestep_embedding():
    e = timestep_embedding(torch.tensor([0, 10]), 8)
    assert e.shape == (2, 8)
    torch.testing.assert_close(e[0], torch.tensor([0.0] * 4 + [1.0] * 4))
