"""Train ResNets on synthetic images, eagerly and then staged (the paper, section 6).

    python examples/resnet.py                          # the small CIFAR ResNet, 32x32
    python examples/resnet.py --model resnet50 --size 64 --batch 4
    python examples/resnet.py --steps 10 --batch 32

Both models are `sf.Module`s built from `sf.layers`: the small CIFAR ResNet of the paper's
Figure 3 workload (conv3x3(16)-BN-relu, three basic blocks of 16, 32/2 and 64/2 filters
with 1x1 projection shortcuts, global average pooling, dense(10)) and ResNet-50 (bottleneck
blocks 3-4-6-3, the ImageNet layout: a 7x7/2 stem and a 3x3/2 max pool, the stride on each
stage's first 3x3 convolution; it runs on inputs of any size from 32x32). Each trains on one
fixed batch of random images and labels with softmax cross-entropy and SGD(0.01), so the
loss goes down as the batch is memorised.

The eager steps run op by op; then, as the paper says, "converting the code to use function
is simply a matter of decorating two functions": the model's call and the training step.
The staged step's first call traces and compiles (ResNet-50's takes about a minute here);
the examples/s exclude it. `python -m benchmarks.resnet` times the small model's step
against the batch size, beside PyTorch and JAX.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import stageflow as sf

L = sf.layers


def conv_bn(filters: int, kernel: int, stride: int = 1) -> tuple[L.Conv2D, L.BatchNormalization]:
    """A convolution without bias (the batch norm's beta is the shift) and its batch norm."""
    return L.Conv2D(filters, kernel, stride, "same", use_bias=False), L.BatchNormalization()


class BasicBlock(sf.Module):
    """Two 3x3 convolutions with batch norm, added to the input or to its 1x1 projection
    where the shape changes."""

    def __init__(self, filters: int, stride: int, project: bool) -> None:
        super().__init__()
        self.conv1, self.bn1 = conv_bn(filters, 3, stride)
        self.conv2, self.bn2 = conv_bn(filters, 3)
        self.shortcut = L.Conv2D(filters, 1, stride, use_bias=False) if project else None
        self.add = L.Add()

    def call(self, x: sf.Tensor, training: bool = False) -> sf.Tensor:
        h = sf.nn.relu(self.bn1(self.conv1(x), training=training))
        h = self.bn2(self.conv2(h), training=training)
        shortcut = x if self.shortcut is None else self.shortcut(x)
        return sf.nn.relu(self.add([h, shortcut]))


class Bottleneck(sf.Module):
    """1x1 (reduce), 3x3 (strided), 1x1 (expand 4x), each with batch norm; a projection
    shortcut with its own batch norm at the first block of a stage."""

    def __init__(self, filters: int, stride: int, project: bool) -> None:
        super().__init__()
        self.conv1, self.bn1 = conv_bn(filters, 1)
        self.conv2, self.bn2 = conv_bn(filters, 3, stride)
        self.conv3, self.bn3 = conv_bn(4 * filters, 1)
        self.shortcut = conv_bn(4 * filters, 1, stride) if project else None
        self.add = L.Add()

    def call(self, x: sf.Tensor, training: bool = False) -> sf.Tensor:
        h = sf.nn.relu(self.bn1(self.conv1(x), training=training))
        h = sf.nn.relu(self.bn2(self.conv2(h), training=training))
        h = self.bn3(self.conv3(h), training=training)
        if self.shortcut is None:
            shortcut = x
        else:
            conv, bn = self.shortcut
            shortcut = bn(conv(x), training=training)
        return sf.nn.relu(self.add([h, shortcut]))


class ResNet(sf.Module):
    """A stem, residual blocks, global average pooling and a dense classifier."""

    def __init__(self, stem: list, blocks: list[sf.Module], classes: int) -> None:
        super().__init__()
        self.stem = stem
        self.blocks = blocks
        self.pool = L.GlobalAveragePooling2D()
        self.head = L.Dense(classes)

    def call(self, x: sf.Tensor, training: bool = False) -> sf.Tensor:
        h = x
        for layer in self.stem:
            h = layer(h, training=training)
        for block in self.blocks:
            h = block(h, training=training)
        return self.head(self.pool(h))


def cifar_resnet(classes: int = 10) -> ResNet:
    """conv3x3(16)-BN-relu, basic blocks (16, 32/2, 64/2), 1x1 projections where needed."""
    conv, bn = conv_bn(16, 3)
    blocks = [BasicBlock(16, 1, project=False), BasicBlock(32, 2, project=True),
              BasicBlock(64, 2, project=True)]
    return ResNet([conv, bn, L.ReLU()], blocks, classes)


def resnet50(classes: int = 1000) -> ResNet:
    """ResNet-50: the 7x7/2 stem and 3x3/2 max pool, then bottleneck stages 3-4-6-3."""
    conv, bn = conv_bn(64, 7, 2)
    stem = [conv, bn, L.ReLU(), L.MaxPool2D(3, 2, "same")]
    blocks: list[sf.Module] = []
    for stage, (filters, count) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3),
                                                 strict=True)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            blocks.append(Bottleneck(filters, stride, project=i == 0))
    return ResNet(stem, blocks, classes)


def train_step(model: ResNet, optimizer: sf.optimizers.SGD, x: sf.Tensor,
               y: sf.Tensor) -> sf.Tensor:
    """One SGD step on the mean softmax cross-entropy; the batch norms train (batch
    statistics, moving statistics updated)."""
    with sf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = sf.reduce_mean(sf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
    return loss


def synthetic_batch(batch: int, size: int, classes: int, seed: int = 0
                    ) -> tuple[sf.Tensor, sf.Tensor]:
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch, size, size, 3)).astype(np.float32)
    labels = rng.integers(0, classes, batch).astype(np.int32)
    return sf.constant(images), sf.constant(labels)


def run(label: str, step: Callable, batch: int, steps: int) -> None:
    """`steps` timed steps after one untimed (for the staged step: tracing, compiling)."""
    start = time.perf_counter()
    first = float(step())
    seconds = time.perf_counter() - start
    print(f"  {label:6s} step 0: loss {first:.4f}  (first call {seconds:.2f} s)")
    start = time.perf_counter()
    for i in range(1, steps + 1):
        loss = float(step())
        print(f"  {label:6s} step {i}: loss {loss:.4f}")
    rate = steps * batch / (time.perf_counter() - start)
    print(f"  {label:6s} {rate:.1f} examples/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["cifar", "resnet50"], default="cifar")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=None,
                        help="image height and width (default 32, or 64 for ResNet-50)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per mode")
    args = parser.parse_args()
    sf.random.set_seed(0)
    classes = 10 if args.model == "cifar" else 1000
    model = cifar_resnet() if args.model == "cifar" else resnet50()
    size = args.size or (32 if args.model == "cifar" else 64)
    optimizer = sf.optimizers.SGD(0.01)
    x, y = synthetic_batch(args.batch, size, classes)
    print(f"{args.model} ResNet, batch {args.batch} of {size}x{size}x3, SGD(0.01)")

    run("eager", lambda: train_step(model, optimizer, x, y), args.batch, args.steps)
    print(f"  {len(model.trainable_variables)} trainable variables, "
          f"{sum(int(np.prod(v.shape)) for v in model.trainable_variables):,} weights")

    model.call = sf.function(model.call)  # the two decorations of the paper
    staged_step = sf.function(train_step)
    run("staged", lambda: staged_step(model, optimizer, x, y), args.batch, args.steps)


if __name__ == "__main__":
    main()
