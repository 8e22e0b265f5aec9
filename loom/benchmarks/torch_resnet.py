#!/usr/bin/env python3
"""PyTorch (CPU) training throughput of the same models Loom builds.

Prints the same lines as `loom bench`: `Iter #k: X img/sec` and
`Img/sec: mean +- stdev`.  Models match Loom's builders layer for layer:
resnet(6k+2) with 16/32/64 channels and 1x1-conv+BN projection shortcuts,
torchvision-layout resnet18/34/50 (SGD with momentum, softmax cross-entropy,
as `loom bench`); edsr (loom/src/edsr.c: 3x3 convolutions with bias, B
residual blocks conv-ReLU-conv scaled by res_scale when it is not 1, body
conv plus global skip, conv + pixel shuffle per factor 2 or 3, tail conv;
Adam at lr 1e-4 and L1 loss on one random batch of LR patches and HR
targets in [-0.5, 0.5), as `loom bench --model edsr`).
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def resnet(name, channels, classes):
    depth = int(name[len("resnet"):])
    layers = []
    if depth in (18, 34, 50):
        blocks = [2, 2, 2, 2] if depth == 18 else [3, 4, 6, 3]
        layers += [nn.Conv2d(channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                   nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for s, nb in enumerate(blocks):
            width = 64 << s
            for b in range(nb):
                stride = 2 if (b == 0 and s > 0) else 1
                if depth == 50:
                    layers.append(Bottleneck(cin, width, stride))
                    cin = width * 4
                else:
                    layers.append(Basic(cin, width, stride))
                    cin = width
    else:
        assert depth >= 8 and (depth - 2) % 6 == 0, name
        k = (depth - 2) // 6
        layers += [nn.Conv2d(channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)]
        cin = 16
        for s in range(3):
            width = 16 << s
            for b in range(k):
                layers.append(Basic(cin, width, 2 if (b == 0 and s > 0) else 1))
                cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


class ResBlock(nn.Module):
    def __init__(self, feats, res_scale):
        super().__init__()
        self.conv1 = nn.Conv2d(feats, feats, 3, 1, 1)
        self.conv2 = nn.Conv2d(feats, feats, 3, 1, 1)
        self.res_scale = res_scale

    def forward(self, x):
        y = self.conv2(F.relu(self.conv1(x)))
        if self.res_scale != 1.0:
            y = y * self.res_scale
        return y + x


class EDSR(nn.Module):
    def __init__(self, blocks, feats, scale, res_scale, channels=3):
        super().__init__()
        self.head = nn.Conv2d(channels, feats, 3, 1, 1)
        self.body = nn.Sequential(*[ResBlock(feats, res_scale) for _ in range(blocks)])
        self.body_conv = nn.Conv2d(feats, feats, 3, 1, 1)
        r, stages = (3, 1) if scale == 3 else (2, 2 if scale == 4 else 1)
        up = []
        for _ in range(stages):
            up += [nn.Conv2d(feats, feats * r * r, 3, 1, 1), nn.PixelShuffle(r)]
        self.up = nn.Sequential(*up)
        self.tail = nn.Conv2d(feats, channels, 3, 1, 1)

    def forward(self, x):
        h = self.head(x)
        return self.tail(self.up(self.body_conv(self.body(h)) + h))


# loom_edsr_config: (blocks, features, residual scaling)
EDSR_CONFIGS = {"edsr": (16, 64, 1.0), "edsr-paper": (32, 256, 0.1)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet20")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--scale", type=int, default=2, choices=(2, 3, 4))
    p.add_argument("--patch", type=int, default=48)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.model in EDSR_CONFIGS:
        blocks, feats, res_scale = EDSR_CONFIGS[a.model]
        model = EDSR(blocks, feats, a.scale, res_scale)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        x = torch.rand(a.batch, 3, a.patch, a.patch) - 0.5
        y = torch.rand(a.batch, 3, a.patch * a.scale, a.patch * a.scale) - 0.5
        loss_fn = F.l1_loss
    else:
        model = resnet(a.model, a.channels, a.classes)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(a.batch, a.channels, a.image, a.image)
        y = torch.randint(0, a.classes, (a.batch,))
        loss_fn = F.cross_entropy
    model.train()
    print(f"Model: {a.model} (PyTorch {torch.__version__}, {torch.get_num_threads()} threads)")
    rates = []
    for it in range(-a.warmup, a.iters):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        r = a.batch / (time.perf_counter() - t0)
        if it < 0:
            print(f"Warmup #{it + a.warmup}: {r:.1f} img/sec")
        else:
            rates.append(r)
            print(f"Iter #{it}: {r:.1f} img/sec")
        sys.stdout.flush()
    sd = statistics.stdev(rates) if len(rates) > 1 else 0.0
    print(f"Img/sec: {statistics.mean(rates):.1f} +- {sd:.1f}")


if __name__ == "__main__":
    main()
