"""The bundled networks in plain `torch.nn`, twins of the Keras ones in jobs/tf/models/.

Same layers, widths, biases and batch-norm placement as their Keras twins, so a DDP cell and a
Horovod cell train the same model: tests/integration/test_torch_jobs.py checks that each
network's parameter count (trainable, and total with the batch-norm statistics Keras counts as
weights) equals the Keras count. No torchvision (it does not import beside the CPU build used
here), no pretrained weights. Kernels start Glorot-uniform and biases at zero, as Keras'
defaults do.

    dcgan       generator + discriminator of jobs/tf/models/gan_parts.py with batch norm
    resnet50    keras.applications.ResNet50 (v1, biased convs, BN eps 1.001e-5) with its top
    vgg16       keras.applications.VGG16 with its top (flatten, 4096, 4096, classes)
    classifier  jobs/tf/models/classifier.py: a backbone without top (global average pooling) and
                a Dense head; backbones resnet50 and vgg16
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

KERAS_BN_MOMENTUM = 0.01  # Keras' 0.99 in torch's convention (weight of the new batch)
KERAS_BN_EPS = 1e-3
RESNET_BN_EPS = 1.001e-5
CAFFE_MEANS_BGR = (103.939, 116.779, 123.68)  # keras.applications "caffe" preprocessing
BACKBONES = ("resnet50", "vgg16")
CNN_MODELS = ("resnet50", "vgg16", "classifier")
GAN_MODELS = ("dcgan",)
BN_STATS = ("running_mean", "running_var")  # Keras' moving_mean, moving_variance


def gan_upsamplings(image_size: int) -> int:
    """Stride-2 layers of the GANs: 3 below 64 px, 4 from 64 px (as jobs/tf/manifest.py)."""
    return 3 if image_size < 64 else 4


def keras_init(module: nn.Module) -> None:
    """Keras' defaults: Glorot-uniform kernels, zero biases (torch's defaults differ)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def _bn(channels: int, eps: float = KERAS_BN_EPS) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=eps, momentum=KERAS_BN_MOMENTUM)


class GanBatchNorm2d(nn.BatchNorm2d):
    """Batch norm whose moving statistics are updated outside autograd, so a network may run
    forward twice before one backward (the discriminator on real, then on fake images, each
    normalised by its own batch as in the TF program): torch's own batch norm saves the moving
    statistics for its backward on CUDA and fails when the second forward changes them. The
    variance is the biased one, as Keras averages."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        assert self.running_mean is not None and self.running_var is not None
        with torch.no_grad():
            self.running_mean.lerp_(x.mean(dim=(0, 2, 3)), self.momentum or 0.0)
            self.running_var.lerp_(x.var(dim=(0, 2, 3), unbiased=False), self.momentum or 0.0)
        return F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)


def _gan_bn(channels: int) -> GanBatchNorm2d:
    return GanBatchNorm2d(channels, eps=KERAS_BN_EPS, momentum=KERAS_BN_MOMENTUM)


class Generator(nn.Module):
    """z -> image in [-1, 1]: Dense to s0 x s0 x 8w (no bias), then (BN, ReLU, 4x4 stride-2
    transposed conv) down to 3 channels, tanh."""

    def __init__(self, image_size: int, width: int, latent_dim: int) -> None:
        super().__init__()
        n = gan_upsamplings(image_size)
        self.s0 = image_size // 2**n
        self.ch = width * 2 ** (n - 1)
        self.dense = nn.Linear(latent_dim, self.s0 * self.s0 * self.ch, bias=False)
        layers: list[nn.Module] = []
        ch = self.ch
        for _ in range(n - 1):
            layers += [_gan_bn(ch), nn.ReLU()]
            layers.append(nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False))
            ch //= 2
        layers += [_gan_bn(ch), nn.ReLU(), nn.ConvTranspose2d(ch, 3, 4, 2, 1), nn.Tanh()]
        self.body = nn.Sequential(*layers)
        keras_init(self)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.dense(z).view(-1, self.s0, self.s0, self.ch).permute(0, 3, 1, 2)
        return self.body(x)


class Discriminator(nn.Module):
    """image -> one logit: 4x4 stride-2 convs w, 2w, 4w, ... with LeakyReLU(0.2), batch norm
    after all but the first (those convs unbiased), flatten, Dense(1)."""

    def __init__(self, image_size: int, width: int) -> None:
        super().__init__()
        n = gan_upsamplings(image_size)
        layers: list[nn.Module] = []
        cin = 3
        for i in range(n):
            ch = width * 2**i
            layers.append(nn.Conv2d(cin, ch, 4, 2, 1, bias=i == 0))
            if i > 0:
                layers.append(_gan_bn(ch))
            layers.append(nn.LeakyReLU(0.2))
            cin = ch
        self.body = nn.Sequential(*layers)
        side = image_size // 2**n
        self.head = nn.Linear(side * side * cin, 1)
        keras_init(self)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.body(img).permute(0, 2, 3, 1).flatten(1)  # Keras' channels-last flatten order
        return self.head(x)


class Bottleneck(nn.Module):
    """Keras' ResNet50 block1: 1x1 (stride here, as Keras v1), 3x3, 1x1 x4, each conv biased
    and batch-normalised; a projection shortcut on each stack's first block."""

    def __init__(self, cin: int, filters: int, stride: int, project: bool) -> None:
        super().__init__()
        out = 4 * filters
        self.shortcut: Optional[nn.Sequential] = None
        if project:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, out, 1, stride), _bn(out, RESNET_BN_EPS))
        self.body = nn.Sequential(
            nn.Conv2d(cin, filters, 1, stride), _bn(filters, RESNET_BN_EPS), nn.ReLU(),
            nn.Conv2d(filters, filters, 3, 1, 1), _bn(filters, RESNET_BN_EPS), nn.ReLU(),
            nn.Conv2d(filters, out, 1), _bn(out, RESNET_BN_EPS),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        short = x if self.shortcut is None else self.shortcut(x)
        return torch.relu(self.body(x) + short)


def resnet50_body() -> tuple[nn.Sequential, int]:
    """ResNet50 without its top, up to the last block (features, channels out)."""
    layers: list[nn.Module] = [
        nn.ZeroPad2d(3), nn.Conv2d(3, 64, 7, 2), _bn(64, RESNET_BN_EPS), nn.ReLU(),
        nn.ZeroPad2d(1), nn.MaxPool2d(3, 2),
    ]  # fmt: skip
    cin = 64
    for filters, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, filters, stride if b == 0 else 1, project=b == 0))
            cin = 4 * filters
    return nn.Sequential(*layers), cin


def vgg16_body() -> tuple[nn.Sequential, int]:
    """VGG16's five conv blocks (3x3 same, ReLU, 2x2 max pool), (features, channels out)."""
    layers: list[nn.Module] = []
    cin = 3
    for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            layers += [nn.Conv2d(cin, width, 3, 1, 1), nn.ReLU()]
            cin = width
        layers.append(nn.MaxPool2d(2, 2))
    return nn.Sequential(*layers), cin


BODIES = {"resnet50": resnet50_body, "vgg16": vgg16_body}


class CaffeInput(nn.Module):
    """[-1, 1] RGB -> what the ResNet50/VGG16 ImageNet weights expect (BGR, 0-255, minus the
    ImageNet means): classifier.py's Rescaling + preprocess_input, no parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer(
            "means", torch.tensor(CAFFE_MEANS_BGR).view(1, 3, 1, 1), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 127.5 + 127.5).flip(1) - self.means


class ImageNet(nn.Module):
    """A keras.applications network: with its top (`model: resnet50|vgg16`, as
    jobs/tf/models/cnn.py) or as the classifier (no top, average pooling, a Dense head, inputs
    preprocessed as jobs/tf/models/classifier.py does)."""

    def __init__(self, backbone: str, image_size: int, num_classes: int, top: bool) -> None:
        super().__init__()
        self.pre: nn.Module = CaffeInput() if not top else nn.Identity()
        self.body, ch = BODIES[backbone]()
        self.flatten_top = top and backbone == "vgg16"
        if self.flatten_top:
            side = image_size // 32
            self.head: nn.Module = nn.Sequential(
                nn.Linear(side * side * ch, 4096), nn.ReLU(),
                nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, num_classes),
            )  # fmt: skip
        else:
            self.head = nn.Linear(ch, num_classes)
        keras_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.body(self.pre(x))
        if self.flatten_top:
            return self.head(x.permute(0, 2, 3, 1).flatten(1))
        return self.head(x.mean(dim=(2, 3)))


def build(
    model: str,
    image_size: int,
    *,
    num_classes: int = 10,
    backbone: str = "resnet50",
    width: int = 64,
    latent_dim: int = 100,
) -> dict[str, nn.Module]:
    """The model's networks by name (the Keras twins' names: generator, discriminator,
    resnet50, vgg16, classifier)."""
    if model == "dcgan":
        return {
            "generator": Generator(image_size, width, latent_dim),
            "discriminator": Discriminator(image_size, width),
        }
    if model in BODIES:
        return {model: ImageNet(model, image_size, num_classes, top=True)}
    if model == "classifier":
        if backbone not in BODIES:
            raise ValueError(f"backbone {backbone}: the torch classifier has {', '.join(BODIES)}")
        return {"classifier": ImageNet(backbone, image_size, num_classes, top=False)}
    raise ValueError(f"model {model}: the torch programs have {', '.join(GAN_MODELS + CNN_MODELS)}")


def param_counts(net: nn.Module) -> dict[str, int]:
    """Keras' counting: trainable weights, and total = all parameters plus the batch-norm
    moving statistics (Keras variables; torch buffers), without torch's batch counter."""
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    params = sum(p.numel() for p in net.parameters())
    stats = sum(b.numel() for name, b in net.named_buffers() if name.endswith(BN_STATS))
    return {"total": params + stats, "trainable": trainable}
