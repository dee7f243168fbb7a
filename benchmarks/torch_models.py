"""PyTorch definitions of the real-size models the benchmarks compare against, shared by
those that export them to ONNX (`onnx_models`) and those that run them in PyTorch
(`resnet50`). Each imports torch when it is called."""

from __future__ import annotations

from typing import Any


def resnet50() -> Any:
    """torchvision's ResNet-50 (v1.5: the stride on the 3x3 conv), defined here so that
    torchvision is not needed; in inference mode (``.train()`` for a training step)."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.proj = None
            if stride != 1 or cin != cout:
                self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            shortcut = x if self.proj is None else self.proj(x)
            return (self.body(x) + shortcut).relu()

    layers: list[Any] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers).eval()


def bert_encoder() -> Any:
    """A BERT-base-shaped encoder: 12 post-norm layers, width 768, 12 heads, FFN 3072, fed
    hidden states; in inference mode."""
    from torch import nn
    layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                       batch_first=True)
    return nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval()
