"""Package layout that pyproject.toml cannot say on its own: data folders shipped inside the wheel.

`rubrics/` (judge rubrics, YAML) and `configs/` (the quickstart config and its tiny data) stay at the
top of the repository, and the wheel carries them as `usersimcrs/_bundled/{rubrics,configs}`, so
`pip install usersimcrs` then `usersimcrs quickstart` works outside the repository
(`usersimcrs.core.bundled` finds them in either place). The studio's `static/` and `templates/`
folders hold no Python but are declared as packages of their own (with their file patterns), as
setuptools asks of data folders inside a package: left implicit, every install printed its "Package
would be ignored" warning twice (about 90 lines). `benchmarks/` is not installed: a distribution of
that name exists on the package index.
"""

from setuptools import find_packages, setup

BUNDLED = {
    "usersimcrs._bundled.rubrics": "rubrics",
    "usersimcrs._bundled.configs": "configs",
    "usersimcrs._bundled.configs.data": "configs/data",
}
STUDIO_DATA = {
    "usersimcrs.studio.static": ["*.css", "*.js"],
    "usersimcrs.studio.templates": ["*.html"],
}

setup(
    packages=find_packages(
        include=[
            "usersimcrs",
            "usersimcrs.*",
            "crs_connectors",
            "crs_connectors.*",
            "data_converters",
            "data_converters.*",
        ]
    )
    + list(STUDIO_DATA)
    + list(BUNDLED),
    package_dir=BUNDLED,
    package_data={
        **{name: ["*.yaml", "*.yml", "*.csv", "*.md"] for name in BUNDLED},
        "": ["*.yaml", "*.yml", "*.csv", "*.txt", "*.json"],
        **STUDIO_DATA,
    },
)
