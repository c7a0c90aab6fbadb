"""Install a plugin distribution the way pip does, into a folder put on ``sys.path``.

``pip install`` leaves two things in site-packages: the package itself and a
``<name>-<version>.dist-info`` folder whose ``METADATA`` names the distribution and whose
``entry_points.txt`` lists its entry points (the format of :mod:`importlib.metadata`). The
tests write exactly that, so :func:`importlib.metadata.entry_points` finds the plugin as it
would after a real install, without a network or a build.
"""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The example plugin of ``examples/``.
EXAMPLE = ROOT / "examples" / "alsa-bench-quantile"


def install_distribution(
    site: Path, name: str, version: str, entry_points: Mapping[str, Mapping[str, str]],
    packages: Mapping[str, Path] | None = None, files: Mapping[str, str] | None = None,
) -> Path:
    """Write ``<site>/<name>-<version>.dist-info`` and copy the packages beside it.

    Parameters
    ----------
    site : Path
        The folder that goes on ``sys.path`` (created).
    name, version : str
        The distribution's name and version (``METADATA``).
    entry_points : mapping of group to (mapping of key to ``"module:attr"``)
    packages : mapping of str to Path, optional
        Package name -> source folder to copy under ``site``.
    files : mapping of str to str, optional
        Further files to write under ``site`` (relative path -> text).

    Returns
    -------
    Path
        ``site``.
    """
    site.mkdir(parents=True, exist_ok=True)
    for package, source in (packages or {}).items():
        shutil.copytree(source, site / package, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in (files or {}).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text, encoding="utf-8")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in eps.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
    (info / "INSTALLER").write_text("pip\n", encoding="utf-8")
    return site


def install_example(site: Path) -> Path:
    """Install ``examples/alsa-bench-quantile`` into ``site`` with the entry points its own
    ``pyproject.toml`` declares."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return install_distribution(
        site, project["name"], project["version"], project["entry-points"],
        packages={"alsa_bench_quantile": EXAMPLE / "alsa_bench_quantile"},
    )
