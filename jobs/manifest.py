"""The workloads' declaration: the models of jobs/train.py and the job's own arguments (name,
type, range, default, help) and rules, defined once.

jobs/train.py builds its parser from it; hpcscale loads this file by its path (standard library
only, no TensorFlow, no other `jobs` module) to check a campaign's `model:` and `args:` before
anything is queued, and `hpcscale models` lists it. The flags hpcscale itself sets (--model,
--batch-per-rank, --epochs, --seed, ...) are hpcscale.formats.job_cli's, not declared here.

Adding a model: a module in jobs/models/ with `build(cfg, ctx)` and `DEFAULT_LR`, and one
`Model(...)` line below. Adding an argument: one `Arg(...)` line below, and its use in the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROGRAMS: tuple[str, ...] = ("train",)  # entry points (jobs/<program>.py) of these arguments
TYPES: tuple[str, ...] = ("int", "float", "path", "switch")


@dataclass(frozen=True)
class Model:
    name: str
    family: str  # "gan" | "cnn" (metrics.json `workload`)
    module: str  # imported only when the job builds it (it pulls in TensorFlow)
    min_image_size: int  # px
    help: str


@dataclass(frozen=True)
class Arg:
    """One argument of the job: `--image-size` for name `image_size` (a campaign's `args:` key).
    `type` "switch" is a flag without a value (true: given, false: left out)."""

    name: str
    type: str
    help: str
    default: int | float | str | None = None
    min: float | None = None  # smallest allowed value
    above: float | None = None  # values must be greater than this
    group: str = "run"
    models: tuple[str, ...] = ()  # the models that use it (empty: every model)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def range(self) -> str:
        """The allowed values, for help and listings."""
        if self.min is not None:
            return f">= {self.min:g}"
        if self.above is not None:
            return f"> {self.above:g}"
        return ""

    def convert(self, text: str) -> int | float | str:
        """The value the job gets from `--flag text`; ValueError says why it is refused."""
        if self.type == "int":
            try:
                value: int | float | str = int(text)
            except ValueError:
                raise ValueError(f"expected an integer, got {text!r}") from None
        elif self.type == "float":
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"expected a number, got {text!r}") from None
        else:
            return text
        if self.min is not None and not value >= self.min:
            raise ValueError(f"must be >= {self.min:g}, got {text}")
        if self.above is not None and not value > self.above:
            raise ValueError(f"must be > {self.above:g}, got {text}")
        return value


GAN = ("dcgan", "sngan", "wgan_gp")
CNN = ("resnet50", "inception_v3", "vgg16")

MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("dcgan", "gan", "jobs.models.dcgan", 16, "DCGAN: batch norm, BCE loss"),
        Model("sngan", "gan", "jobs.models.sngan", 16, "SNGAN: spectral norm, hinge loss"),
        Model("wgan_gp", "gan", "jobs.models.wgan_gp", 16, "WGAN-GP: layer-norm critic, penalty"),
        Model("resnet50", "cnn", "jobs.models.cnn", 32, "ResNet50 (keras.applications)"),
        Model("inception_v3", "cnn", "jobs.models.cnn", 75, "InceptionV3 (keras.applications)"),
        Model("vgg16", "cnn", "jobs.models.cnn", 32, "VGG16 (keras.applications)"),
    )
}

ARGS: dict[str, Arg] = {
    a.name: a
    for a in (
        Arg(
            "steps_per_epoch",
            "int",
            "steps per epoch; default dataset size // global batch",
            min=1,
        ),
        Arg(
            "burn_in_steps",
            "int",
            "untimed training steps before epoch 1 (graph tracing); default 1",
            1,
            min=0,
        ),
        Arg(
            "check_sync",
            "switch",
            "after training, compare a digest of all weights and optimizer state across "
            "ranks/replicas; exit 3 if they differ",
        ),
        Arg(
            "data_dir",
            "path",
            "class-per-folder image directory, sharded by rank (default: synthetic)",
            group="data",
        ),
        Arg(
            "dataset_size",
            "int",
            "images per epoch, all ranks together (synthetic default: steps x global batch, "
            "else 8192; with --data-dir: a seeded subset)",
            min=1,
            group="data",
        ),
        Arg(
            "image_size",
            "int",
            "square images, px; default 64 (GANs: a multiple of 8 below 64 px, of 16 from 64 px; "
            "CNNs: >= 32, inception_v3 >= 75)",
            64,
            min=1,
            group="data",
        ),
        Arg("num_classes", "int", "CNN classes; default 10", 10, min=1, group="data", models=CNN),
        Arg(
            "lr",
            "float",
            "base learning rate per replica (default per model: GANs 2e-4, wgan_gp 1e-4, CNNs "
            "0.0125); scaled by the replica count",
            above=0,
            group="model",
        ),
        Arg(
            "warmup_epochs",
            "float",
            "ramp the learning rate linearly from --lr to --lr x replicas; default 0",
            0.0,
            min=0,
            group="model",
        ),
        Arg(
            "width",
            "int",
            "GAN base channel width (DCGAN paper: 64); default 64",
            64,
            min=1,
            group="model",
            models=GAN,
        ),
        Arg(
            "latent_dim",
            "int",
            "GAN noise size; default 100",
            100,
            min=1,
            group="model",
            models=GAN,
        ),
        Arg(
            "n_critic",
            "int",
            "wgan_gp critic updates per generator update; default 5",
            5,
            min=1,
            group="model",
            models=("wgan_gp",),
        ),
        Arg(
            "gp_weight",
            "float",
            "wgan_gp gradient-penalty weight; default 10",
            10.0,
            min=0,
            group="model",
            models=("wgan_gp",),
        ),
        Arg(
            "inter_op_threads",
            "int",
            "TensorFlow inter-op threads per rank; default: TensorFlow's choice",
            min=1,
            group="distribution",
        ),
        Arg(
            "timeline_dir",
            "path",
            "node-local directory for the live timeline; default $TMPDIR or /tmp",
            group="timeline (horovod only)",
        ),
        Arg(
            "debug_desync",
            "switch",
            "perturb rank 1's weights before the sync check (must then exit 3)",
            group="testing",
        ),
    )
}


def gan_upsamplings(image_size: int) -> int:
    """How many stride-2 (de)convolutions the GANs use: 3 below 64 px, 4 from 64 px (the DCGAN
    paper's 4x4 -> 64x64 generator)."""
    return 3 if image_size < 64 else 4


def gan_image_size_problem(image_size: int) -> str | None:
    """Why a GAN cannot be built at this size, or None."""
    n = gan_upsamplings(image_size)
    if image_size < 16:
        return f"GAN image size must be at least 16 px, got {image_size}"
    if image_size % (2**n):
        return (
            f"GAN image size must be a multiple of {2**n} at {image_size} px "
            f"({n} stride-2 layers), e.g. 32, 48, 64, 128"
        )
    return None


def rule_problem(model: str, values: Mapping[str, Any]) -> tuple[str, str] | None:
    """(argument, why) for the first rule the model and these converted values break, or None;
    arguments not given take their defaults."""
    m = MODELS[model]
    size = values.get("image_size")
    size = ARGS["image_size"].default if size is None else size
    if size < m.min_image_size:
        return "image_size", f"{model} needs at least {m.min_image_size} px, got {size}"
    if m.family == "gan" and (msg := gan_image_size_problem(size)):
        return "image_size", msg
    return None
