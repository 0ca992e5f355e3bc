"""The user's data: folders of images (labelled or not) and arrays, preprocessed for their model.

Public API (``from infer_compare.data.user import ...``):

``PreprocessSpec(resize=256, crop=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, layout="nchw", bgr=False,
scale=1/255, channels=3, interpolation="bilinear", source="ImageNet defaults")``
    Frozen; checked on creation (UsageError). ``to_dict()`` / ``from_dict(d)``; ``describe()`` is one
    line for the report. Steps, the math of data/bundled.py's photo preprocessing: decode with PIL
    (``convert`` to "RGB", or "L" when ``channels == 1``), resize the shorter side to ``resize`` (long
    side rounded, never below ``crop``), centre crop ``crop`` (offsets rounded down), multiply raw 0..255
    pixels by ``scale``, swap to BGR when ``bgr``, ``(x - mean) / std`` (mean/std in the model's channel
    order), then C,H,W (``nchw``) or H,W,C (``nhwc``). ``resize``/``crop`` None skip the step.
``preprocess_spec(defaults, *, resize=None, crop=None, mean=None, std=None, layout=None, bgr=None,
scale=None) -> PreprocessSpec``
    The CLI's overrides (None keeps the default), validated with one-line UsageErrors; mean/std take
    1 or 3 numbers ("0.485,0.456,0.406" or a sequence), scale a number or "1/255", resize/crop 0 or
    "none" to skip. ``source`` becomes "<defaults.source> with user overrides: resize, mean".
``imagenet_defaults(input_shape) -> PreprocessSpec``
    For a model without its own transforms: crop = H of ``input_shape`` (C,H,W or H,W,C, told apart
    by where the 1- or 3-channel axis is; a leading batch axis is dropped), resize = round(crop *
    256/224), ImageNet mean/std (one channel: 0.449/0.226), scale 1/255, layout from the shape.
``from_preprocess(pre, source) -> PreprocessSpec``
    From data.Preprocess, i.e. a built-in or torchvision model's weights transforms.
``UserData`` (dataclass)
    images (float32 N x sample for images; ndarray for a .npy; {input name: array} for a .npz),
    labels (int64 or None), class_names (``class_names[label]`` is its folder; "" for an index no folder
    uses), skipped, skipped_examples (up to 5 "path: reason"), description (one line),
    reference_outputs ({output name: N x ...}, "" = ONLY_OUTPUT, or None); ``len()``, ``digest()``
    (16 hex digits of sha256 over names, shapes, dtypes and bytes), ``subset(idx)``.
``load_data(path, *, preprocess, input_shape=None, max_images=None, labels_file=None, progress=None,
seed=0) -> UserData``
    ``path``: a folder with class sub-folders (ImageFolder: label = index of the folder in sorted order,
    or from ``labels_file``: JSON {"folder": index} or lines "folder index" / "index folder"; files of
    each class folder found recursively), a folder of images (no labels), a ``.npy`` (N x sample, or
    one sample; integer dtypes kept, floats become float32) or a ``.npz`` (one array per model input
    name, optional "labels", "reference" / "reference_<output>"). Images: .jpg .jpeg .png .bmp .gif
    .tif .tiff .webp in any case, sorted; hidden files and everything else ignored; a file that fails
    to decode is skipped and counted. ``input_shape`` is the shape of ONE sample (no batch axis; None
    or -1 entries match any size), or {input name: shape} for a .npz. ``max_images``: a seeded,
    class-balanced subset (a file that fails is replaced by the next one). ``progress(done, total)``
    is called after each file (total grows by one per replaced file). Missing path, empty folder, no
    decodable image, a shape that does not fit: UsageError, one line, naming the path.
``split_eval_calibration(data, n_calib, seed=0) -> (evaluation, calibration)``
    Disjoint, seeded, class-balanced where labelled; at most half the samples calibrate; fewer than
    2 samples is a UsageError.
"""

from __future__ import annotations

from infer_compare.data.user.arrays import ONLY_OUTPUT
from infer_compare.data.user.dataset import (
    UserData,
    check_folder_classes,
    load_data,
    selection_order,
    split_eval_calibration,
)
from infer_compare.data.user.images import IMAGE_SUFFIXES
from infer_compare.data.user.spec import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    PreprocessSpec,
    apply,
    from_preprocess,
    imagenet_defaults,
    preprocess_spec,
)

__all__ = [
    "IMAGE_SUFFIXES", "IMAGENET_MEAN", "IMAGENET_STD", "ONLY_OUTPUT", "PreprocessSpec", "UserData", "apply",
    "check_folder_classes", "from_preprocess", "imagenet_defaults", "load_data", "preprocess_spec",
    "selection_order", "split_eval_calibration",
]
