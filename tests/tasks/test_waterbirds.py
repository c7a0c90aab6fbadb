"""``waterbirds`` on a tiny fake WILDS release, read through ``wilds`` 2.0.0 itself.

The fake is the layout ``wilds.datasets.waterbirds_dataset.WaterbirdsDataset`` (version 1.0)
reads: ``<root>/waterbirds_v1.0/RELEASE_v1.0.txt`` (without it wilds would try to download),
``metadata.csv`` with columns ``img_id,img_filename,y,split,place,place_filename`` and the JPEGs
under CUB-style class folders named by ``img_filename``.
"""

from __future__ import annotations

import csv
import socket
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tasks.data.datasets import get_dataset_spec, waterbirds
from tasks.data.errors import DatasetUnavailableError
from tasks.data.targets import generate_split, target_splits

#: Images per (split, y, place) of the fake.
PER_GROUP = {0: (4, 1, 1, 3), 1: (2, 2, 2, 2), 2: (3, 2, 1, 4)}
COLUMNS = ("img_id", "img_filename", "y", "split", "place", "place_filename")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the Waterbirds loader must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def write_fake_waterbirds(root: Path, seed: int = 0) -> list[dict]:
    """Write ``<root>/waterbirds_v1.0``; return the metadata rows (file order)."""
    rng = np.random.default_rng(seed)
    folder = root / "waterbirds_v1.0"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "RELEASE_v1.0.txt").write_text("Waterbirds v1.0 (fake, for tests)\n")
    rows = []
    for split, counts in PER_GROUP.items():
        for group, k in enumerate(counts):
            y, place = divmod(group, 2)
            for _ in range(k):
                rows.append({"split": split, "y": y, "place": place})
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    for i, row in enumerate(rows, start=1):
        species = "001.Black_footed_Albatross" if row["y"] else "100.Brown_Pelican"
        name = f"{species}/Bird_{i:04d}_{i}.jpg"
        (folder / species).mkdir(exist_ok=True)
        img = rng.integers(0, 256, size=(int(rng.integers(20, 50)), 30, 3), dtype=np.uint8)
        Image.fromarray(img, mode="RGB").save(folder / name)
        row.update(img_id=i, img_filename=name, place_filename=f"/b/bamboo_forest/{i:08d}.jpg")
    with open(folder / "metadata.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


@pytest.fixture()
def release(tmp_path: Path) -> tuple[Path, list[dict]]:
    return tmp_path, write_fake_waterbirds(tmp_path)


def _expected(root: Path, rows: list[dict], split: int) -> tuple[list[str], list[int], list[int]]:
    chosen = [r for r in rows if r["split"] == split]
    paths = [str((root / "waterbirds_v1.0" / r["img_filename"]).resolve()) for r in chosen]
    return paths, [r["y"] for r in chosen], [r["place"] for r in chosen]


def test_registry_entry():
    spec = get_dataset_spec("waterbirds")
    assert spec.suite == "waterbirds" and spec.online and spec.n_classes == 2
    assert spec.class_names == ("landbird", "waterbird")
    assert spec.backbones == ("resnet18",) and spec.input_shape == (3, 224, 224)
    recipe = dict(spec.recipes["resnet18"])
    assert (recipe["optimizer"], recipe["lr"], recipe["batch_size"], recipe["patience"]) == (
        "adam", 1e-3, 200, 5,
    )
    assert spec.sources == ()  # WILDS publishes no checksum; none is invented


def test_download_url_is_the_one_wilds_uses():
    from wilds.datasets.waterbirds_dataset import WaterbirdsDataset

    entry = WaterbirdsDataset._versions_dict[waterbirds.VERSION]
    assert entry["download_url"] == waterbirds.WILDS_URL
    assert entry["compressed_size"] is None  # nothing published to pin


def test_source_is_wilds_train_and_val(release):
    root, rows = release
    src = get_dataset_spec("waterbirds").load_source(root)
    paths, y, _ = _expected(root, rows, 0)
    assert list(src.train_x) == paths and src.train_y.tolist() == y
    paths, y, _ = _expected(root, rows, 1)
    assert list(src.val_x) == paths and src.val_y.tolist() == y
    assert src.train_y.dtype == np.int64 and src.train_x.dtype.kind == "U"
    assert set(src.train_x).isdisjoint(src.val_x)


def test_pool_groups_and_subpopulation_splits(release):
    root, rows = release
    pool = get_dataset_spec("waterbirds").load_target_pool(root)
    paths, y, place = _expected(root, rows, 2)
    assert list(pool.samples) == paths and pool.labels.tolist() == y
    np.testing.assert_array_equal(pool.subgroups, 2 * np.asarray(y) + np.asarray(place))

    splits = target_splits("waterbirds")
    assert [s.name for s in splits] == [
        "subpop-test", "subpop-landbird-land", "subpop-landbird-water",
        "subpop-waterbird-land", "subpop-waterbird-water",
    ]
    assert {s.shift_family for s in splits} == {"subpopulation"}
    x, labels = generate_split("waterbirds", splits[0], pool)
    assert list(x) == paths and labels.tolist() == y
    for group, split in enumerate(splits[1:]):
        x, labels = generate_split("waterbirds", split, pool)
        want = [(p, yy) for p, yy, pl in zip(paths, y, place) if 2 * yy + pl == group]
        assert list(zip(x, labels.tolist())) == want
        assert len(want) == PER_GROUP[2][group]


def test_to_inputs_shape_and_normalisation(release):
    import torch
    from torchvision import transforms

    root, _ = release
    src = get_dataset_spec("waterbirds").load_source(root)
    out = get_dataset_spec("waterbirds").to_inputs(src.val_x[:3])
    assert out.shape == (3, 3, 224, 224) and out.dtype == np.float32
    chain = transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ])
    ref = torch.stack([chain(Image.open(p).convert("RGB")) for p in src.val_x[:3]]).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_stage_lists_index_files_and_images(release):
    root, rows = release
    files = get_dataset_spec("waterbirds").stage(root)
    folder = root / "waterbirds_v1.0"
    assert files[:2] == [folder / "RELEASE_v1.0.txt", folder / "metadata.csv"]
    assert files[2:] == [folder / r["img_filename"] for r in rows]


@pytest.mark.parametrize("victim", ["RELEASE_v1.0.txt", "metadata.csv", None])
def test_missing_data_gives_one_line_message(tmp_path: Path, victim: str | None):
    if victim is not None:
        write_fake_waterbirds(tmp_path)
        (tmp_path / "waterbirds_v1.0" / victim).unlink()
    spec = get_dataset_spec("waterbirds")
    assert not all(p.is_file() for p in spec.raw_files(tmp_path))
    for call in (spec.stage, spec.load_source, spec.load_target_pool):
        with pytest.raises(DatasetUnavailableError) as info:
            call(tmp_path)
        message = str(info.value)
        assert "\n" not in message and "alsa-bench fetch waterbirds" in message
        assert "wilds.get_dataset('waterbirds'" in message


def test_missing_image_is_named(release):
    root, rows = release
    gone = root / "waterbirds_v1.0" / rows[5]["img_filename"]
    gone.unlink()
    with pytest.raises(DatasetUnavailableError, match=rf"{Path(gone.name).stem}.*fetch waterbirds"):
        get_dataset_spec("waterbirds").load_source(root)


@pytest.mark.parametrize(
    ("column", "value", "what"),
    [("y", 2, "0 \\(landbird\\) or 1"), ("place", "sea", "0 \\(land\\) or 1"),
     ("split", 3, "0 \\(train\\), 1 \\(val\\) or 2")],
)
def test_codes_out_of_range_name_the_row(release, column, value, what):
    root, rows = release
    rows[7][column] = value
    with open(root / "waterbirds_v1.0" / "metadata.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ValueError, match=rf"data row 7 .*column {column} must be {what}"):
        get_dataset_spec("waterbirds").load_source(root)


def test_corrupt_image_names_the_file(release):
    root, _ = release
    src = get_dataset_spec("waterbirds").load_source(root)
    Path(src.train_x[2]).write_bytes(b"GIF89a broken")
    with pytest.raises(ValueError, match=rf"{Path(src.train_x[2]).name}.*cannot be decoded"):
        get_dataset_spec("waterbirds").to_inputs(src.train_x[:3])
