import torch

from torchtpu.models.resnet import ResNet, ResNetConfig


def test_published_sizes_match_torchvision():
    with torch.device("meta"):
        n18 = sum(p.numel() for p in ResNet(ResNetConfig.resnet18()).parameters())
        n50 = sum(p.numel() for p in ResNet(ResNetConfig.resnet50()).parameters())
    assert (n18, n50) == (11_689_512, 25_557_032)  # torchvision's resnet18 / resnet50


def test_imagenet_and_cifar_shapes():
    torch.manual_seed(0)
    assert ResNet(ResNetConfig.resnet18(num_classes=7)).eval()(
        torch.randn(1, 3, 64, 64)).shape == (1, 7)
    assert ResNet(ResNetConfig.tiny()).eval()(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_bottleneck_downsamples():
    cfg = ResNetConfig("bottleneck", (1, 1), num_classes=3, width=8, small_input=True)
    model = ResNet(cfg)
    assert model.layer2[0].downsample is not None and model.fc.in_features == 16 * 4
    assert model(torch.randn(2, 3, 16, 16)).shape == (2, 3)


def test_fits_a_small_batch():
    torch.manual_seed(0)
    model = ResNet(ResNetConfig.tiny(num_classes=4))
    x, y = torch.randn(8, 3, 16, 16), torch.arange(8) % 4
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(15):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5
