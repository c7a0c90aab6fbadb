"""``zoo-glyphs``: printed capital letters, rendered from the fonts matplotlib ships, on typefaces
never seen in training.

Data: the TrueType fonts in matplotlib's ``mpl-data/fonts/ttf`` (DejaVu: the Bitstream Vera
licence; STIX: SIL Open Font License 1.1; Computer Modern, the BaKoMa TrueType versions: their
own free licence, matplotlib's ``LICENSE_BAKOMA``). Each file is staged verified against its
pinned SHA-256 and read as data with PIL's FreeType renderer; matplotlib is not imported.

Task: which of the 26 capital letters A-Z a 28x28 grey image shows. Every image renders one
letter in one font, white on black, with a seeded jitter: a size of 16-24 px, a rotation of
-12..12 degrees, an offset of up to 3 px from the centre; :data:`RENDERS` images per (font,
letter). Rendering is deterministic (FreeType with the same inputs gives the same bytes).

Natural shift: typeface
-----------------------
=====  ================  ======================================================================
group  split             fonts
=====  ================  ======================================================================
0      source            DejaVu Sans and Serif, regular, bold, oblique/italic, bold oblique (8)
1      ``font-mono``     DejaVu Sans Mono, the same four weights (a typewriter design)
2      ``font-stix``     STIX General, four weights (a Times-like text face)
3      ``font-cm``       Computer Modern roman, bold, italic, sans, typewriter (Knuth's TeX
                         faces)
=====  ================  ======================================================================

The source is split (stratified by letter) into training, validation and ``clean``: those
images share fonts and differ in their jitter, as held-out samples of one distribution do.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Final

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tasks.data.datasets._text_sources import stage_bytes
from tasks.data.datasets._zoo import (
    grey_to_inputs,
    grouped_splits,
    natural_targets,
    require_file,
)
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool

__all__ = ["FONTS", "SPECS", "render_letters"]

ORDER: Final[int] = 605
NAME: Final[str] = "zoo-glyphs"
SIDE: Final[int] = 28
LETTERS: Final[str] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Images per (font, letter).
RENDERS: Final[int] = 40
#: Font file -> (group, pinned SHA-256 of matplotlib 3.11's copy).
FONTS: Final[dict[str, tuple[int, str]]] = {
    "DejaVuSans.ttf": (0, "3fdf69cabf06049ea70a00b5919340e2ce1e6d02b0cc3c4b44fb6801bd1e0d22"),
    "DejaVuSans-Bold.ttf": (0, "b184b89e3c1075f22f6b71575b6fc20d4972b3cfd3b23322ca6fd596dcaef167"),
    "DejaVuSans-Oblique.ttf": (
        0, "ccdf74b350f11fd3dd5774de50e5e6346a1a5da1f5b7d5fb83590665e97a5213"),
    "DejaVuSans-BoldOblique.ttf": (
        0, "6edf0283160186af451cbee71e7b845f2e4cabf264bb992ce668c83c25465e6f"),
    "DejaVuSerif.ttf": (0, "107244956e9962b9e96faccdc551825e0ae0898ae13737133e1b921a2fd35ffa"),
    "DejaVuSerif-Bold.ttf": (
        0, "c3753f2ed6bc673f15846dc45addbeb3b9c872f32fb18fd53a21f1bef1ed7676"),
    "DejaVuSerif-Italic.ttf": (
        0, "3e7994fbc54fa10ce3352a42d548fadd7d9cadb69cb1109bc9d960f6dac57f04"),
    "DejaVuSerif-BoldItalic.ttf": (
        0, "d93efec7a9d2e826768d1a2ee95b95870e15e29599a84f3484af1de1cec2e181"),
    "DejaVuSansMono.ttf": (1, "602ec86b8948cfcd956482fe64f94c36c867770149ef2f791d4613f443bcecb3"),
    "DejaVuSansMono-Bold.ttf": (
        1, "baada9a5172fe20886251aff0433fc38461912d5daf07287e7bee56620a8da96"),
    "DejaVuSansMono-Oblique.ttf": (
        1, "28052813f7a709fc89f52d192dc995ef4f0fdc5c3d7b73a49d6849b1916d0cd0"),
    "DejaVuSansMono-BoldOblique.ttf": (
        1, "a69081c15c76c827e0a27a5a7f5c74b6135c843499955495ffa8c20d3a98288b"),
    "STIXGeneral.ttf": (2, "167378031e2dddc6216d67819c9260e9a06ffc4c478e4e23cb98a6fd44b183c2"),
    "STIXGeneralBol.ttf": (2, "e8533dc7083fa346bda1933d60ea4a83b67d0945bceaf1b3541f82b4a0e2c6a0"),
    "STIXGeneralItalic.ttf": (
        2, "6cfcb333d22b7c3c623bdfd40174f14c85c3d6731ca6166c1edc80140eae8527"),
    "STIXGeneralBolIta.ttf": (
        2, "98788fd4ba48dfbb2bd026c0e20a247a8b06c7372879628b7a6bb0d5bb09736c"),
    "cmr10.ttf": (3, "4dd9761b058c009db9b2145f55ee6617d093c273dd3d6c5b3e43ff6110fa9bf6"),
    "cmb10.ttf": (3, "074497b50c43ea57597181591f9893d38fc12a87e95104f5657fc2481f61a23a"),
    "cmti10.ttf": (3, "f9f1f9f654308ae82f7be4441ae89b080896b34cc220bbea173c5e9adcfe3ef7"),
    "cmss10.ttf": (3, "7df91a83d05b2e471ec638cb0b435a360a3c792b09fc42a7da67e91f2e79115a"),
    "cmtt10.ttf": (3, "6211f09ae93599991afda970c24669dad1a77e253d915624fbf212f702f071d7"),
}
GROUPS: Final[dict[int, tuple[str, str]]] = {
    1: ("font-mono", "DejaVu Sans Mono"),
    2: ("font-stix", "STIX General"),
    3: ("font-cm", "Computer Modern"),
}


def raw_folder(root: Path | str) -> Path:
    """``<root>/zoo-glyphs/raw``."""
    return Path(root) / NAME / "raw"


def raw_files(root: Path | str) -> list[Path]:
    """The staged font files."""
    return [raw_folder(root) / name for name in FONTS]


def _font_folder() -> Path:
    spec = importlib.util.find_spec("matplotlib")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise FileNotFoundError("zoo-glyphs renders matplotlib's bundled fonts; matplotlib is "
                                "not installed (run `make install`).")
    return Path(locations[0]) / "mpl-data" / "fonts" / "ttf"


def stage(root: Path | str) -> list[Path]:
    """Copy every font of :data:`FONTS` out of the installed matplotlib, verified."""
    folder = _font_folder()
    for name, (_, sha256) in FONTS.items():
        dest = raw_folder(root) / name
        source = folder / name
        if not source.is_file():
            raise FileNotFoundError(f"{source} is missing; zoo-glyphs needs matplotlib's font "
                                    f"{name} (reinstall matplotlib).")
        stage_bytes(source.read_bytes(), dest, sha256, f"matplotlib:{name}")
    return raw_files(root)


def render_letters(font_path: Path | str, renders: int, seed: int) -> np.ndarray:
    """``renders`` jittered images of every letter in one font (module docstring).

    Returns
    -------
    numpy.ndarray
        ``(26 * renders, 28, 28)`` ``uint8``, letter-major (all renders of ``A`` first).
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(16, 25, size=(len(LETTERS), renders))
    angles = rng.uniform(-12.0, 12.0, size=(len(LETTERS), renders))
    offsets = rng.integers(-3, 4, size=(len(LETTERS), renders, 2))
    fonts = {int(s): ImageFont.truetype(str(font_path), int(s)) for s in np.unique(sizes)}
    out = np.zeros((len(LETTERS) * renders, SIDE, SIDE), dtype=np.uint8)
    big = 2 * SIDE
    for i, letter in enumerate(LETTERS):
        for j in range(renders):
            canvas = Image.new("L", (big, big), 0)
            ImageDraw.Draw(canvas).text((big / 2, big / 2), letter, fill=255,
                                        font=fonts[int(sizes[i, j])], anchor="mm")
            canvas = canvas.rotate(float(angles[i, j]), resample=Image.Resampling.BILINEAR)
            dx, dy = (int(v) for v in offsets[i, j])
            left, top = SIDE // 2 - dx, SIDE // 2 - dy
            out[i * renders + j] = np.asarray(canvas.crop((left, top, left + SIDE, top + SIDE)))
    return out


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    images, labels, groups = [], [], []
    for k, (name, (group, _)) in enumerate(FONTS.items()):
        path = require_file(raw_folder(root) / name, "zoo-image")
        images.append(render_letters(path, RENDERS, seed=1000 + k))
        labels.append(np.repeat(np.arange(len(LETTERS), dtype=np.int64), RENDERS))
        groups.append(np.full(len(LETTERS) * RENDERS, group, np.int64))
    return grouped_splits(
        np.concatenate(images), np.concatenate(labels), np.concatenate(groups), len(LETTERS),
        sizes=(5200, 1560, 1560), target_cap=2600, seed=1984, take=lambda x, i: x[i],
        concat=lambda parts: np.concatenate(parts), where=NAME,
    )


def load_source(root: Path | str) -> SourceSplits:
    """Training and validation images of the source fonts."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """Held-out source-font images (sub-population 0) and one sub-population per unseen family."""
    return _splits(str(Path(root).resolve()))[1]


_RECIPE: Final = MappingProxyType({"epochs": 15})

SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME, suite="zoo-image",
        description="printed capital letters (26) in matplotlib's fonts; unseen typefaces",
        modality="image", n_classes=len(LETTERS), class_names=tuple(LETTERS),
        input_shape=(1, SIDE, SIDE),
        target_families=("clean", "synthetic", "label_shift", "natural"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, to_inputs=grey_to_inputs,
        backbones=("mlp", "lenet"),
        recipes=MappingProxyType({"mlp": _RECIPE, "lenet": _RECIPE}),
        natural_targets=natural_targets(GROUPS),
        source_package="matplotlib==3.11.2 (PyPI; mpl-data/fonts/ttf)",
        licence="DejaVu: Bitstream Vera licence; STIX: SIL OFL 1.1; Computer Modern: BaKoMa "
                "licence",
        in_default_bench=False,
    ),
)
