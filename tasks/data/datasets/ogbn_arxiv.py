"""ogbn-arxiv: fetch OGB's release, and read the citation graph without unpickling anything.

On-disk layout
--------------
OGB (``ogb`` 1.3.6, ``ogb/nodeproppred/master.csv``: ``add_inverse_edge`` False, node features,
no edge features, additional node file ``node_year``, split ``time``) unpacks ``arxiv.zip`` into
``<root>/ogbn_arxiv/``::

    RELEASE_v1.txt
    raw/edge.csv.gz              E rows "source,target" (citing -> cited), no header
    raw/node-feat.csv.gz         N rows of 128 floats, no header
    raw/node-label.csv.gz        N rows, one label in [0, 40), no header
    raw/node_year.csv.gz         N rows, one publication year, no header
    raw/num-node-list.csv.gz     one row: N
    raw/num-edge-list.csv.gz     one row: E
    split/time/{train,valid,test}.csv.gz   node ids, one per row (not used here)
    mapping/labelidx2arxivcategeory.csv.gz header "label idx,arxiv category"; 40 rows
    mapping/nodeidx2paperid.csv.gz         header "node idx,paper id"
    processed/geometric_data_processed.pt  PyG's pickle (never read here)

Fetching
--------
``alsa-bench fetch ogbn-arxiv`` (:mod:`tasks.data.fetch`) downloads the release where ogb's own
master table says it lives (:func:`ogb_release`: the ``url`` and ``download_name`` of
``ogb/nodeproppred/master.csv``, read as ``ogb.nodeproppred.NodePropPredDataset`` reads it),
checks it against the pinned :data:`ARCHIVE_SHA256`, unpacks ``arxiv/`` into ``<root>/ogbn_arxiv``
(the rename ogb itself does after ``extract_zip``) and then runs this module's reader over it
(:func:`verify_fetched`), which also writes the parsed-array cache. ogb's download function
(``ogb.utils.url.download_url``) is not used: it cannot resume, verifies nothing, has no
timeout and always draws a tqdm bar; nor is ogb's processing step (it writes and re-reads a
pickle). ogb is imported only by :func:`ogb_release`, with its PyPI version check turned off.

Why not ``PygNodePropPredDataset``
----------------------------------
Its reload calls ``torch.load`` without ``weights_only``, which torch >= 2.6 refuses, and the
only way around that (``weights_only=False``) unpickles a file, i.e. runs whatever code it holds.
This module therefore reads the raw CSV files with pandas, exactly as
``ogb.io.read_graph_raw.read_csv_graph_raw`` does; its reader never imports ogb, torch or
pickle (only :func:`ogb_release`, for the fetch, imports ogb).

Cache
-----
Parsing 1.2M edges and 169k x 128 features from CSV takes a while, so the parsed arrays are kept
in ``<root>/ogbn_arxiv/alsa_bench_graph.npz`` (written atomically with :func:`numpy.savez`, read
with ``allow_pickle=False``), keyed by the SHA-256 of the raw files. A cache that is unreadable,
stale or inconsistent is ignored and rebuilt.
"""

from __future__ import annotations

import gzip
import logging
import sys
from pathlib import Path
from typing import Final, NamedTuple

import numpy as np
import pandas as pd

from tasks.data.errors import DatasetUnavailableError
from tasks.data.graphs import Graph
from tasks.data.files import atomic_target, files_digest
from tasks.data.spec import DatasetSpec, RemoteFile, SourceSplits, TargetPool
from tasks.data.temporal import temporal_source_splits, temporal_target_pool

logger = logging.getLogger(__name__)

__all__ = [
    "ARCHIVE_FOLDERS",
    "ARCHIVE_SHA256",
    "ARCHIVE_URL",
    "CACHE_NAME",
    "CLASS_NAMES",
    "DATASET_DIR",
    "FETCH_HINT",
    "N_CLASSES",
    "N_FEATURES",
    "OGBN_ARXIV_FILES",
    "OGB_NAME",
    "SOURCES",
    "OgbRelease",
    "cache_file",
    "dataset_folder",
    "fetch_sources",
    "load_graph",
    "ogb_release",
    "raw_files",
    "read_class_names",
    "stage_ogbn_arxiv",
    "verify_fetched",
]

#: Folder OGB unpacks ogbn-arxiv into, under the data root.
DATASET_DIR: Final[str] = "ogbn_arxiv"

#: Raw files :func:`load_graph` reads, relative to ``<root>/ogbn_arxiv``.
OGBN_ARXIV_FILES: Final[tuple[str, ...]] = (
    "raw/edge.csv.gz",
    "raw/node-feat.csv.gz",
    "raw/node-label.csv.gz",
    "raw/node_year.csv.gz",
    "raw/num-node-list.csv.gz",
    "raw/num-edge-list.csv.gz",
)

#: Columns of each raw file (no header in any of them).
_COLUMNS: Final[dict[str, int]] = {
    "raw/edge.csv.gz": 2,
    "raw/node-feat.csv.gz": 128,
    "raw/node-label.csv.gz": 1,
    "raw/node_year.csv.gz": 1,
    "raw/num-node-list.csv.gz": 1,
    "raw/num-edge-list.csv.gz": 1,
}

#: Label-index to category file of the release (optional; checked against CLASS_NAMES).
MAPPING_FILE: Final[str] = "mapping/labelidx2arxivcategeory.csv.gz"

#: Parsed-array cache, relative to ``<root>/ogbn_arxiv``.
CACHE_NAME: Final[str] = "alsa_bench_graph.npz"
_CACHE_VERSION: Final[int] = 1

N_CLASSES: Final[int] = 40
N_FEATURES: Final[int] = 128

#: The 40 arXiv CS categories, in label order (the release's ``labelidx2arxivcategeory``).
CLASS_NAMES: Final[tuple[str, ...]] = tuple(
    f"arxiv cs {code}"
    for code in (
        "na mm lo cy cr dc hc ce ni cc ai ma gl ne sc ar cv gr et sy "
        "cg oh pl se lg sd si ro it pf cl ir ms fl ds os gt db dl dm"
    ).split()
)

#: How to get the files (``{root}`` is filled in).
FETCH_HINT: Final[str] = (
    "download it once with `alsa-bench fetch ogbn-arxiv` (arxiv.zip, ~81 MB, from OGB's server; "
    "needs the ogb package: pip install 'alsa-bench[ogb]'), or unpack OGB's arxiv.zip so that "
    "{root}/ogbn_arxiv/raw/ holds its CSV files"
)

#: The dataset's name in ogb's master tables.
OGB_NAME: Final[str] = "ogbn-arxiv"
#: Where ogb 1.3.6's ``nodeproppred/master.csv`` says the release is (the fetch asks ogb again).
ARCHIVE_URL: Final[str] = "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip"
_ARCHIVE_FILENAME: Final[str] = "arxiv.zip"
#: SHA-256 of ``arxiv.zip``. OGB publishes no checksum; this value is the one two unrelated public
#: projects pin for the same URL. A mismatch stops the fetch (the file is deleted), nothing else.
ARCHIVE_SHA256: Final[str] = "49f85c801589ecdcc52cfaca99693aaea7b8af16a9ac3f41dd85a5f3193fe276"
#: The one top-level folder of ``arxiv.zip`` (ogb's ``download_name``); its contents are installed
#: into ``<root>/ogbn_arxiv`` (see :mod:`tasks.data.fetch`).
ARCHIVE_FOLDERS: Final[dict[str, str]] = {_ARCHIVE_FILENAME: "arxiv"}
#: What ``alsa-bench datasets`` lists; :func:`fetch_sources` gives the same file with ogb's URL.
SOURCES: Final[tuple[RemoteFile, ...]] = (
    RemoteFile(url=ARCHIVE_URL, filename=_ARCHIVE_FILENAME, sha256=ARCHIVE_SHA256,
               dest=DATASET_DIR),
)


def dataset_folder(root: Path | str) -> Path:
    """``<root>/ogbn_arxiv``: the folder OGB unpacks the release into."""
    return Path(root) / DATASET_DIR


def raw_files(root: Path | str) -> list[Path]:
    """Paths of the required raw files under ``root``, in :data:`OGBN_ARXIV_FILES` order (no IO)."""
    folder = dataset_folder(root)
    return [folder / rel for rel in OGBN_ARXIV_FILES]


def cache_file(root: Path | str) -> Path:
    """Path of the parsed-array cache, ``<root>/ogbn_arxiv/alsa_bench_graph.npz`` (no IO)."""
    return dataset_folder(root) / CACHE_NAME


def _missing_message(root: Path, missing: list[str]) -> str:
    folder = dataset_folder(root)
    if not folder.is_dir():
        what = f"ogbn-arxiv not found: no folder {str(folder)!r}"
        if (root / "raw").is_dir() and root.name == DATASET_DIR:
            what += (
                f" (root must be the folder that contains {DATASET_DIR}/, i.e. "
                f"{str(root.parent)!r})"
            )
        elif (root / f"{DATASET_DIR}_pyg").is_dir():
            what += f" (found the old layout {DATASET_DIR}_pyg/; rename it to {DATASET_DIR}/)"
    else:
        what = f"ogbn-arxiv is incomplete under {str(folder)!r}: missing {', '.join(missing)}"
    return f"{what}; {FETCH_HINT.format(root=root)}."


def _peek_columns(path: Path) -> int:
    """Number of comma-separated columns in the first line of a gzip CSV."""
    with gzip.open(path, "rt", encoding="ascii") as handle:
        line = handle.readline()
    if not line.strip():
        raise ValueError("the file is empty")
    return line.count(",") + 1


def read_class_names(root: Path | str) -> tuple[str, ...] | None:
    """Category names from the release's mapping file, in label order, or None if absent.

    Parameters
    ----------
    root : Path or str
        Data root (the folder containing ``ogbn_arxiv/``).

    Returns
    -------
    tuple of str or None
        ``arxiv category`` column of ``mapping/labelidx2arxivcategeory.csv.gz`` ordered by
        ``label idx``; None when the file is not there.

    Raises
    ------
    ValueError
        If the file cannot be read or lacks the two columns.
    """
    path = dataset_folder(root) / MAPPING_FILE
    if not path.is_file():
        return None
    try:
        table = pd.read_csv(path, compression="gzip")
        order = np.argsort(table["label idx"].to_numpy(), kind="stable")
        return tuple(str(name) for name in table["arxiv category"].to_numpy()[order])
    except (OSError, EOFError, KeyError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(
            f"ogbn-arxiv mapping file {str(path)!r} is unreadable ({exc}); expected a gzip CSV "
            f"with header 'label idx,arxiv category'."
        ) from exc


def stage_ogbn_arxiv(root: Path | str) -> list[Path]:
    """Check that OGB's ogbn-arxiv files are under ``<root>/ogbn_arxiv`` and look right.

    Nothing is downloaded here: ``alsa-bench fetch ogbn-arxiv`` gets the files (see
    :data:`FETCH_HINT`). Each required file
    must exist and its first line must decompress as a CSV row with the expected number of
    columns. When the release's label mapping is present it must list :data:`CLASS_NAMES` in
    order.

    Parameters
    ----------
    root : Path or str
        Data root: the ``root`` given to OGB, i.e. the folder containing ``ogbn_arxiv/``.

    Returns
    -------
    list of Path
        The required raw files, in :data:`OGBN_ARXIV_FILES` order.

    Raises
    ------
    FileNotFoundError
        If the folder or a required file is missing (one line: what, where, how to fetch it).
    ValueError
        If a file is not a readable gzip CSV with the expected columns, or the label mapping
        differs from :data:`CLASS_NAMES`.
    """
    root = Path(root)
    paths = raw_files(root)
    missing = [rel for rel, path in zip(OGBN_ARXIV_FILES, paths) if not path.is_file()]
    if missing:
        raise FileNotFoundError(_missing_message(root, missing))
    for rel, path in zip(OGBN_ARXIV_FILES, paths):
        try:
            n_columns = _peek_columns(path)
        except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
            raise ValueError(
                f"ogbn-arxiv file {str(path)!r} is not a readable gzip CSV ({exc}); delete "
                f"{str(dataset_folder(root))!r} and {FETCH_HINT.format(root=root)}."
            ) from exc
        if n_columns != _COLUMNS[rel]:
            raise ValueError(
                f"ogbn-arxiv file {str(path)!r} has {n_columns} columns; expected "
                f"{_COLUMNS[rel]}. It is not the ogbn-arxiv release file {rel}."
            )
    names = read_class_names(root)
    if names is not None and names != CLASS_NAMES:
        first = next(
            (i for i, (a, b) in enumerate(zip(names, CLASS_NAMES)) if a != b), len(CLASS_NAMES)
        )
        raise ValueError(
            f"ogbn-arxiv label mapping {str(dataset_folder(root) / MAPPING_FILE)!r} has "
            f"{len(names)} categories and differs from CLASS_NAMES at label {first}; expected "
            f"the 40 arXiv CS categories starting {CLASS_NAMES[:3]}."
        )
    return paths


def _read(path: Path, n_columns: int) -> np.ndarray:
    """``pd.read_csv(path, header=None).values`` as ogb reads it, with the file named on failure."""
    try:
        values = pd.read_csv(path, compression="gzip", header=None).to_numpy()
    except (OSError, EOFError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"ogbn-arxiv file {str(path)!r} could not be parsed: {exc}") from exc
    if values.ndim != 2 or values.shape[1] != n_columns:
        raise ValueError(
            f"ogbn-arxiv file {str(path)!r} has shape {values.shape}; expected {n_columns} "
            f"column(s)."
        )
    return values


def _as_ints(values: np.ndarray, path: Path, what: str) -> np.ndarray:
    if np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64, copy=False)
    where = ""
    if np.issubdtype(values.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        where = f" (first missing at row {int(bad[0])})" if bad.size else ""
    raise ValueError(
        f"ogbn-arxiv file {str(path)!r} must hold integer {what}; got dtype {values.dtype}"
        f"{where}: a value is missing or not an integer."
    )


def _count(path: Path) -> int:
    values = _as_ints(_read(path, 1), path, "counts")
    if values.shape[0] != 1:
        raise ValueError(
            f"ogbn-arxiv file {str(path)!r} has {values.shape[0]} rows; expected 1 (ogbn-arxiv "
            f"is a single graph)."
        )
    return int(values[0, 0])


def _parse_raw(paths: list[Path]) -> dict[str, np.ndarray]:
    """Read and check the raw CSVs; return ``x``, ``edge_index``, ``y``, ``year``."""
    p = dict(zip(OGBN_ARXIV_FILES, paths))
    n_nodes = _count(p["raw/num-node-list.csv.gz"])
    n_edges = _count(p["raw/num-edge-list.csv.gz"])
    logger.info("parsing ogbn-arxiv CSV files (%d nodes, %d edges)", n_nodes, n_edges)

    def rows(rel: str, arr: np.ndarray, expected: int, what: str) -> None:
        if arr.shape[0] != expected:
            raise ValueError(
                f"ogbn-arxiv file {str(p[rel])!r} has {arr.shape[0]} rows; expected {expected} "
                f"(one per {what}, as num-{what}-list.csv.gz says). The file is truncated or "
                f"from another release."
            )

    edges = _as_ints(_read(p["raw/edge.csv.gz"], 2), p["raw/edge.csv.gz"], "node ids")
    rows("raw/edge.csv.gz", edges, n_edges, "edge")
    x = _read(p["raw/node-feat.csv.gz"], N_FEATURES)
    rows("raw/node-feat.csv.gz", x, n_nodes, "node")
    if not np.issubdtype(x.dtype, np.number):
        raise ValueError(
            f"ogbn-arxiv file {str(p['raw/node-feat.csv.gz'])!r} must hold numbers; got dtype "
            f"{x.dtype}."
        )
    y = _as_ints(_read(p["raw/node-label.csv.gz"], 1), p["raw/node-label.csv.gz"], "labels")
    rows("raw/node-label.csv.gz", y, n_nodes, "node")
    year = _as_ints(_read(p["raw/node_year.csv.gz"], 1), p["raw/node_year.csv.gz"], "years")
    rows("raw/node_year.csv.gz", year, n_nodes, "node")

    y = y[:, 0]
    bad = np.flatnonzero((y < 0) | (y >= N_CLASSES))
    if bad.size:
        raise ValueError(
            f"ogbn-arxiv file {str(p['raw/node-label.csv.gz'])!r} has label {int(y[bad[0]])} at "
            f"node {int(bad[0])}; labels must be in [0, {N_CLASSES})."
        )
    return {
        "x": x.astype(np.float32, copy=False),
        "edge_index": np.ascontiguousarray(edges.T),
        "y": y,
        "year": year[:, 0],
    }


def _read_cache(path: Path, digest: str) -> Graph | None:
    """The cached graph when ``path`` is a valid cache of the raw files with ``digest``."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if int(data["version"]) != _CACHE_VERSION or str(data["raw_digest"]) != digest:
                logger.info("ogbn-arxiv cache %s is stale; rebuilding", path)
                return None
            arrays = {key: data[key] for key in ("x", "edge_index", "y", "year")}
        if arrays["x"].dtype != np.float32 or arrays["x"].shape[1:] != (N_FEATURES,):
            raise ValueError(f"x has dtype {arrays['x'].dtype} and shape {arrays['x'].shape}")
        y = arrays["y"]
        if y.size and (y.min() < 0 or y.max() >= N_CLASSES):
            raise ValueError("labels out of range")
        return Graph(**arrays)
    except Exception as exc:  # any unreadable or inconsistent cache is rebuilt from the raw files
        logger.warning("ignoring unreadable ogbn-arxiv cache %s (%s); rebuilding", path, exc)
        return None


def _write_cache(path: Path, graph: Graph, digest: str) -> None:
    try:
        with atomic_target(path) as tmp, open(tmp, "wb") as handle:
            np.savez(
                handle,
                version=np.int64(_CACHE_VERSION),
                raw_digest=np.str_(digest),
                x=graph.x,
                edge_index=graph.edge_index,
                y=graph.y,
                year=graph.year,
            )
    except OSError as exc:  # a read-only data folder only costs the next load a re-parse
        logger.warning("could not write the ogbn-arxiv cache %s (%s)", path, exc)


def load_graph(root: Path | str, *, cache: bool = True) -> Graph:
    """The full ogbn-arxiv citation graph, read from OGB's raw CSV files.

    Parameters
    ----------
    root : Path or str
        Data root (the folder containing ``ogbn_arxiv/``).
    cache : bool, default True
        Read and write the parsed-array cache :func:`cache_file` (keyed by the raw files'
        SHA-256; an unreadable or stale cache is rebuilt).

    Returns
    -------
    Graph
        ``x`` ``(N, 128)`` ``float32``, ``edge_index`` ``(2, E)`` ``int64`` directed as stored
        (row 0 = first CSV column, the citing paper), ``y`` ``(N,)`` ``int64`` in ``[0, 40)``,
        ``year`` ``(N,)`` ``int64``. The release has N = 169,343 and E = 1,166,243.

    Raises
    ------
    FileNotFoundError
        If a required file (the years file included) is missing; see :func:`stage_ogbn_arxiv`.
    ValueError
        If a file cannot be parsed, a row count disagrees with ``num-node-list.csv.gz`` /
        ``num-edge-list.csv.gz``, a label is outside ``[0, 40)``, a label or year is missing, or
        an edge points at a missing node.
    """
    root = Path(root)
    paths = stage_ogbn_arxiv(root)
    digest = files_digest(paths) if cache else ""
    if cache:
        graph = _read_cache(cache_file(root), digest)
        if graph is not None:
            return graph
    arrays = _parse_raw(paths)
    try:
        graph = Graph(**arrays)
    except ValueError as exc:
        raise ValueError(
            f"ogbn-arxiv raw files under {str(dataset_folder(root) / 'raw')!r} are inconsistent: "
            f"{exc}"
        ) from exc
    if cache:
        _write_cache(cache_file(root), graph, digest)
    return graph


def load_source_ogbn_arxiv(root: Path | str) -> SourceSplits:
    """Training (year <= 2010) and validation (2012-2014) nodes of ogbn-arxiv on their snapshots.

    See :mod:`tasks.data.temporal` for the protocol.
    """
    return temporal_source_splits(load_graph(root), N_CLASSES)


def load_target_pool_ogbn_arxiv(root: Path | str) -> TargetPool:
    """The whole ogbn-arxiv graph; the temporal and structural families cut their splits."""
    return temporal_target_pool(load_graph(root), N_CLASSES)


# ------------------------------------------------------------------------------------ fetching
class OgbRelease(NamedTuple):
    """What ogb's master table says about ogbn-arxiv's release."""

    url: str
    download_name: str
    ogb_version: str


def _import_ogb() -> object:
    """Import ogb without the thread its ``__init__`` starts to ask PyPI for a newer version.

    ogb 1.3.6 (``ogb/version.py``) runs ``outdated.check_outdated`` in a thread on import when
    the ``outdated`` package is importable; a fetch must reach only the release's URL, so
    ``outdated`` is hidden while ogb is imported.

    Raises
    ------
    DatasetUnavailableError
        If ogb is not installed (one line: what to install).
    """
    loaded = sys.modules.get("ogb")
    if loaded is not None:
        return loaded
    hidden = "outdated" in sys.modules
    saved = sys.modules.get("outdated")
    sys.modules["outdated"] = None  # type: ignore[assignment]  # `from outdated import` fails
    try:
        import ogb  # the package, for its release table (never its pickle path)

        return ogb
    except ImportError as exc:
        raise DatasetUnavailableError(
            f"fetching {OGB_NAME} needs the ogb package (>=1.3.6): expected it installed, got "
            f"{type(exc).__name__}: {exc}; install it with `pip install 'alsa-bench[ogb]'` "
            f"(or `pip install 'ogb>=1.3.6'`)."
        ) from None
    finally:
        if hidden:
            sys.modules["outdated"] = saved  # type: ignore[assignment]
        else:
            sys.modules.pop("outdated", None)


def _ogb_master_table(ogb: object) -> pd.DataFrame:
    """ogb's ``nodeproppred/master.csv``, read the way ogb's dataset classes read it."""
    path = Path(str(getattr(ogb, "__file__", ""))).parent / "nodeproppred" / "master.csv"
    try:
        return pd.read_csv(path, index_col=0, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DatasetUnavailableError(
            f"ogb's master table {str(path)!r} is unreadable ({exc}); expected the file that "
            f"ogb>=1.3.6 installs: reinstall ogb."
        ) from None


def ogb_release() -> OgbRelease:
    """The URL and top folder of ogbn-arxiv's release, as the installed ogb says.

    Returns
    -------
    OgbRelease
        ``url`` and ``download_name`` of column ``ogbn-arxiv`` in ogb's
        ``nodeproppred/master.csv``, and ``ogb.__version__``.

    Raises
    ------
    DatasetUnavailableError
        If ogb is not installed, or its master table lacks ogbn-arxiv or those rows.
    """
    ogb = _import_ogb()
    table = _ogb_master_table(ogb)
    version = str(getattr(ogb, "__version__", "?"))
    try:
        url, name = str(table[OGB_NAME]["url"]), str(table[OGB_NAME]["download_name"])
    except KeyError as exc:
        raise DatasetUnavailableError(
            f"ogb {version}'s nodeproppred master table has no {exc} entry for {OGB_NAME}; "
            f"expected columns with 'url' and 'download_name' rows: use ogb>=1.3.6."
        ) from None
    return OgbRelease(url=url, download_name=name, ogb_version=version)


def fetch_sources() -> tuple[RemoteFile, ...]:
    """The release file to fetch, at the URL the installed ogb gives (for :mod:`tasks.data.fetch`).

    Returns
    -------
    tuple of RemoteFile
        ``arxiv.zip`` at :func:`ogb_release`'s URL, pinned to :data:`ARCHIVE_SHA256`, unpacked
        into ``ogbn_arxiv/``.

    Raises
    ------
    DatasetUnavailableError
        If ogb is missing, or its master table names another file or folder than the pinned
        ``arxiv.zip`` / ``arxiv/`` (a new release: the pin must be updated first).
    """
    release = ogb_release()
    filename = release.url.rstrip("/").rpartition("/")[2]
    expected = (_ARCHIVE_FILENAME, ARCHIVE_FOLDERS[_ARCHIVE_FILENAME])
    if (filename, release.download_name) != expected:
        raise DatasetUnavailableError(
            f"ogb {release.ogb_version} names {filename!r} with folder "
            f"{release.download_name!r} for {OGB_NAME}; expected {expected[0]!r} with folder "
            f"{expected[1]!r}, the release whose SHA-256 is pinned in {__name__}: update "
            f"ARCHIVE_SHA256 and ARCHIVE_FOLDERS there for the new release."
        )
    return (RemoteFile(url=release.url, filename=filename, sha256=ARCHIVE_SHA256,
                       dest=DATASET_DIR),)


def verify_fetched(root: Path | str) -> None:
    """Read a freshly fetched release with :func:`load_graph` (and write its cache).

    Raises
    ------
    FileNotFoundError, ValueError
        What :func:`load_graph` raises for missing or malformed files.
    """
    graph = load_graph(root)
    logger.info("ogbn-arxiv fetched: %d nodes, %d edges under %s", graph.x.shape[0],
                graph.edge_index.shape[1], dataset_folder(root))


#: Registry position of this module's datasets.
ORDER: Final[int] = 20

#: ogbn-arxiv (online: ``alsa-bench fetch ogbn-arxiv`` downloads it once; nothing at run time).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="ogbn-arxiv",
        suite="ogbn-arxiv",
        description="ogbn-arxiv citation graph, 40 subjects; the paper's temporal protocol",
        modality="graph",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=(N_FEATURES,),
        target_families=("clean", "temporal", "structural"),
        stage=stage_ogbn_arxiv,
        raw_files=raw_files,
        load_source=load_source_ogbn_arxiv,
        load_target_pool=load_target_pool_ogbn_arxiv,
        online=True,
        paper_row="ogbn-arxiv (Table 2, Table 3)",
        sources=SOURCES,
    ),
)
