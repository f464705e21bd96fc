"""ResNet-18 / 34 / 50 / 101 (He et al. 2015), torchvision's layout and parameter names.

BasicBlock (two 3x3 convs) for 18/34, Bottleneck (1x1, 3x3, 1x1; stride on the 3x3, the
"v1.5" variant torchvision uses) for 50/101. BatchNorm throughout, so the batch statistics
and running-stat updates of a backend get exercised too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ResNetConfig:
    block: str = "basic"  # "basic" or "bottleneck"
    layers: tuple[int, ...] = (2, 2, 2, 2)
    num_classes: int = 1000
    width: int = 64  # channels of the stem and first stage; doubles per stage
    in_channels: int = 3
    small_input: bool = False  # 3x3 stem without max-pool, for 32x32 images (CIFAR)

    @classmethod
    def tiny(cls, num_classes: int = 10) -> ResNetConfig:
        return cls("basic", (1, 1, 1, 1), num_classes, width=8, small_input=True)

    @classmethod
    def resnet18(cls, num_classes: int = 1000) -> ResNetConfig:
        return cls("basic", (2, 2, 2, 2), num_classes)

    @classmethod
    def resnet34(cls, num_classes: int = 1000) -> ResNetConfig:
        return cls("basic", (3, 4, 6, 3), num_classes)

    @classmethod
    def resnet50(cls, num_classes: int = 1000) -> ResNetConfig:
        return cls("bottleneck", (3, 4, 6, 3), num_classes)

    @classmethod
    def resnet101(cls, num_classes: int = 1000) -> ResNetConfig:
        return cls("bottleneck", (3, 4, 23, 3), num_classes)


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
    return nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, width, 3, stride)
        self.conv2, self.bn2 = _conv_bn(width, width, 3)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, width, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, width, 1)
        self.conv2, self.bn2 = _conv_bn(width, width, 3, stride)
        self.conv3, self.bn3 = _conv_bn(width, width * 4, 1)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(cin, width * 4, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(*_conv_bn(cin, cout, 1, stride))


class ResNet(nn.Module):
    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        self.config = cfg
        block = {"basic": BasicBlock, "bottleneck": Bottleneck}[cfg.block]
        w = cfg.width
        if cfg.small_input:
            self.conv1, self.bn1 = _conv_bn(cfg.in_channels, w, 3)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(cfg.in_channels, w, 7, 2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(w)
            self.maxpool = nn.MaxPool2d(3, 2, padding=1)
        self.relu = nn.ReLU(inplace=True)
        cin = w
        for i, n in enumerate(cfg.layers):
            stage = []
            for j in range(n):
                stage.append(block(cin, w * 2**i, stride=2 if i > 0 and j == 0 else 1))
                cin = w * 2**i * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*stage))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, cfg.num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # Zero the last BN of each residual branch so every block starts as the identity
        # (Goyal et al. 2017); training is markedly more stable at small batch sizes.
        for m in self.modules():
            if isinstance(m, (BasicBlock, Bottleneck)):
                nn.init.zeros_(m.bn2.weight if isinstance(m, BasicBlock) else m.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, H, W) -> class logits (B, num_classes)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(len(self.config.layers)):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))
