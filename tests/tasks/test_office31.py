"""``office31`` on a tiny copy of the release tree: ``<domain>/images/<class>/frame_NNNN.jpg``.

All 31 class folders exist in every domain (as in the release), each with a few small JPEGs of
varied sizes and orientations; inputs are checked against torchvision's own transform chain.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tasks.data.datasets import get_dataset_spec, office31
from tasks.data.errors import DatasetUnavailableError
from tasks.data.datasets._vision import IMAGENET_MEAN, IMAGENET_STD, photos_to_inputs
from tasks.data.targets import generate_split, target_splits

#: Images per class of each domain in the fake tree.
PER_CLASS = {"amazon": 5, "dslr": 1, "webcam": 2}


def write_fake_office31(base: Path, seed: int = 0) -> dict[str, list[tuple[Path, int]]]:
    """Write ``<base>/<domain>/images/<class>/frame_000k.jpg``; return (path, label) per domain."""
    rng = np.random.default_rng(seed)
    written: dict[str, list[tuple[Path, int]]] = {}
    for domain, k in PER_CLASS.items():
        written[domain] = []
        for label, name in enumerate(office31.CLASS_NAMES):
            folder = base / domain / "images" / name
            folder.mkdir(parents=True, exist_ok=True)
            for j in range(k):
                w, h = (int(rng.integers(12, 40)), int(rng.integers(12, 40)))
                img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
                path = folder / f"frame_{j + 1:04d}.jpg"
                Image.fromarray(img, mode="RGB").save(path, quality=90)
                written[domain].append((path.resolve(), label))
    return written


@pytest.fixture()
def tree(tmp_path: Path) -> tuple[Path, dict[str, list[tuple[Path, int]]]]:
    return tmp_path, write_fake_office31(tmp_path / "office31")


def test_registry_entry():
    spec = get_dataset_spec("office31")
    assert spec.suite == "office31" and spec.online and spec.n_classes == 31
    assert spec.class_names == tuple(sorted(spec.class_names))
    assert spec.backbones == ("resnet18",) and spec.input_shape == (3, 224, 224)
    recipe = dict(spec.recipes["resnet18"])
    assert recipe["optimizer"] == "adam" and recipe["lr"] == 1e-3
    assert (recipe["batch_size"], recipe["epochs"], recipe["patience"]) == (64, 300, 5)
    (source,) = spec.sources
    assert source.filename == "domain_adaptation_images.tar.gz" and source.dest == "office31"
    assert source.md5 == "1b536d114869a5a8aa4580b89e9758fb"


def test_domain_images_follow_imagefolder_order(tree):
    from torchvision.datasets import ImageFolder

    root, written = tree
    for domain in office31.DOMAINS:
        paths, labels = office31.domain_images(root, domain)
        assert paths.dtype.kind == "U" and labels.dtype == np.int64
        ref = ImageFolder(str(root / "office31" / domain / "images"))
        assert ref.classes == list(office31.CLASS_NAMES)
        assert [Path(p) for p in paths] == [Path(p).resolve() for p, _ in ref.samples]
        np.testing.assert_array_equal(labels, [y for _, y in ref.samples])
        assert sorted(zip(map(Path, paths), labels)) == sorted(written[domain])


def test_source_is_a_seeded_80_20_split_of_amazon(tree):
    root, written = tree
    src = get_dataset_spec("office31").load_source(root)
    # 5 images per class: round(0.2 * 5) = 1 for validation, 4 for training
    np.testing.assert_array_equal(np.bincount(src.train_y, minlength=31), [4] * 31)
    np.testing.assert_array_equal(np.bincount(src.val_y, minlength=31), [1] * 31)
    assert set(src.train_x).isdisjoint(src.val_x)
    amazon = {str(p): y for p, y in written["amazon"]}
    assert set(src.train_x) | set(src.val_x) == set(amazon)
    assert all(amazon[p] == y for p, y in zip(src.train_x, src.train_y))
    assert all(amazon[p] == y for p, y in zip(src.val_x, src.val_y))
    again = get_dataset_spec("office31").load_source(root)
    np.testing.assert_array_equal(again.val_x, src.val_x)


def test_targets_are_dslr_and_webcam(tree):
    root, written = tree
    pool = get_dataset_spec("office31").load_target_pool(root)
    n_dslr, n_webcam = 31 * PER_CLASS["dslr"], 31 * PER_CLASS["webcam"]
    np.testing.assert_array_equal(pool.subgroups, [1] * n_dslr + [2] * n_webcam)
    assert pool.n_classes == 31
    splits = target_splits("office31")
    assert [(s.name, s.shift_family, s.shift) for s in splits] == [
        ("dslr", "domain", "amazon-to-dslr"), ("webcam", "domain", "amazon-to-webcam"),
    ]
    for split, domain in zip(splits, ("dslr", "webcam")):
        x, y = generate_split("office31", split, pool)
        assert sorted(zip(map(Path, x), y)) == sorted(written[domain])


def test_to_inputs_matches_torchvision_transforms(tree):
    import torch
    from torchvision import transforms

    root, _ = tree
    paths, _ = office31.domain_images(root, "webcam")
    batch = paths[:6]
    out = get_dataset_spec("office31").to_inputs(batch)
    assert out.shape == (6, 3, 224, 224) and out.dtype == np.float32
    chain = transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])
    ref = torch.stack([chain(Image.open(p).convert("RGB")) for p in batch]).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_nested_archive_folder_is_read(tmp_path: Path):
    written = write_fake_office31(tmp_path / "office31" / "domain_adaptation_images")
    paths, labels = office31.domain_images(tmp_path, "dslr")
    assert sorted(zip(map(Path, paths), labels)) == sorted(written["dslr"])
    assert all(p.is_file() for p in get_dataset_spec("office31").stage(tmp_path))


def test_stage_lists_every_image(tree):
    root, written = tree
    files = get_dataset_spec("office31").stage(root)
    assert files == office31.raw_files(root)
    assert sorted(files) == sorted(p for d in written.values() for p, _ in d)


def test_missing_data_gives_one_line_fetch_message(tmp_path: Path):
    assert not all(p.is_file() for p in office31.raw_files(tmp_path))
    spec = get_dataset_spec("office31")
    for call in (spec.stage, spec.load_source, spec.load_target_pool):
        with pytest.raises(DatasetUnavailableError) as info:
            call(tmp_path)
        assert "\n" not in str(info.value) and "alsa-bench fetch office31" in str(info.value)


def test_missing_domain_is_named(tree):
    import shutil

    root, _ = tree
    shutil.rmtree(root / "office31" / "webcam")
    with pytest.raises(DatasetUnavailableError, match=r"webcam.*alsa-bench fetch office31"):
        get_dataset_spec("office31").stage(root)
    assert not all(p.is_file() for p in office31.raw_files(root))


def test_foreign_class_folders_are_refused(tree):
    root, _ = tree
    (root / "office31" / "dslr" / "images" / "bicycle").mkdir()
    with pytest.raises(ValueError, match=r"exactly the 31 class folders.*unexpected \['bicycle'\]"):
        office31.domain_images(root, "dslr")
    (root / "office31" / "amazon" / "images" / "mug").rename(root / "office31" / "amazon" / "m")
    with pytest.raises(ValueError, match=r"missing \['mug'\]"):
        get_dataset_spec("office31").load_source(root)


def test_corrupt_or_vanished_image_names_the_file(tree):
    root, written = tree
    bad = written["dslr"][3][0]
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(ValueError, match=rf"{bad.name}.*cannot be decoded"):
        photos_to_inputs(np.asarray([str(written["dslr"][0][0]), str(bad)]))
    bad.unlink()
    with pytest.raises(DatasetUnavailableError, match=rf"{bad.name}.*does not exist"):
        photos_to_inputs(np.asarray([str(bad)]))
    with pytest.raises(ValueError, match="1-dimensional array of image file paths"):
        photos_to_inputs(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="unknown|must be one of"):
        office31.domain_images(root, "caltech")


def test_own_domain_family_wins_over_the_registry_one():
    from tasks.data.targets import family_implementation

    family = family_implementation("domain", "image", "office31")
    assert family is office31.DOMAIN_FAMILY
    assert family.module == "tasks.data.families"  # test_set_family's generator
    assert [s.name for s in family.splits_of("office31")] == ["dslr", "webcam"]
    assert family_implementation("domain", "image", "fmnist").module == "tasks.data.shifts.domain"
