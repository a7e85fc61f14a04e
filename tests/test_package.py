"""The package's shape: layered imports and an explicit, sorted public API.

The layers, from the bottom: ``nb_durable.core`` (the standard library only), ``nb_durable.agent``
(no Jupyter), then ``nb_durable.jupyter`` and ``nb_durable.cli``. Each layering test walks the
files of a package, so a module added or moved there is checked without naming it here, and
imports them in a fresh interpreter, where nothing the test process loaded can hide an import.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

import nb_durable
from tests.conftest import subprocess_env

PACKAGE = Path(nb_durable.__file__).resolve().parent
STDLIB = frozenset(sys.stdlib_module_names)
JUPYTER = frozenset(
    {
        "IPython",
        "ipywidgets",
        "ipykernel",
        "traitlets",
        "jupyter_client",
        "jupyter_core",
        "nbformat",
        "nbclient",
        "comm",
    }
)
HEAVY = frozenset({"IPython", "ipywidgets", "anthropic", "httpx2", "pydantic"})

# Imports each module named in argv[1] (a JSON list) and prints, as its last line, every module
# that importing them added to sys.modules, with the module whose code imported it (a finder
# first on sys.meta_path sees every import and finds nothing; the importer is the nearest frame
# outside importlib). Modules the interpreter loaded at startup are left out.
PROBE = """
import importlib, json, sys
SKIP = {"importlib", "importlib._bootstrap", "importlib._bootstrap_external", "importlib.util"}
importers = {}
class Witness:
    def find_spec(self, name, path=None, target=None):
        if name not in importers:
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__") in SKIP:
                frame = frame.f_back
            importers[name] = frame.f_globals.get("__name__") if frame is not None else None
        return None
before = set(sys.modules)
sys.meta_path.insert(0, Witness())
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps({m: importers.get(m) for m in sorted(set(sys.modules) - before)}))
"""


def loaded_by(modules: Sequence[str]) -> dict[str, str | None]:
    """The modules a fresh interpreter loads to import ``modules``, each with its importer."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(modules))],
        check=False,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert done.returncode == 0, f"importing {', '.join(modules)} failed:\n{done.stderr}"
    loaded: dict[str, str | None] = json.loads(done.stdout.splitlines()[-1])
    missing = set(modules) - set(loaded)
    assert not missing, f"the probe did not import {sorted(missing)}"
    return loaded


def modules_under(package: str, *, skip: Iterable[str] = ()) -> list[str]:
    """Every module of ``package`` (``nb_durable.core``), found by walking its files.

    As ``pkgutil.walk_packages`` does, only folders with an ``__init__.py`` are walked into:
    a folder without one holds data (a demo's workspace files), not modules of the package.
    """
    skipped = {"__pycache__", *skip}
    root = PACKAGE.joinpath(*package.split(".")[1:])
    assert (root / "__init__.py").is_file(), f"{package} is not a package of nb_durable ({root})"
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        folders = path.relative_to(root).parents
        if skipped & set(parts) or not all((root / f / "__init__.py").is_file() for f in folders):
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert package in names, f"found no {package}/__init__.py under {root}"
    assert len(names) > 1, f"found no modules under {package} besides the package itself: {names}"
    return names


def offenders(modules: Sequence[str], bad: Callable[[str], bool]) -> dict[str, list[str]]:
    """The ``bad`` modules that importing ``modules`` loads, by the nb_durable module whose
    import chain brought each in (``{"nb_durable.core.log": ["nb_durable.agent"]}``). Only
    the first bad module of a chain is named: ``IPython``, not also each of its submodules."""
    loaded = loaded_by(modules)
    found: dict[str, list[str]] = {}
    for module in sorted(loaded):
        importer = loaded[module]
        if not bad(module) or (importer in loaded and bad(str(importer))):
            continue
        seen = {module}
        while importer is not None and importer in loaded and importer not in seen:
            if importer.split(".")[0] == "nb_durable":
                break
            seen.add(importer)
            importer = loaded[importer]
        found.setdefault(str(importer), []).append(module)
    return found


def is_stdlib(module: str) -> bool:
    root = module.split(".")[0]
    return root in STDLIB or root.startswith("_sysconfigdata_")  # sysconfig's data, named per platform


def is_core(module: str) -> bool:
    """Part of nb_durable that the core may load: the package itself, its errors, the core."""
    return module in ("nb_durable", "nb_durable._lazy") or in_package(module, "nb_durable.core", "nb_durable.errors")


def in_package(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def is_postgres_store(module: str) -> bool:
    """The PostgreSQL store (a package), the one part of core allowed its optional driver (psycopg)."""
    return module == "nb_durable.core.stores.postgres" or module.startswith("nb_durable.core.stores.postgres.")


def test_the_walk_finds_the_packages_modules() -> None:
    core = modules_under("nb_durable.core")
    agent = modules_under("nb_durable.agent", skip=["demo_workspace"])
    assert all(m.startswith("nb_durable.core") for m in core)
    assert not any("demo_workspace" in m for m in agent)
    assert not set(core) & set(agent)


def test_core_loads_only_the_standard_library_and_itself() -> None:
    core = modules_under("nb_durable.core")
    plain = [m for m in core if not is_postgres_store(m)]
    assert plain, core

    def bad(module: str) -> bool:
        if module.split(".")[0] == "nb_durable":
            return not is_core(module)
        return not is_stdlib(module)

    assert offenders(plain, bad) == {}, "a core module loads more than the standard library and the core"

    postgres = [m for m in core if is_postgres_store(m)]
    if postgres and importlib.util.find_spec("psycopg") is not None:
        # The driver's own imports, whatever they are in the installed version, and nothing else.
        driver = {m.split(".")[0] for m in loaded_by(["psycopg"]) if not is_stdlib(m)}
        assert "psycopg" in driver
        assert offenders(postgres, lambda m: bad(m) and m.split(".")[0] not in driver) == {}, (
            "the PostgreSQL store loads more than the standard library, the core and psycopg"
        )


def test_core_loads_no_agent_jupyter_or_cli_module() -> None:
    """Said apart from the test above, so a failure names the layer that leaked in."""
    upper = ("nb_durable.agent", "nb_durable.jupyter", "nb_durable.cli")
    assert offenders(modules_under("nb_durable.core"), lambda m: in_package(m, *upper)) == {}


def test_agent_loads_no_jupyter_module() -> None:
    agent = modules_under("nb_durable.agent", skip=["demo_workspace"])

    def bad(module: str) -> bool:
        return module.split(".")[0] in JUPYTER or in_package(module, "nb_durable.jupyter", "nb_durable.cli")

    assert offenders(agent, bad) == {}, "an agent module loads Jupyter, the magics or the CLI"


def test_the_package_loads_neither_ipython_nor_widgets_nor_the_sdk() -> None:
    loaded = loaded_by(["nb_durable"])
    assert "nb_durable" in loaded
    assert sorted({m.split(".")[0] for m in loaded} & HEAVY) == []
    upper = ("nb_durable.agent", "nb_durable.jupyter", "nb_durable.cli")
    assert [m for m in loaded if in_package(m, *upper)] == []


PUBLIC_MODULES = ("nb_durable", "nb_durable.agent", "nb_durable.jupyter", "nb_durable.errors", "nb_durable.testing")
LAZY_PACKAGES = ("nb_durable", "nb_durable.agent", "nb_durable.jupyter")


def type_checking_names(module: Any) -> dict[str, str]:
    """name -> module, as the TYPE_CHECKING block of a package's __init__ imports them."""
    tree = ast.parse(Path(module.__file__).read_text())
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1
                for alias in imp.names:
                    assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
                    out[alias.name] = str(imp.module)
    return out


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_complete(name: str) -> None:
    code = (
        f"import json, {name} as m; names = m.__all__; "
        "print(json.dumps([names, [n for n in names if getattr(m, n, None) is None], "
        "[n for n in dir(m) if not n.startswith('_') and n not in names and type(getattr(m, n)).__name__ != 'module' "
        "and n not in ('annotations', 'TYPE_CHECKING')]]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True)
    names, missing, unlisted = json.loads(out.stdout)
    assert names and names == sorted(names), f"{name}.__all__ is not sorted"
    assert missing == [], f"{name}.__all__ names what does not load: {missing}"
    if name in LAZY_PACKAGES:  # their namespace is exactly what they export
        assert unlisted == [], f"{name} has public names missing from __all__: {unlisted}"


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_lazy_names_come_from_one_table(name: str) -> None:
    module = importlib.import_module(name)
    table = module._PUBLIC
    assert table and set(module.__all__) - {"__version__"} == set(table), "__all__ is derived from the table"
    assert type_checking_names(module) == table, "the TYPE_CHECKING imports restate the table"
    for public, where in table.items():
        assert getattr(importlib.import_module(f"{name}.{where}"), public) is getattr(module, public), public


def test_the_top_level_is_about_thirty_names() -> None:
    assert 25 <= len(nb_durable.__all__) <= 36, sorted(nb_durable.__all__)


def test_the_agents_names_load_on_first_use() -> None:
    code = (
        "import json, sys, nb_durable; before = sorted(sys.modules); fn = nb_durable.run_agent; "
        "print(json.dumps([before, sorted(sys.modules), fn.__module__]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True
    )
    before, after, home = json.loads(done.stdout.splitlines()[-1])
    assert not [m for m in before if in_package(m, "nb_durable.agent")]
    assert in_package(home, "nb_durable.agent") and home in after
    assert sorted({m.split(".")[0] for m in after} & {"anthropic", "IPython", "ipywidgets"}) == []


def test_every_error_descends_from_one_base() -> None:
    from nb_durable import errors

    kinds = {name: getattr(errors, name) for name in errors.__all__}
    raised = [
        name for name, obj in kinds.items() if isinstance(obj, type) and issubclass(obj, Exception) and not issubclass(obj, Warning)
    ]
    assert len(raised) > 1, f"errors.__all__ names no error besides the base: {errors.__all__}"
    for name in raised:
        assert issubclass(kinds[name], errors.NbDurableError), name
        assert name in errors.__doc__, f"{name} is missing from the tree in nb_durable.errors"


def test_the_tutorials_import_only_public_paths() -> None:
    notebooks = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 6
    seen = 0
    for path in notebooks:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            for module in re.findall(r"(?:from|import) (nb_durable[\w.]*)", "".join(cell["source"])):
                seen += 1
                assert module in PUBLIC_MODULES, f"{path.name} imports {module}, which is not a public path"
    assert seen > 5, "the tutorials import nb_durable"


def test_the_version_has_one_owner() -> None:
    # pyproject.toml reads it from nb_durable.__version__, so a release changes one line.
    project = (Path(nb_durable.__file__).parent.parent / "pyproject.toml").read_text()
    table = project.split("\n[project]\n", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^version\s*=", table, re.M), "pyproject.toml's [project] states the version again"
    assert 'version = { attr = "nb_durable.__version__" }' in project
    assert importlib.metadata.version("nb-durable") == nb_durable.__version__
