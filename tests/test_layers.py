"""The house's layering, read from the package's own imports (lazy ones included).

Layers, bottom to top::

    models  <-  heuristics  <-  solver engines (and solver.doors)
            <-  benchmarks / solver.service / solver.simulate  <-  solver.cli

A module may import its own layer or any layer below; no import circle anywhere; nothing
outside :mod:`solver.cli` imports the command line; only :mod:`solver` imports OR-Tools.
The checker is tested on planted trees too, so that it would see a back-arrow or a circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "heuristics", "solver", "benchmarks")
#: Layer of a module by its longest matching prefix.
LAYERS = {
    "models": 0,
    "heuristics": 1,
    "solver": 2,
    "solver.doors": 2,
    "benchmarks": 3,
    "solver.service": 3,
    "solver.simulate": 3,
    "solver.cli": 4,
}


def layer_of(module: str) -> int:
    """The layer of ``module`` (its longest prefix in :data:`LAYERS`)."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise KeyError(module)


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the packages below ``root``, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def import_graph(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Import edges between the modules below ``root``, and each module's outside imports.

    Every ``import`` statement counts, at the top or inside a function.  ``from P import
    name`` is an edge to ``P.name`` when that is a module, else to ``P``.
    """
    modules = module_files(root)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    outside: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules
                           else source for alias in node.names]
            for target in targets:
                if target.split(".")[0] not in PACKAGES:
                    outside[name].add(target.split(".")[0])
                    continue
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    edges[name].add(target)
    return edges, outside


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def back_arrows(edges: dict[str, set[str]]) -> list[str]:
    """Imports against the layer order, and imports of the command line from outside it."""
    wrong = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            if target.startswith("solver.cli") and not source.startswith("solver.cli"):
                wrong.append(f"{source} -> {target} (the command line is imported by nobody)")
            elif layer_of(target) > layer_of(source):
                wrong.append(f"{source} -> {target}")
    return wrong


def test_the_packages_have_no_import_circle() -> None:
    edges, _ = import_graph(ROOT)
    assert len(edges) > 80  # the whole house was read
    assert circles(edges) == []


def test_every_import_follows_the_layer_order() -> None:
    edges, _ = import_graph(ROOT)
    assert back_arrows(edges) == []


def test_only_the_solver_imports_ortools() -> None:
    _, outside = import_graph(ROOT)
    users = sorted(name for name, mods in outside.items() if "ortools" in mods)
    assert users, "the CP-SAT model imports OR-Tools"
    assert all(name.startswith("solver.") and not name.startswith("solver.cli")
               for name in users), users


def _plant(root: Path, files: dict[str, str]) -> None:
    for package in PACKAGES:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("", encoding="utf-8")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_sees_a_planted_back_arrow_and_circle(tmp_path: Path) -> None:
    _plant(tmp_path, {
        "models/low.py": "def f():\n    from heuristics.high import g  # lazy back-arrow\n",
        "heuristics/high.py": "from models.low import f\n",
        "benchmarks/tool.py": "from solver.cli.main import main\n",
        "solver/cli/__init__.py": "",
        "solver/cli/main.py": "from solver.engine import x\n",
        "solver/engine.py": "x = 1\n",
    })
    edges, _ = import_graph(tmp_path)
    assert edges["models.low"] == {"heuristics.high"}
    assert circles(edges) == [["heuristics.high", "models.low"]]
    assert back_arrows(edges) == [
        "benchmarks.tool -> solver.cli.main (the command line is imported by nobody)",
        "models.low -> heuristics.high",
    ]


def test_the_checker_accepts_a_clean_planted_tree(tmp_path: Path) -> None:
    _plant(tmp_path, {
        "models/low.py": "x = 1\n",
        "heuristics/high.py": "from models import low\nfrom . import other\n",
        "heuristics/other.py": "from models.low import x\n",
    })
    edges, _ = import_graph(tmp_path)
    assert edges["heuristics.high"] == {"models.low", "heuristics.other"}
    assert circles(edges) == [] and back_arrows(edges) == []


def _fresh_python(script: str, cwd: Path) -> str:
    """Run ``script`` in a fresh interpreter in ``cwd``; assert it exits 0; its stdout."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("argv", [["plan", "--engine", "greedy"], ["validate"], ["examples"]])
def test_greedy_commands_load_neither_ortools_nor_pandas(argv: list[str], tmp_path: Path) -> None:
    """``plan --engine greedy``, ``validate`` and ``examples`` start without OR-Tools."""
    script = (
        "import sys, io\n"
        "from solver.cli import main\n"
        "from solver.doors import example_path\n"
        f"argv = {argv!r}\n"
        "if argv == ['validate']: argv = ['validate', str(example_path('superpod-850'))]\n"
        "code = main(argv, io.StringIO(), io.StringIO())\n"
        "heavy = sorted(m for m in ('ortools', 'pandas', 'distributed', 'matplotlib', "
        "'fastapi', 'kubernetes') if m in sys.modules)\n"
        "print(code, heavy)\n"
    )
    stdout = _fresh_python(script, tmp_path)
    assert stdout.strip() == "0 []"


#: What a greedy ``plan`` must not load (so that greedy starts fast): the strategy
#: modules of the families the example does not have, the paths of jobs it does not have,
#: what only CP-SAT, the service, the simulator, replays and the benchmarks use, the other
#: subcommands' modules, and ``numpy.ma`` (which ``np.unique`` imports).
NOT_FOR_GREEDY = ("heuristics.podlevel", "heuristics.inference", "heuristics.origin_first",
                  "heuristics.multilevel.first", "heuristics.vnpu", "heuristics.lifecycle",
                  "solver.cpsat", "solver.engine", "solver.phases", "solver.request",
                  "solver.bounds", "solver.lns",
                  "solver.reuse", "solver.service", "solver.simulate", "benchmarks",
                  "numpy.ma", "ortools", "solver.cli.bench", "solver.cli.compare",
                  "solver.cli.examples", "solver.cli.kube_import", "solver.cli.replay",
                  "solver.cli.schema", "solver.cli.serve", "solver.cli.simulate",
                  "solver.cli.sweep", "solver.cli.validate")
FAMILY_MODULES = ("heuristics.ordinary", "heuristics.superpod", "heuristics.rack",
                  "heuristics.multilevel")


@pytest.mark.parametrize(("example", "family_module"), [
    ("multilevel", "heuristics.multilevel"),
    ("superpod-850", "heuristics.superpod"),
])
def test_a_greedy_plan_loads_only_what_its_jobs_need(example: str, family_module: str,
                                                     tmp_path: Path) -> None:
    """``plan --engine greedy`` imports its own family's strategy and nothing of the list."""
    script = (
        "import sys, io\n"
        "from solver.cli import main\n"
        f"code = main(['plan', '--example', {example!r}, '--engine', 'greedy', '--seed', '0'],"
        " io.StringIO(), io.StringIO())\n"
        "print(code, sorted(m for m in sys.modules if m.startswith(('heuristics.', 'solver.', "
        "'benchmarks', 'numpy.', 'ortools'))))\n"
    )
    stdout = _fresh_python(script, tmp_path)
    code, _, listed = stdout.strip().partition(" ")
    loaded = set(ast.literal_eval(listed))
    assert code == "0"
    assert family_module in loaded  # the probe sees what is imported
    unwanted = {m for m in loaded
                if any(m == p or m.startswith(f"{p}.") for p in NOT_FOR_GREEDY)
                or (m in FAMILY_MODULES and m != family_module)}
    assert unwanted == set()


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["no-such-command"]])
def test_version_and_help_load_no_library(argv: list[str], tmp_path: Path) -> None:
    """``npu-place --version`` / ``--help`` / a misspelt command build no subcommand and
    import neither numpy nor pydantic nor the house."""
    script = (
        "import sys, io, contextlib\n"
        "from solver.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r}, io.StringIO(), io.StringIO())\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'pydantic', 'yaml', 'models', 'heuristics')))\n"
    )
    stdout = _fresh_python(script, tmp_path)
    assert stdout.split(" ", 1)[1].strip() == "[]"
