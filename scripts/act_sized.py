"""A policy with ACT's shape and cost, in plain torch: what "does the loader keep up with a
real policy" is measured against (``scripts/train.py --policy act``).

LeRobot's ACT (lerobot 0.6.1 defaults): a ResNet-18 backbone on every camera image at full
resolution, its last feature map (stride 32) projected to 512 channels as tokens with learned
2D positions, a state token, a 4-layer transformer encoder (8 heads, feed-forward 3,200), a
1-layer decoder with one query per action step, a linear head. Left out: ACT's VAE branch
(off at inference, a small share of training compute) and ImageNet weights (nothing to
download). Only the shape and the arithmetic matter here, not the policy's quality.
"""

from __future__ import annotations

import torch
from torch import nn


class _Block(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with a shortcut."""

    def __init__(self, channels_in: int, channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Identity()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18Features(nn.Module):
    """ResNet-18 up to its last feature map (512 channels, stride 32)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, channels = [], 64
        for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [_Block(channels, width, stride), _Block(width, width, 1)]
            channels = width
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(self.stem(x))


class ActSizedPolicy(nn.Module):
    """Cameras + state -> an action chunk of ``horizon`` steps (see the module docstring).

    ``height`` and ``width``: the cameras' frame size, for the learned token positions.
    """

    def __init__(
        self,
        state_dim: int,
        num_cameras: int,
        action_dim: int,
        horizon: int,
        height: int,
        width: int,
        dim: int = 512,
        heads: int = 8,
        feedforward: int = 3200,
        encoder_layers: int = 4,
        decoder_layers: int = 1,
    ):
        super().__init__()
        self.horizon, self.action_dim = horizon, action_dim
        self.backbone = ResNet18Features()
        self.project = nn.Conv2d(512, dim, 1)
        tokens = -(-height // 32) * -(-width // 32)
        self.image_position = nn.Parameter(torch.zeros(num_cameras, tokens, dim))
        self.state = nn.Linear(state_dim, dim)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        layer = dict(d_model=dim, nhead=heads, dim_feedforward=feedforward, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), encoder_layers)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer), decoder_layers)
        self.queries = nn.Parameter(torch.zeros(horizon, dim))
        self.head = nn.Linear(dim, action_dim)

    def forward(self, state: torch.Tensor, cameras: list[torch.Tensor]) -> torch.Tensor:
        batch = state.shape[0]
        images = torch.cat([c.float() for c in cameras])  # (cameras x B, 3, H, W), one backbone pass
        features = self.project(self.backbone((images - self.mean) / self.std))  # (cameras x B, dim, h, w)
        tokens = features.flatten(2).transpose(1, 2).reshape(len(cameras), batch, -1, features.shape[1])
        tokens = (tokens + self.image_position[:, None]).transpose(0, 1).reshape(batch, -1, features.shape[1])
        memory = self.encoder(torch.cat([self.state(state)[:, None], tokens], dim=1))
        out = self.decoder(self.queries.expand(batch, -1, -1), memory)
        return self.head(out)
