"""Every file npu-place opens goes through its bounded readers.

The README promises that everything the tool reads is bounded: a regular file by its size
before it is read, ``/dev/zero`` and pipes one byte past the limit, a named pipe without a
writer never waited on (:func:`models.documents.read_bytes`, :func:`~models.documents.
read_text`, :func:`~models.documents.read_document`).  This test walks the syntax tree of
every module of the package and lists each call that opens a file by itself (``open``,
``Path.read_text``/``read_bytes``/``open``/``write_text``, ``gzip.open``, ``yaml.load``,
``json.load``, ``np.load``, OpenSSL's ``load_cert_chain``, ``savefig``, the Kubernetes
client's kubeconfig loaders, ...).  A call not in :data:`ALLOWED` fails the test: route the
read through the bounded readers, or add it below with the reason it is safe.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "heuristics", "solver", "benchmarks")

#: Plain function names that open a file.
OPENING_NAMES = frozenset({"open"})
#: Attribute calls (``x.NAME(...)``) that open a file or read one given by name or handle.
OPENING_ATTRIBUTES = frozenset({
    "open", "fdopen", "read_text", "read_bytes", "write_text", "write_bytes",
    "GzipFile", "ZipFile", "TarFile", "mmap", "memmap",
    "load", "loads_file", "safe_load", "load_all", "safe_load_all", "full_load",
    "unsafe_load", "loadtxt", "genfromtxt", "fromfile", "read_csv", "imread",
    "load_cert_chain", "load_verify_locations", "savefig",
    "new_client_from_config", "load_kube_config", "load_incluster_config",
})

#: ``(module, enclosing function, call) -> (how many, why it is safe)``.  Reads are the
#: bounded readers themselves, or files the tool checked first; writes create or replace
#: the user's output files (``--output``, ``--out``), never read.
ALLOWED: dict[tuple[str, str, str], tuple[int, str]] = {
    # --- the bounded readers themselves
    ("models/documents.py", "read_bytes", "os.open"):
        (1, "the bounded reader: stat first, O_NONBLOCK open, read limit + 1 bytes"),
    ("models/documents.py", "read_bytes", "os.fdopen"):
        (1, "the bounded reader's descriptor"),
    ("benchmarks/measured_figures.py", "png_text", "Image.open"):
        (1, "reads a PNG's text chunks from bytes read by read_bytes (an in-memory buffer)"),
    ("benchmarks/regression.py", "read_baseline_file", "gzip.GzipFile"):
        (1, "decompresses bytes read by read_bytes, at most BASELINE_MAX_BYTES + 1 out"),
    # --- files other libraries open by name, checked first by the bounded reader
    ("solver/service/auth.py", "check_tls",
     "ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain"):
        (1, "after read_bytes(regular_only=...) of both files: bounded regular files, and "
            "a password callback that refuses (never a prompt)"),
    ("models/kube/live.py", "api_client", "config.load_incluster_config"):
        (2, "the service account files Kubernetes mounts into a pod (not a user path)"),
    ("models/kube/live.py", "api_client", "config.new_client_from_config"):
        (1, "after _check_kubeconfig_files: each kubeconfig a bounded regular file"),
    # --- kernel pseudo-files: small, never a user path
    ("benchmarks/common.py", "MemoryProbe._reset", "open"):
        (1, "writes /proc/self/clear_refs (resets the peak-memory counter)"),
    ("benchmarks/common.py", "MemoryProbe._status_kb", "open"):
        (1, "reads /proc/self/status line by line"),
    ("benchmarks/scale_load.py", "_peak_mb", "open"):
        (1, "reads /proc/self/status line by line"),
    ("benchmarks/suite.py", "machine_description", "open"):
        (2, "reads /proc/cpuinfo and /proc/meminfo line by line"),
    ("benchmarks/loadtest.py", "Served.rss_mb", "Path(f'/proc/{pid}/status').read_text"):
        (1, "reads /proc/PID/status of the load test's own server"),
    ("benchmarks/loadtest.py", "Served.rss_mb", "(task / 'children').read_text"):
        (1, "reads /proc/PID/task/TID/children of the load test's own server"),
    ("benchmarks/extender_bench.py", "_cpu_seconds", "Path(f'/proc/{pid}/stat').read_text"):
        (1, "reads /proc/PID/stat of the benchmark's own server"),
    ("benchmarks/volcano_session.py", "run_session", "plugin.open"):
        (1, "not a file: the Ascend-plugin stand-in's session open"),
    # --- writes: output files named by the user (--output FILE) or the tool's own
    ("benchmarks/daemon_loop.py", "main", "open"): (1, "write: --out"),
    ("solver/cli/reference.py", "main", "args.page.write_text"):
        (1, "write: rewrites the manual's generated CLI page"),
    ("benchmarks/doc_figures.py", "main", "page.write_text"):
        (1, "write: rewrites a page of the repository's own docs/"),
    ("benchmarks/extender_bench.py", "main", "Path(args.out).write_text"): (2, "write: --out"),
    ("benchmarks/watch_lag.py", "main", "Path(args.out).write_text"): (1, "write: --out"),
    ("benchmarks/volcano_session.py", "VolcanoCluster.write_device_dump", "path.write_text"):
        (1, "write: the harness's own device-info dump in its temporary folder"),
    ("models/io.py", "save_scenario", "Path(path).write_text"): (1, "write: --output"),
    ("models/io.py", "save_placement", "Path(path).write_text"): (1, "write: --output"),
    ("solver/cli/output.py", "emit", "Path(output).write_text"): (1, "write: --output"),
    ("solver/cli/simulate.py", "run", "Path(args.output).write_text"): (1, "write: --output"),
    ("solver/simulate/plot.py", "plot_report", "fig.savefig"): (1, "write: --plot"),
    ("benchmarks/outputs.py", "open_output", "os.open"):
        (1, "write: the --out folders' writer (O_NOFOLLOW, regular files only)"),
    ("benchmarks/outputs.py", "open_output", "os.fdopen"): (1, "write: its descriptor"),
    ("benchmarks/outputs.py", "save_figure", "fig.savefig"):
        (1, "write: into a handle of open_output"),
    ("benchmarks/anytime.py", "write_report", "open"): (1, "write: anytime.csv"),
    ("benchmarks/anytime.py", "write_report", "report.write_text"): (1, "write: report"),
    ("benchmarks/kube_dump.py", "DumpBuilder.write", "path.write_text"):
        (1, "write: generated kubectl dumps (tests, examples)"),
    ("benchmarks/kube_dump_vnpu.py", "write_vnpu_example", "path.write_text"):
        (1, "write: the bundled vNPU example"),
    ("benchmarks/loadtest.py", "main", "Path(args.out).write_text"): (1, "write: --out"),
    ("benchmarks/digests.py", "main", "args.out.write_text"): (1, "write: --out"),
    ("benchmarks/regression.py", "write_baseline_file", "tmp.write_bytes"):
        (1, "write: a baseline's temporary file, renamed over it"),
    ("benchmarks/solve_models.py", "main", "open"): (1, "write: --out"),
}


def _calls(path: Path) -> list[tuple[str, str, int]]:
    """``(enclosing function, call text, line)`` of every file-opening call in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, str, int]] = []
    scope: list[str] = []

    class Visitor(ast.NodeVisitor):
        def _scoped(self, node: ast.AST, name: str) -> None:
            scope.append(name)
            self.generic_visit(node)
            scope.pop()

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            self._scoped(node, node.name)

        def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
            self._scoped(node, node.name)

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            self._scoped(node, node.name)

        def visit_Call(self, node: ast.Call) -> None:
            func = node.func
            if (isinstance(func, ast.Name) and func.id in OPENING_NAMES) or (
                    isinstance(func, ast.Attribute) and func.attr in OPENING_ATTRIBUTES):
                found.append((".".join(scope) or "<module>", ast.unparse(func), node.lineno))
            self.generic_visit(node)

    Visitor().visit(tree)
    return found


def _inventory() -> tuple[Counter[tuple[str, str, str]], dict[tuple[str, str, str], int]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    lines: dict[tuple[str, str, str], int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            for function, call, line in _calls(path):
                key = (module, function, call)
                counts[key] += 1
                lines.setdefault(key, line)
    return counts, lines


def test_every_file_is_opened_through_the_bounded_readers() -> None:
    counts, lines = _inventory()
    bypassing = []
    for key, count in sorted(counts.items()):
        allowed = ALLOWED.get(key, (0, ""))[0]
        if count > allowed:
            module, function, call = key
            bypassing.append(f"{module}:{lines[key]}: {function}: {call} ({count} call(s), "
                             f"{allowed} allowed)")
    assert not bypassing, (
        "these calls open files without the bounded readers (models.documents.read_bytes, "
        "read_text, read_document); use them, or add the call to ALLOWED with the reason "
        "it is safe:\n" + "\n".join(bypassing))


def test_the_allow_list_names_only_calls_that_exist() -> None:
    """A stale entry would let a later bypass in the same place through unseen."""
    counts, _ = _inventory()
    stale = [key for key, (count, _) in ALLOWED.items() if counts.get(key, 0) != count]
    assert not stale, stale


def test_the_walk_finds_the_kinds_of_calls_it_looks_for(tmp_path: Path) -> None:
    """The walker itself: each kind of opening call in a scratch module is found."""
    module = tmp_path / "scratch.py"
    module.write_text(
        "import gzip, json, yaml, numpy as np\n"
        "from pathlib import Path\n"
        "def f(p):\n"
        "    open(p)\n"
        "    Path(p).read_text()\n"
        "    Path(p).read_bytes()\n"
        "    Path(p).open('rb')\n"
        "    gzip.open(p)\n"
        "    yaml.safe_load(open(p))\n"
        "    json.load(p)\n"
        "    np.load(p)\n"
        "class C:\n"
        "    def g(self, p):\n"
        "        return read_text(p)\n",  # the bounded reader: not an opening call
        encoding="utf-8")
    found = {(function, call) for function, call, _ in _calls(module)}
    assert found == {("f", "open"), ("f", "Path(p).read_text"), ("f", "Path(p).read_bytes"),
                     ("f", "Path(p).open"), ("f", "gzip.open"), ("f", "yaml.safe_load"),
                     ("f", "json.load"), ("f", "np.load")}
