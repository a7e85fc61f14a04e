"""The package's shape: layered imports and an explicit, sorted public API."""

from __future__ import annotations

import subprocess
import sys

import nb_durable
from tests.conftest import subprocess_env


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True)
    return {name.split(".")[0] for name in out.stdout.split()}


def test_core_needs_only_the_standard_library() -> None:
    loaded = loaded_after("import nb_durable.core, nb_durable.core.durable, nb_durable.core.runs")
    assert not loaded & {"IPython", "ipywidgets", "anthropic", "httpx", "httpx2", "pydantic", "nbformat"}


def test_the_package_loads_neither_ipython_nor_widgets_nor_the_sdk() -> None:
    loaded = loaded_after("import nb_durable")
    assert not loaded & {"IPython", "ipywidgets", "anthropic", "httpx2"}


def test_all_is_sorted_and_complete() -> None:
    names = nb_durable.__all__
    assert names == sorted(names)
    public = {n for n in vars(nb_durable) if not n.startswith("_") and n not in ("annotations", "TYPE_CHECKING")}
    modules = {n for n in public if type(getattr(nb_durable, n)).__name__ == "module"}
    assert public - modules - {"Any", "importlib"} <= set(names), "a public name is missing from __all__"
    for name in names:
        assert getattr(nb_durable, name) is not None, name


def test_the_agents_names_load_on_first_use() -> None:
    loaded = loaded_after("import nb_durable")
    assert "nb_durable.agent.loop" not in loaded_modules("import nb_durable")
    assert not loaded & {"anthropic", "IPython"}
    assert "nb_durable.agent.loop" in loaded_modules("import nb_durable; nb_durable.run_agent")


def loaded_modules(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True)
    return set(out.stdout.split())


def test_every_error_descends_from_one_base() -> None:
    from nb_durable import errors

    for name in errors.__all__:
        obj = getattr(errors, name)
        if issubclass(obj, Exception) and not issubclass(obj, Warning):
            assert issubclass(obj, errors.NbDurableError), name
            assert name in errors.__doc__, f"{name} is missing from the tree in errors.py"
