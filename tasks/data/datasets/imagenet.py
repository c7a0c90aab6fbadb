"""``imagenet``: pretrained torchvision classifiers on ImageNet, targets ImageNetV2 (paper App. H).

The ALSA paper evaluates three models "provided by PyTorch" (AlexNet, MobileNetV2,
EfficientNet-B0, :mod:`tasks.models.backbones.pretrained`) without training them; "the official
ImageNet validation set was used". Nothing is trained here: the source has no training images.

Splits
------
=====================  ==========================================================  =========
split                  images                                                      pool id
=====================  ==========================================================  =========
``val``                a seeded, class-stratified 20 % of the 50,000 official        --
                       ImageNet validation images: 10 per class, 10,000 in all
``clean``              the other 40,000 validation images (40 per class)            0
``imagenetv2-mf``      ImageNetV2 matched-frequency, 10,000 images                   1
``imagenetv2-t07``     ImageNetV2 threshold-0.7, 10,000 images                       2
``imagenetv2-top``     ImageNetV2 top-images, 10,000 images                          3
=====================  ==========================================================  =========

The validation draw permutes each class's images (sorted by file name) with a generator seeded
by ``(SPLIT_SEED, class)`` and keeps the first ``round(0.2 n)``, clipped to ``[1, n - 1]`` (a
class with a single image goes to ``clean`` only); ``clean`` is the rest, so the two are disjoint
and together are the whole validation set. The ImageNetV2 sets are the ``natural``
family (:mod:`tasks.data.shifts.natural`).

On-disk layout (under the data root ``$ALSA_BENCH_HOME/data``)
--------------------------------------------------------------
::

    imagenet/val/<wnid>/*.JPEG                                   ImageNet validation images
    imagenet/imagenetv2-matched-frequency-format-val/<k>/*.jpeg  ImageNetV2 (k = class 0..999)
    imagenet/imagenetv2-threshold0.7-format-val/<k>/*.jpeg
    imagenet/imagenetv2-top-images-format-val/<k>/*.jpeg
    imagenet/weights/<torchvision weight files>                  tasks.models.backbones.pretrained

The validation folder uses the common ``val/<wnid>/`` layout (what torchvision's ``ImageNet``
builds from the devkit, without its ``meta.bin``): the label of ``<wnid>`` is its index among
the 1,000 ILSVRC-2012 wnids sorted (:data:`WNIDS`), which is torchvision's class index, so the
label of an image does not depend on which class folders are present. ImageNet cannot be
downloaded without an account: :func:`prepare_val` sorts the official flat
``ILSVRC2012_img_val.tar`` into that layout with the devkit's ground truth. ImageNetV2 and the
weights come from ``alsa-bench fetch imagenet`` (:data:`SOURCES`; the archives' SHA-256 as
published in TFDS's ``imagenet_v2`` checksums).

Samples and inputs
------------------
A split's samples are a ``str`` array of absolute JPEG paths; :func:`to_inputs` decodes a batch
with PIL exactly as torchvision's ``IMAGENET1K_V1`` transforms do: RGB, shorter side resized to
256, centre crop 224, scaled to ``[0, 1]``, normalised with the ImageNet mean and std. AlexNet
and MobileNetV2 resize bilinearly, EfficientNet-B0 bicubically (:func:`to_inputs_for`).

The dataset digest (:func:`stage`) covers a manifest of every image's relative path and size
(``imagenet/manifest.tsv``) and the weight files' bytes: hashing the 60,000 JPEGs (7.6 GB) at
every run would cost more than it protects, the ImageNetV2 archives being verified at fetch.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Final

import numpy as np
from PIL import Image

from tasks.data.pretrained_weights import WEIGHTS, remote_files, weights_path

from tasks.data.errors import DatasetUnavailableError
from tasks.data.files import atomic_target
from tasks.data.datasets._imagenet_classes import IMAGENET_CLASS_NAMES
from tasks.data.datasets._online import fetch_hint, require_files
from tasks.data.spec import DatasetSpec, RemoteFile, SourceSplits, TargetPool

__all__ = [
    "BACKBONE_INPUTS",
    "CLASS_NAMES",
    "DATASET_DIR",
    "NAME",
    "SOURCES",
    "SPECS",
    "V2_SETS",
    "WNIDS",
    "load_source",
    "load_target_pool",
    "prepare_val",
    "raw_files",
    "read_imagenet_val",
    "read_imagenet_v2",
    "split_val",
    "stage",
    "to_inputs",
    "to_inputs_for",
]

#: Registry position (after the offline suites).
ORDER: Final[int] = 260

NAME: Final[str] = "imagenet"
#: Folder of everything ImageNet, under the data root.
DATASET_DIR: Final[str] = "imagenet"
#: ImageNet validation images, ``<wnid>/*.JPEG``, relative to :data:`DATASET_DIR`.
VAL_DIR: Final[str] = "val"
#: Manifest of the images that the dataset digest covers, relative to :data:`DATASET_DIR`.
MANIFEST: Final[str] = "manifest.tsv"

N_CLASSES: Final[int] = 1000
#: Seed of the validation / clean draw.
SPLIT_SEED: Final[int] = 0
#: Share of each class's validation images that goes to ``val`` (10 of 50).
VAL_FRACTION: Final[float] = 0.2

#: torchvision's ``IMAGENET1K_V1`` preprocessing (``weights.transforms()``).
RESIZE: Final[int] = 256
CROP: Final[int] = 224
MEAN: Final[np.ndarray] = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD: Final[np.ndarray] = np.array([0.229, 0.224, 0.225], dtype=np.float32)
INPUT_SHAPE: Final[tuple[int, int, int]] = (3, CROP, CROP)
#: Resize filter of each backbone's published transform (default bilinear).
INTERPOLATION: Final[dict[str, str]] = {
    "alexnet": "bilinear", "mobilenet_v2": "bilinear", "efficientnet_b0": "bicubic",
}
_RESAMPLE: Final[dict[str, Image.Resampling]] = {
    "bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC,
}

#: Class names in label order (torchvision's weights metadata).
CLASS_NAMES: Final[tuple[str, ...]] = IMAGENET_CLASS_NAMES

_IMAGE_SUFFIXES: Final[frozenset[str]] = frozenset({".jpeg", ".jpg", ".png"})
_V2_URL: Final[str] = "https://huggingface.co/datasets/vaishaal/ImageNetV2/resolve/main/"

#: ImageNetV2 test sets: ``(split name, shift name, pool sub-population, folder, archive,
#: archive SHA-256, archive size)``; the folder is the archive's top-level folder.
V2_SETS: Final[tuple[tuple[str, str, int, str, str, str, int], ...]] = (
    ("imagenetv2-mf", "imagenetv2-matched-frequency", 1,
     "imagenetv2-matched-frequency-format-val", "imagenetv2-matched-frequency.tar.gz",
     "f0c37fdf925916b19ea1323cd9a2208cdb6959ba2c32eef2a7fc393835c9ca7c", 1_264_079_360),
    ("imagenetv2-t07", "imagenetv2-threshold-0.7", 2,
     "imagenetv2-threshold0.7-format-val", "imagenetv2-threshold0.7.tar.gz",
     "32142bfe998f9cfa4141be691f6a80eeb1e27b24bd532a668eb08c26d98897a2", 1_249_906_176),
    ("imagenetv2-top", "imagenetv2-top-images", 3,
     "imagenetv2-top-images-format-val", "imagenetv2-top-images.tar.gz",
     "85e4ace30f3f0d660152062254b8759dda66267b27f7ec0fd8d5768f1073a04b", 1_245_927_936),
)

#: What ``alsa-bench fetch imagenet`` downloads: the ImageNetV2 archives and the weights.
SOURCES: Final[tuple[RemoteFile, ...]] = (
    *(
        RemoteFile(url=_V2_URL + archive, filename=archive, sha256=sha, size=size,
                   dest=DATASET_DIR)
        for _, _, _, _, archive, sha, size in V2_SETS
    ),
    *remote_files(),
)

#: How to get the ImageNet validation images (``{root}`` is filled in).
VAL_HINT: Final[str] = (
    "ImageNet cannot be downloaded without an account: get ILSVRC2012_img_val.tar and "
    "ILSVRC2012_devkit_t12.tar.gz from https://image-net.org (ILSVRC 2012), then run "
    "`python -c \"from tasks.data.datasets.imagenet import prepare_val; prepare_val("
    "'ILSVRC2012_img_val.tar', 'ILSVRC2012_devkit_t12.tar.gz', '{root}')\"`, which sorts the "
    "50,000 images into {folder}/<wnid>/ (or copy such a folder there yourself)"
)

# The 1,000 ILSVRC-2012 class wnids in torchvision's label order (sorted; "n" + 8 digits).
_WNID_DIGITS: Final[str] = """
01440764 01443537 01484850 01491361 01494475 01496331 01498041 01514668 01514859 01518878
01530575 01531178 01532829 01534433 01537544 01558993 01560419 01580077 01582220 01592084
01601694 01608432 01614925 01616318 01622779 01629819 01630670 01631663 01632458 01632777
01641577 01644373 01644900 01664065 01665541 01667114 01667778 01669191 01675722 01677366
01682714 01685808 01687978 01688243 01689811 01692333 01693334 01694178 01695060 01697457
01698640 01704323 01728572 01728920 01729322 01729977 01734418 01735189 01737021 01739381
01740131 01742172 01744401 01748264 01749939 01751748 01753488 01755581 01756291 01768244
01770081 01770393 01773157 01773549 01773797 01774384 01774750 01775062 01776313 01784675
01795545 01796340 01797886 01798484 01806143 01806567 01807496 01817953 01818515 01819313
01820546 01824575 01828970 01829413 01833805 01843065 01843383 01847000 01855032 01855672
01860187 01871265 01872401 01873310 01877812 01882714 01883070 01910747 01914609 01917289
01924916 01930112 01943899 01944390 01945685 01950731 01955084 01968897 01978287 01978455
01980166 01981276 01983481 01984695 01985128 01986214 01990800 02002556 02002724 02006656
02007558 02009229 02009912 02011460 02012849 02013706 02017213 02018207 02018795 02025239
02027492 02028035 02033041 02037110 02051845 02056570 02058221 02066245 02071294 02074367
02077923 02085620 02085782 02085936 02086079 02086240 02086646 02086910 02087046 02087394
02088094 02088238 02088364 02088466 02088632 02089078 02089867 02089973 02090379 02090622
02090721 02091032 02091134 02091244 02091467 02091635 02091831 02092002 02092339 02093256
02093428 02093647 02093754 02093859 02093991 02094114 02094258 02094433 02095314 02095570
02095889 02096051 02096177 02096294 02096437 02096585 02097047 02097130 02097209 02097298
02097474 02097658 02098105 02098286 02098413 02099267 02099429 02099601 02099712 02099849
02100236 02100583 02100735 02100877 02101006 02101388 02101556 02102040 02102177 02102318
02102480 02102973 02104029 02104365 02105056 02105162 02105251 02105412 02105505 02105641
02105855 02106030 02106166 02106382 02106550 02106662 02107142 02107312 02107574 02107683
02107908 02108000 02108089 02108422 02108551 02108915 02109047 02109525 02109961 02110063
02110185 02110341 02110627 02110806 02110958 02111129 02111277 02111500 02111889 02112018
02112137 02112350 02112706 02113023 02113186 02113624 02113712 02113799 02113978 02114367
02114548 02114712 02114855 02115641 02115913 02116738 02117135 02119022 02119789 02120079
02120505 02123045 02123159 02123394 02123597 02124075 02125311 02127052 02128385 02128757
02128925 02129165 02129604 02130308 02132136 02133161 02134084 02134418 02137549 02138441
02165105 02165456 02167151 02168699 02169497 02172182 02174001 02177972 02190166 02206856
02219486 02226429 02229544 02231487 02233338 02236044 02256656 02259212 02264363 02268443
02268853 02276258 02277742 02279972 02280649 02281406 02281787 02317335 02319095 02321529
02325366 02326432 02328150 02342885 02346627 02356798 02361337 02363005 02364673 02389026
02391049 02395406 02396427 02397096 02398521 02403003 02408429 02410509 02412080 02415577
02417914 02422106 02422699 02423022 02437312 02437616 02441942 02442845 02443114 02443484
02444819 02445715 02447366 02454379 02457408 02480495 02480855 02481823 02483362 02483708
02484975 02486261 02486410 02487347 02488291 02488702 02489166 02490219 02492035 02492660
02493509 02493793 02494079 02497673 02500267 02504013 02504458 02509815 02510455 02514041
02526121 02536864 02606052 02607072 02640242 02641379 02643566 02655020 02666196 02667093
02669723 02672831 02676566 02687172 02690373 02692877 02699494 02701002 02704792 02708093
02727426 02730930 02747177 02749479 02769748 02776631 02777292 02782093 02783161 02786058
02787622 02788148 02790996 02791124 02791270 02793495 02794156 02795169 02797295 02799071
02802426 02804414 02804610 02807133 02808304 02808440 02814533 02814860 02815834 02817516
02823428 02823750 02825657 02834397 02835271 02837789 02840245 02841315 02843684 02859443
02860847 02865351 02869837 02870880 02871525 02877765 02879718 02883205 02892201 02892767
02894605 02895154 02906734 02909870 02910353 02916936 02917067 02927161 02930766 02939185
02948072 02950826 02951358 02951585 02963159 02965783 02966193 02966687 02971356 02974003
02977058 02978881 02979186 02980441 02981792 02988304 02992211 02992529 02999410 03000134
03000247 03000684 03014705 03016953 03017168 03018349 03026506 03028079 03032252 03041632
03042490 03045698 03047690 03062245 03063599 03063689 03065424 03075370 03085013 03089624
03095699 03100240 03109150 03110669 03124043 03124170 03125729 03126707 03127747 03127925
03131574 03133878 03134739 03141823 03146219 03160309 03179701 03180011 03187595 03188531
03196217 03197337 03201208 03207743 03207941 03208938 03216828 03218198 03220513 03223299
03240683 03249569 03250847 03255030 03259280 03271574 03272010 03272562 03290653 03291819
03297495 03314780 03325584 03337140 03344393 03345487 03347037 03355925 03372029 03376595
03379051 03384352 03388043 03388183 03388549 03393912 03394916 03400231 03404251 03417042
03424325 03425413 03443371 03444034 03445777 03445924 03447447 03447721 03450230 03452741
03457902 03459775 03461385 03467068 03476684 03476991 03478589 03481172 03482405 03483316
03485407 03485794 03492542 03494278 03495258 03496892 03498962 03527444 03529860 03530642
03532672 03534580 03535780 03538406 03544143 03584254 03584829 03590841 03594734 03594945
03595614 03598930 03599486 03602883 03617480 03623198 03627232 03630383 03633091 03637318
03642806 03649909 03657121 03658185 03661043 03662601 03666591 03670208 03673027 03676483
03680355 03690938 03691459 03692522 03697007 03706229 03709823 03710193 03710637 03710721
03717622 03720891 03721384 03724870 03729826 03733131 03733281 03733805 03742115 03743016
03759954 03761084 03763968 03764736 03769881 03770439 03770679 03773504 03775071 03775546
03776460 03777568 03777754 03781244 03782006 03785016 03786901 03787032 03788195 03788365
03791053 03792782 03792972 03793489 03794056 03796401 03803284 03804744 03814639 03814906
03825788 03832673 03837869 03838899 03840681 03841143 03843555 03854065 03857828 03866082
03868242 03868863 03871628 03873416 03874293 03874599 03876231 03877472 03877845 03884397
03887697 03888257 03888605 03891251 03891332 03895866 03899768 03902125 03903868 03908618
03908714 03916031 03920288 03924679 03929660 03929855 03930313 03930630 03933933 03935335
03937543 03938244 03942813 03944341 03947888 03950228 03954731 03956157 03958227 03961711
03967562 03970156 03976467 03976657 03977966 03980874 03982430 03983396 03991062 03992509
03995372 03998194 04004767 04005630 04008634 04009552 04019541 04023962 04026417 04033901
04033995 04037443 04039381 04040759 04041544 04044716 04049303 04065272 04067472 04069434
04070727 04074963 04081281 04086273 04090263 04099969 04111531 04116512 04118538 04118776
04120489 04125021 04127249 04131690 04133789 04136333 04141076 04141327 04141975 04146614
04147183 04149813 04152593 04153751 04154565 04162706 04179913 04192698 04200800 04201297
04204238 04204347 04208210 04209133 04209239 04228054 04229816 04235860 04238763 04239074
04243546 04251144 04252077 04252225 04254120 04254680 04254777 04258138 04259630 04263257
04264628 04265275 04266014 04270147 04273569 04275548 04277352 04285008 04286575 04296562
04310018 04311004 04311174 04317175 04325704 04326547 04328186 04330267 04332243 04335435
04336792 04344873 04346328 04347754 04350905 04355338 04355933 04356056 04357314 04366367
04367480 04370456 04371430 04371774 04372370 04376876 04380533 04389033 04392985 04398044
04399382 04404412 04409515 04417672 04418357 04423845 04428191 04429376 04435653 04442312
04443257 04447861 04456115 04458633 04461696 04462240 04465501 04467665 04476259 04479046
04482393 04483307 04485082 04486054 04487081 04487394 04493381 04501370 04505470 04507155
04509417 04515003 04517823 04522168 04523525 04525038 04525305 04532106 04532670 04536866
04540053 04542943 04548280 04548362 04550184 04552348 04553703 04554684 04557648 04560804
04562935 04579145 04579432 04584207 04589890 04590129 04591157 04591713 04592741 04596742
04597913 04599235 04604644 04606251 04612504 04613696 06359193 06596364 06785654 06794110
06874185 07248320 07565083 07579787 07583066 07584110 07590611 07613480 07614500 07615774
07684084 07693725 07695742 07697313 07697537 07711569 07714571 07714990 07715103 07716358
07716906 07717410 07717556 07718472 07718747 07720875 07730033 07734744 07742313 07745940
07747607 07749582 07753113 07753275 07753592 07754684 07760859 07768694 07802026 07831146
07836838 07860988 07871810 07873807 07875152 07880968 07892512 07920052 07930864 07932039
09193705 09229709 09246464 09256479 09288635 09332890 09399592 09421951 09428293 09468604
09472597 09835506 10148035 10565667 11879895 11939491 12057211 12144580 12267677 12620546
12768682 12985857 12998815 13037406 13040303 13044778 13052670 13054560 13133613 15075141
"""
#: The 1,000 ILSVRC-2012 wnids; the label of a class is its index here (torchvision's order).
WNIDS: Final[tuple[str, ...]] = tuple("n" + d for d in _WNID_DIGITS.split())
if len(WNIDS) != N_CLASSES or list(WNIDS) != sorted(set(WNIDS)):
    raise RuntimeError("WNIDS must be 1,000 distinct wnids in sorted order.")
_WNID_INDEX: Final[dict[str, int]] = {w: i for i, w in enumerate(WNIDS)}


def dataset_folder(root: Path | str) -> Path:
    """``<root>/imagenet`` (no IO)."""
    return Path(root) / DATASET_DIR


def raw_files(root: Path | str) -> list[Path]:
    """The manifest and the weight files that :func:`stage` checks, in that order (no IO)."""
    return [dataset_folder(root) / MANIFEST, *(weights_path(n, root) for n in WEIGHTS)]


def _images(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
    )


def _class_folders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_imagenet_val(root: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Every ImageNet validation image under ``<root>/imagenet/val/<wnid>/`` and its label.

    Parameters
    ----------
    root : Path or str
        Data root.

    Returns
    -------
    paths : numpy.ndarray
        ``str`` array of absolute paths, by label then file name.
    labels : numpy.ndarray
        ``int64`` torchvision class index of each image (index of its wnid in :data:`WNIDS`).

    Raises
    ------
    DatasetUnavailableError
        If the folder is missing (the message says how to make it).
    ValueError
        If a sub-folder is not an ILSVRC-2012 wnid, or no image is found.
    """
    root = Path(root)
    folder = dataset_folder(root) / VAL_DIR
    if not folder.is_dir():
        raise DatasetUnavailableError(
            f"dataset {NAME!r} is not on this machine: missing the ImageNet validation folder "
            f"{str(folder)!r}; "
            + VAL_HINT.format(root=str(root), folder=str(folder))
            + f"; ImageNetV2 and the weights come from `{fetch_hint(NAME)}`."
        )
    paths: list[str] = []
    labels: list[int] = []
    for sub in _class_folders(folder):
        if sub.name not in _WNID_INDEX:
            raise ValueError(
                f"ImageNet validation folder {str(folder)!r} must hold one sub-folder per "
                f"ILSVRC-2012 wnid (n01440764 ... n15075141); got {sub.name!r}."
            )
        files = _images(sub)
        paths += [str(p.resolve()) for p in files]
        labels += [_WNID_INDEX[sub.name]] * len(files)
    if not paths:
        raise ValueError(
            f"ImageNet validation folder {str(folder)!r} holds no images (.JPEG) in "
            f"<wnid>/ sub-folders."
        )
    return np.array(paths, dtype=str), np.array(labels, dtype=np.int64)


def read_imagenet_v2(root: Path | str, folder_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every image of one ImageNetV2 set, ``<root>/imagenet/<folder_name>/<class>/*.jpeg``.

    Parameters
    ----------
    root : Path or str
        Data root.
    folder_name : str
        The set's folder (e.g. ``imagenetv2-matched-frequency-format-val``).

    Returns
    -------
    paths, labels : numpy.ndarray
        ``str`` absolute paths (by class, then file name) and ``int64`` labels: the class
        folder's name, which ImageNetV2 gives as the torchvision class index ``0..999``.

    Raises
    ------
    DatasetUnavailableError
        If the folder is missing.
    ValueError
        If a class folder's name is not an integer 0..999, or the set holds no images.
    """
    root = Path(root)
    (folder,) = require_files(NAME, root, [dataset_folder(root) / folder_name])
    paths: list[str] = []
    labels: list[int] = []
    for sub in _class_folders(folder):
        if not re.fullmatch(r"\d+", sub.name) or int(sub.name) >= N_CLASSES:
            raise ValueError(
                f"ImageNetV2 folder {str(folder)!r} must hold class folders named 0..999; got "
                f"{sub.name!r}."
            )
        files = _images(sub)
        paths += [str(p.resolve()) for p in files]
        labels += [int(sub.name)] * len(files)
    order = np.argsort(np.array(labels, dtype=np.int64), kind="stable")
    if not paths:
        raise ValueError(f"ImageNetV2 folder {str(folder)!r} holds no images.")
    return np.array(paths, dtype=str)[order], np.array(labels, dtype=np.int64)[order]


def split_val(labels: np.ndarray, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Seeded, class-stratified draw of the validation subset; the rest is ``clean``.

    Parameters
    ----------
    labels : numpy.ndarray
        ``(n,)`` labels of the ImageNet validation images (in :func:`read_imagenet_val` order).
    seed : int, default :data:`SPLIT_SEED`
        Seed of the draw.

    Returns
    -------
    val_idx, clean_idx : numpy.ndarray
        Sorted, disjoint ``int64`` indices covering every image: per class ``c`` with ``n``
        images, ``min(n - 1, max(1, round(0.2 n)))`` drawn with a generator seeded by
        ``(seed, c)`` go to validation (none when ``n == 1``).
    """
    labels = np.asarray(labels, dtype=np.int64)
    val_parts: list[np.ndarray] = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        n = members.size
        k = min(n - 1, max(1, int(round(VAL_FRACTION * n))))
        val_parts.append(np.random.default_rng([seed, int(c)]).permutation(members)[:k])
    val_idx = np.sort(np.concatenate(val_parts)) if val_parts else np.zeros(0, np.int64)
    clean_idx = np.setdiff1d(np.arange(labels.size), val_idx)
    return val_idx.astype(np.int64), clean_idx.astype(np.int64)


def _decode(path: str, resample: Image.Resampling) -> np.ndarray:
    with Image.open(path) as img:
        img = img.convert("RGB")
        w, h = img.size
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = RESIZE, int(RESIZE * long / short)
        new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
        img = img.resize((new_w, new_h), resample)
    top = int(round((new_h - CROP) / 2.0))
    left = int(round((new_w - CROP) / 2.0))
    crop = np.asarray(img.crop((left, top, left + CROP, top + CROP)), dtype=np.float32)
    return ((crop / np.float32(255.0) - MEAN) / STD).transpose(2, 0, 1)


def to_inputs(paths: np.ndarray | Iterable[str], interpolation: str = "bilinear") -> np.ndarray:
    """Decode JPEG files into normalised model inputs, as torchvision's ``IMAGENET1K_V1``.

    Each image: RGB; shorter side resized to 256 (longer side ``int(256 long / short)``);
    centre crop 224 (offsets ``round((size - 224) / 2)``); ``x / 255``; ``(x - mean) / std``
    with mean ``(0.485, 0.456, 0.406)`` and std ``(0.229, 0.224, 0.225)``.

    Parameters
    ----------
    paths : array of str
        Image files.
    interpolation : {"bilinear", "bicubic"}, default "bilinear"
        Resize filter (EfficientNet-B0's weights use bicubic).

    Returns
    -------
    numpy.ndarray
        ``float32`` ``(n, 3, 224, 224)``.

    Raises
    ------
    ValueError
        If ``interpolation`` is unknown or a file is not a readable image (naming it).
    """
    if interpolation not in _RESAMPLE:
        raise ValueError(
            f"interpolation must be one of {', '.join(_RESAMPLE)}; got {interpolation!r}."
        )
    resample = _RESAMPLE[interpolation]
    items = [str(p) for p in np.asarray(paths, dtype=object).reshape(-1)]
    out = np.empty((len(items), *INPUT_SHAPE), dtype=np.float32)
    for i, path in enumerate(items):
        try:
            out[i] = _decode(path, resample)
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise ValueError(
                f"image {path!r} (sample {i}) is not a readable image: {exc}."
            ) from exc
    return out


def to_inputs_for(backbone: str) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`to_inputs` with the resize filter of ``backbone``'s published transform.

    Parameters
    ----------
    backbone : str
        Backbone key; one not in :data:`INTERPOLATION` gets bilinear.

    Returns
    -------
    callable
        ``paths -> float32 (n, 3, 224, 224)``.
    """
    return partial(to_inputs, interpolation=INTERPOLATION.get(backbone, "bilinear"))


#: Backbones whose published transform differs from :func:`to_inputs` (bilinear), with theirs.
BACKBONE_INPUTS: Final[Mapping[str, Callable[[np.ndarray], np.ndarray]]] = MappingProxyType({
    name: to_inputs_for(name) for name, mode in INTERPOLATION.items() if mode != "bilinear"
})


def _manifest_text(root: Path, groups: list[np.ndarray]) -> str:
    base = dataset_folder(root).resolve()
    lines = []
    for paths in groups:
        for p in paths:
            path = Path(p)
            lines.append(f"{path.relative_to(base).as_posix()}\t{path.stat().st_size}\n")
    return "".join(sorted(lines))


def stage(root: Path | str) -> list[Path]:
    """Check that ImageNet, ImageNetV2 and the weights are there; write the image manifest.

    Parameters
    ----------
    root : Path or str
        Data root.

    Returns
    -------
    list of Path
        :func:`raw_files`: the manifest (relative path and size of every image read) and the
        weight files.

    Raises
    ------
    DatasetUnavailableError
        One line naming the first missing folder or file and how to get it.
    ValueError
        If a folder does not have the layout of the module docstring.

    Notes
    -----
    The weight files are only checked to exist here; their SHA-256 is verified when a
    backbone loads them (:func:`tasks.models.backbones.pretrained.build_pretrained`).
    """
    root = Path(root)
    val_paths, _ = read_imagenet_val(root)
    v2 = [read_imagenet_v2(root, folder)[0] for _, _, _, folder, *_ in V2_SETS]
    for name in WEIGHTS:
        path = weights_path(name, root)
        if not path.is_file():
            raise DatasetUnavailableError(
                f"dataset {NAME!r} is not on this machine: missing the {name} weights "
                f"{str(path)!r}; download them once with `{fetch_hint(NAME)}` (or from "
                f"{WEIGHTS[name].url} into that folder), or point ALSA_BENCH_HOME at a state "
                f"folder that has them."
            )
    manifest = raw_files(root)[0]
    text = _manifest_text(root, [val_paths, *v2])
    if not manifest.is_file() or manifest.read_text() != text:
        with atomic_target(manifest) as tmp:
            tmp.write_text(text)
    return raw_files(root)


def load_source(root: Path | str) -> SourceSplits:
    """No training images; validation = the seeded 20 % of the ImageNet validation set."""
    paths, labels = read_imagenet_val(root)
    val_idx, _ = split_val(labels)
    return SourceSplits(
        train_x=np.zeros(0, dtype=paths.dtype), train_y=np.zeros(0, dtype=np.int64),
        val_x=paths[val_idx], val_y=labels[val_idx],
    )


def load_target_pool(root: Path | str) -> TargetPool:
    """``clean`` (the other 80 %, sub-population 0), then every ImageNetV2 set (1, 2, 3)."""
    paths, labels = read_imagenet_val(root)
    _, clean_idx = split_val(labels)
    samples, targets, groups = [paths[clean_idx]], [labels[clean_idx]], [np.zeros(clean_idx.size)]
    for _, _, group, folder, *_ in V2_SETS:
        p, y = read_imagenet_v2(root, folder)
        samples.append(p)
        targets.append(y)
        groups.append(np.full(y.size, group))
    width = max(s.dtype.itemsize for s in samples) // 4
    return TargetPool(
        samples=np.concatenate([s.astype(f"<U{width}") for s in samples]),
        labels=np.concatenate(targets).astype(np.int64),
        n_classes=N_CLASSES,
        subgroups=np.concatenate(groups).astype(np.int64),
        source_subgroups=(0,),
        novel_subgroups=tuple(group for _, _, group, *_ in V2_SETS),
    )


def _ground_truth(devkit: Path) -> list[str]:
    """wnid of every validation image (``ILSVRC2012_val_00000001.JPEG`` first), from the devkit."""
    import scipy.io

    prefix = "ILSVRC2012_devkit_t12/data/"
    try:
        with tarfile.open(devkit, "r:*") as tar:
            meta_bytes = tar.extractfile(prefix + "meta.mat").read()
            truth = tar.extractfile(prefix + "ILSVRC2012_validation_ground_truth.txt").read()
    except (OSError, KeyError, AttributeError, tarfile.TarError) as exc:
        raise ValueError(
            f"devkit {str(devkit)!r} must be ILSVRC2012_devkit_t12.tar.gz with "
            f"{prefix}meta.mat and {prefix}ILSVRC2012_validation_ground_truth.txt ({exc})."
        ) from exc
    synsets = scipy.io.loadmat(io.BytesIO(meta_bytes), squeeze_me=True)["synsets"]
    leaves = np.asarray(synsets["num_children"]).astype(int) == 0
    id_to_wnid = {
        int(i): str(w)
        for i, w in zip(np.asarray(synsets["ILSVRC2012_ID"])[leaves],
                        np.asarray(synsets["WNID"])[leaves], strict=True)
    }
    out = []
    for line_no, line in enumerate(truth.decode("ascii").split(), start=1):
        wnid = id_to_wnid.get(int(line))
        if wnid not in _WNID_INDEX:
            raise ValueError(
                f"devkit {str(devkit)!r}: ground-truth line {line_no} names class id {line}, "
                f"which is not one of the 1,000 ILSVRC-2012 classes of meta.mat."
            )
        out.append(wnid)
    return out


def prepare_val(val_tar: Path | str, devkit: Path | str, root: Path | str) -> Path:
    """Sort the official flat ``ILSVRC2012_img_val.tar`` into ``<root>/imagenet/val/<wnid>/``.

    Image ``ILSVRC2012_val_{i:08d}.JPEG`` goes to the wnid of line ``i`` of the devkit's
    ``ILSVRC2012_validation_ground_truth.txt``, whose class ids ``meta.mat`` maps to wnids
    (what torchvision's ``ImageNet`` does). Every image is written into a staging folder beside
    the destination, which is renamed to ``val`` only when all images are out: an interrupted
    run leaves no ``val`` folder that looks complete.

    Parameters
    ----------
    val_tar : Path or str
        ``ILSVRC2012_img_val.tar`` (50,000 JPEGs at its top level).
    devkit : Path or str
        ``ILSVRC2012_devkit_t12.tar.gz``.
    root : Path or str
        Data root.

    Returns
    -------
    Path
        The ``val`` folder.

    Raises
    ------
    FileExistsError
        If the ``val`` folder exists already.
    ValueError
        If the archive holds a member that is not a plain ``ILSVRC2012_val_<8 digits>.JPEG``
        file, an image the ground truth does not cover, or fewer images than the ground truth.
    """
    target = dataset_folder(root) / VAL_DIR
    if target.exists():
        raise FileExistsError(f"{str(target)!r} exists already; delete it to prepare it again.")
    wnids = _ground_truth(Path(devkit))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".val-staging-", dir=target.parent))
    try:
        seen = 0
        with tarfile.open(val_tar, "r:*") as tar:
            for member in tar:
                found = re.fullmatch(r"ILSVRC2012_val_(\d{8})\.JPEG", member.name)
                if not member.isfile() or found is None:
                    raise ValueError(
                        f"{str(val_tar)!r}: member {member.name!r} is not a plain file named "
                        f"ILSVRC2012_val_<8 digits>.JPEG; is it ILSVRC2012_img_val.tar?"
                    )
                index = int(found.group(1))
                if not 1 <= index <= len(wnids):
                    raise ValueError(
                        f"{str(val_tar)!r}: image {member.name!r} has no ground truth (the "
                        f"devkit covers images 1..{len(wnids)})."
                    )
                dest = staging / wnids[index - 1] / member.name
                dest.parent.mkdir(exist_ok=True)
                with tar.extractfile(member) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
                seen += 1
        if seen != len(wnids):
            raise ValueError(
                f"{str(val_tar)!r} holds {seen} images; the devkit's ground truth lists "
                f"{len(wnids)}. The archive is truncated or not ILSVRC2012_img_val.tar."
            )
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME,
        suite="imagenet",
        description="ImageNet val (seeded 10k val / 40k clean) -> ImageNetV2; pretrained models",
        modality="image",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "natural"),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        to_inputs=to_inputs,
        online=True,
        paper_row="ImageNet / ImageNetV2 (Table 1)",
        backbones=tuple(WEIGHTS),
        sources=SOURCES,
        natural_targets=tuple((split, shift, group) for split, shift, group, *_ in V2_SETS),
        backbone_inputs=BACKBONE_INPUTS,
    ),
)
