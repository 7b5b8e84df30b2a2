"""The workloads' declaration: the models of jobs/tf/train.py and the job's own arguments (name,
type, range, default, help) and rules, defined once.

jobs/tf/train.py builds its parser from it; hpcscale loads this file by its path (standard library
only, no TensorFlow, no other `jobs` module) to check a campaign's `model:` and `args:` before
anything is queued, and `hpcscale models` lists it. The flags hpcscale itself sets (--model,
--batch-per-rank, --epochs, --seed, ...) are hpcscale.model.job_cli's, not declared here.

Adding a model: a module in jobs/tf/models/ with `build(cfg, ctx)` and `DEFAULT_LR`, and one
`Model(...)` line below. Adding an argument: one `Arg(...)` line below, and its use in the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

PROGRAMS: tuple[str, ...] = ("train",)  # entry points (jobs/<program>.py) of these arguments
TYPES: tuple[str, ...] = ("int", "float", "str", "path", "switch")


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
    `type` "switch" is a flag without a value (true: given, false: left out); "str" with
    `choices` is one of a fixed set of names."""

    name: str
    type: str
    help: str
    default: Union[int, float, str, None] = None
    min: Optional[float] = None  # smallest allowed value
    above: Optional[float] = None  # values must be greater than this
    below: Optional[float] = None  # values must be smaller than this
    choices: tuple[str, ...] = ()  # the allowed values (empty: any)
    group: str = "run"
    models: tuple[str, ...] = ()  # the models that use it (empty: every model)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def range(self) -> str:
        """The allowed values, for help and listings."""
        if self.choices:
            return " | ".join(self.choices)
        low = f">= {self.min:g}" if self.min is not None else ""
        low = f"> {self.above:g}" if self.above is not None else low
        high = f"< {self.below:g}" if self.below is not None else ""
        return ", ".join(x for x in (low, high) if x)

    def convert(self, text: str) -> Union[int, float, str]:
        """The value the job gets from `--flag text`; ValueError says why it is refused."""
        if self.type == "int":
            try:
                value: Union[int, float, str] = int(text)
            except ValueError:
                raise ValueError(f"expected an integer, got {text!r}") from None
        elif self.type == "float":
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"expected a number, got {text!r}") from None
        else:
            if self.choices and text not in self.choices:
                raise ValueError(f"expected one of {', '.join(self.choices)}, got {text!r}")
            return text
        if self.min is not None and not value >= self.min:
            raise ValueError(f"must be >= {self.min:g}, got {text}")
        if self.above is not None and not value > self.above:
            raise ValueError(f"must be > {self.above:g}, got {text}")
        if self.below is not None and not value < self.below:
            raise ValueError(f"must be < {self.below:g}, got {text}")
        return value


GAN = ("dcgan", "sngan", "wgan_gp", "stackgan")
STACKGAN = ("stackgan",)
STAGE2_FACTORS = (2, 4, 8)

# StackGAN's arguments (jobs/tf/models/stackgan.py) and the cub dataset's (jobs/tf/datasets/cub.py).
# fmt: off
STACKGAN_ARGS: tuple[Arg, ...] = (
    Arg("stage", "int", "stackgan: 1 trains Stage-I (text -> --image-size px), 2 trains Stage-II "
        "(-> --image-size x --stage2-factor px) on a frozen Stage-I generator; default 1", 1,
        min=1, group="model", models=STACKGAN),
    Arg("stage1_weights", "path", "stackgan --stage 2: the Stage-I generator to start from "
        "(stage1_generator.weights.h5 in a stage-1 run's directory); default: train Stage-I "
        "first, untimed, for --stage1-steps", group="model", models=STACKGAN),
    Arg("stage1_steps", "int", "stackgan --stage 2 without --stage1-weights: untimed Stage-I "
        "steps before burn-in; default epochs x steps per epoch", min=1, group="model",
        models=STACKGAN),
    Arg("stage2_factor", "int", "stackgan: Stage-II upscaling, 2, 4 or 8; default 4 (64 -> 256 "
        "px)", 4, min=2, group="model", models=STACKGAN),
    Arg("embedding_dim", "int", "stackgan: text-embedding size (CUB's char-CNN-RNN: 1024); "
        "default 1024", 1024, min=1, group="model", models=STACKGAN),
    Arg("condition_dim", "int", "stackgan: conditioning-augmentation size, also the "
        "discriminators' compressed text; default 128", 128, min=1, group="model",
        models=STACKGAN),
    Arg("kl_weight", "float", "stackgan: weight of the conditioning's KL term in the "
        "generator loss; default 2", 2.0, min=0, group="model", models=STACKGAN),
    Arg("images_per_class", "int", "cub: keep this many images per species, chosen with "
        "--seed (seed 000 kept 20); default all", min=1, group="data", models=STACKGAN),
)
# fmt: on
DATASETS = ("synthetic", "folder", "flat", "tfrecord", "cub")
LR_SCALINGS = ("linear", "sqrt", "none")
CNN = ("resnet50", "inception_v3", "vgg16", "classifier")
CLASSIFIER = ("classifier",)  # Keras model.fit (jobs/tf/keras_fit.py)
BACKBONES = ("resnet50", "inception_v3", "vgg16", "mobilenet_v2", "efficientnet_b0")
AUGMENTS = ("none", "seed004_fruits", "seed004_caltech")  # jobs/tf/augment.py

# The classifier's arguments, one declaration each (kept compact).
# fmt: off
CLASSIFIER_ARGS: tuple[Arg, ...] = (
    Arg("backbone", "str", "classifier: the keras.applications network (include_top=False, "
        "average pooling, a Dense head); inception_v3 needs >= 75 px; default mobilenet_v2",
        "mobilenet_v2", choices=BACKBONES, group="model", models=CLASSIFIER),
    Arg("weights", "str", "classifier backbone weights: none (random), imagenet (from the "
        "Keras cache ~/.keras/models, never downloaded) or a weights file (save_weights of the "
        "backbone); default none", "none", group="model", models=CLASSIFIER),
    Arg("optimizer", "str", "classifier optimizer (Keras legacy, wrapped by "
        "hvd.DistributedOptimizer); default adam", "adam", choices=("adam", "sgd", "adadelta"),
        group="model", models=CLASSIFIER),
    Arg("fine_tune", "switch", "classifier: train the head on a frozen backbone for "
        "--head-epochs, then unfreeze the top --unfreeze-layers layers at the rate x "
        "--fine-tune-lr-factor", group="model", models=CLASSIFIER),
    Arg("head_epochs", "int", "with --fine-tune: epochs of the head-only phase; default "
        "half of --epochs", min=0, group="model", models=CLASSIFIER),
    Arg("unfreeze_layers", "int", "with --fine-tune: backbone layers (from the top) trained "
        "in the second phase; default all", min=1, group="model", models=CLASSIFIER),
    Arg("fine_tune_lr_factor", "float", "with --fine-tune: the second phase's rate as a "
        "fraction of the first's; default 0.1", 0.1, above=0, group="model", models=CLASSIFIER),
    Arg("augment", "str", "classifier augmentation preset (Keras preprocessing layers in the "
        "input pipeline): seed004_fruits = zoom 0.01, shift 0.01; seed004_caltech = rotation "
        "0.05, zoom 0.2, shift 0.2, flip; the --aug-* arguments override it; default none",
        "none", choices=AUGMENTS, group="data", models=CLASSIFIER),
    Arg("aug_zoom", "float", "random zoom, fraction of the size (RandomZoom)", min=0,
        group="data", models=CLASSIFIER),
    Arg("aug_shift", "float", "random shift, fraction of height/width (RandomTranslation)",
        min=0, group="data", models=CLASSIFIER),
    Arg("aug_rotation", "float", "random rotation, fraction of a full turn (RandomRotation)",
        min=0, group="data", models=CLASSIFIER),
    Arg("aug_flip", "switch", "random horizontal flip (RandomFlip)", group="data",
        models=CLASSIFIER),
)
# fmt: on

MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("dcgan", "gan", "jobs.tf.models.dcgan", 16, "DCGAN: batch norm, BCE loss"),
        Model("sngan", "gan", "jobs.tf.models.sngan", 16, "SNGAN: spectral norm, hinge loss"),
        Model(
            "wgan_gp", "gan", "jobs.tf.models.wgan_gp", 16, "WGAN-GP: layer-norm critic, penalty"
        ),
        Model("stackgan", "gan", "jobs.tf.models.stackgan", 16, "StackGAN: text -> Stage-I/II"),
        Model("resnet50", "cnn", "jobs.tf.models.cnn", 32, "ResNet50 (keras.applications)"),
        Model("inception_v3", "cnn", "jobs.tf.models.cnn", 75, "InceptionV3 (keras.applications)"),
        Model("vgg16", "cnn", "jobs.tf.models.cnn", 32, "VGG16 (keras.applications)"),
        Model("classifier", "cnn", "jobs.tf.models.classifier", 32, "Keras fit, Horovod Keras API"),
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
            "the dataset's directory, read as --dataset says, sharded by rank (default: none, "
            "synthetic data)",
            group="data",
        ),
        Arg(
            "dataset",
            "str",
            "input format: synthetic (noise, free per step), folder (one sub-folder of images "
            "per class), flat (unlabelled images in one folder, for GANs), tfrecord "
            "(train-*-of-* shards: image/encoded + image/class/label), cub (StackGAN's CUB "
            "layout); default synthetic, folder with --data-dir",
            choices=DATASETS,
            group="data",
        ),
        Arg(
            "val_split",
            "float",
            "fraction of --data-dir held out for validation (seeded by --seed; folder: "
            "stratified by class); default 0",
            0.0,
            min=0,
            below=1,
            group="data",
        ),
        Arg(
            "val_dir",
            "path",
            "a separate validation directory in the same format (folder: the same classes)",
            group="data",
        ),
        Arg(
            "center_crop",
            "int",
            "flat: crop a centred square of this many px (default: the shorter side), then "
            "resize to --image-size (DCGAN's CelebA: 108)",
            min=1,
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
        Arg(
            "num_classes",
            "int",
            "CNN classes; default: the data's (folder: its sub-folders; synthetic: 10); "
            "tfrecord needs it (labels 0..N-1 as stored)",
            min=1,
            group="data",
            models=CNN,
        ),
        Arg(
            "lr",
            "float",
            "reference learning rate at a global batch of --lr-ref-batch (default per model: "
            "GANs 2e-4, wgan_gp 1e-4, CNNs 0.0125); scaled by --lr-scaling",
            above=0,
            group="model",
        ),
        Arg(
            "lr_scaling",
            "str",
            "learning-rate rule: eta = lr x global_batch / lr_ref_batch (linear), x its square "
            "root (sqrt), or lr (none); default linear",
            "linear",
            choices=LR_SCALINGS,
            group="model",
        ),
        Arg(
            "lr_ref_batch",
            "int",
            "the global batch --lr is meant for; default --batch-per-rank (one replica's "
            "batch: lr x replicas under linear); hpcscale sets the run's global batch for "
            "strong scaling, so the rate stays the same at every scale",
            min=1,
            group="model",
        ),
        Arg(
            "warmup_epochs",
            "float",
            "ramp the learning rate linearly from --lr to the scaled rate over this many "
            "epochs; default 0 (the scaled rate from the first step)",
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
        *CLASSIFIER_ARGS,
        *STACKGAN_ARGS,
    )
}


def gan_upsamplings(image_size: int) -> int:
    """How many stride-2 (de)convolutions the GANs use: 3 below 64 px, 4 from 64 px (the DCGAN
    paper's 4x4 -> 64x64 generator)."""
    return 3 if image_size < 64 else 4


def gan_image_size_problem(image_size: int) -> Optional[str]:
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


def rule_problem(model: str, values: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(argument, why) for the first rule the model and these converted values break, or None;
    arguments not given take their defaults."""
    m = MODELS[model]
    size = values.get("image_size")
    size = ARGS["image_size"].default if size is None else size
    if size < m.min_image_size:
        return "image_size", f"{model} needs at least {m.min_image_size} px, got {size}"
    if m.family == "gan" and (msg := gan_image_size_problem(size)):
        return "image_size", msg
    if model == "classifier" and values.get("backbone") == "inception_v3" and size < 75:
        return "image_size", f"backbone inception_v3 needs at least 75 px, got {size}"
    if broken := stackgan_problem(model, values):
        return broken
    return data_problem(m.family, values)


def stackgan_problem(model: str, values: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """StackGAN's geometry and stages, and the cub dataset (text pairs: StackGAN's alone)."""
    dataset = values.get("dataset")
    if dataset == "cub" and model != "stackgan":
        return "dataset", f"--dataset cub pairs images with text: for stackgan, not {model}"
    if values.get("images_per_class") is not None and dataset != "cub":
        return "images_per_class", "--images-per-class is for --dataset cub"
    if model != "stackgan":
        return None
    stage = values.get("stage", 1)
    if stage not in (1, 2):
        return "stage", f"must be 1 (Stage-I) or 2 (Stage-II), got {stage}"
    factor = values.get("stage2_factor", 4)
    if factor not in STAGE2_FACTORS:
        return "stage2_factor", f"must be 2, 4 or 8 (Stage-II doubles the size), got {factor}"
    for name in ("stage1_weights", "stage1_steps"):
        if values.get(name) is not None and stage != 2:
            return name, f"--{name.replace('_', '-')} is for --stage 2"
    return None


def data_problem(family: str, values: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(argument, why) for a data argument that does not fit the others, or None."""
    dataset, data_dir = values.get("dataset"), values.get("data_dir")
    if dataset not in (None, "synthetic") and data_dir is None:
        return "dataset", "a dataset on disk needs --data-dir"
    if dataset == "synthetic" and data_dir is not None:
        return "data_dir", "--dataset synthetic reads no --data-dir"
    fmt = dataset or ("folder" if data_dir is not None else "synthetic")
    if fmt == "synthetic":
        for name in ("val_split", "val_dir"):
            if values.get(name):
                return name, "needs a dataset on disk (--data-dir)"
    if values.get("val_split") and values.get("val_dir") is not None:
        return "val_dir", "give --val-split or --val-dir, not both"
    if values.get("center_crop") is not None and fmt != "flat":
        return "center_crop", f"is for --dataset flat, not {fmt}"
    if family != "gan" and fmt == "flat":
        return "dataset", "flat images are unlabelled (GANs only); use folder or tfrecord"
    if family != "gan" and fmt == "tfrecord" and values.get("num_classes") is None:
        return "dataset", "labelled models need --num-classes (labels 0..N-1 as stored)"
    return None
