"""The shape of the package, as the architecture page describes it: layers
without import cycles, few top-level modules, and every mode declared in one
place."""

import ast
import os
import subprocess
import sys

import pytest

from gdsbench.job.modes import MODES

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gdsbench")


def modules() -> dict[str, ast.Module]:
    out = {}
    for dirpath, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                out[name.removesuffix(".__init__")] = ast.parse(open(path).read(), path)
    return out


def imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """gdsbench modules this one imports, at module level or inside functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("gdsbench"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.level:
            pytest.fail(f"{name}: relative import; write gdsbench.<layer>.<module>")
    out.discard(name)
    return {m for m in out if m in known and m != "gdsbench"}


def test_no_import_cycles_even_inside_functions():
    mods = modules()
    graph = {name: imports(name, tree, set(mods)) for name, tree in mods.items()}
    done, stack = set(), []

    def visit(node):
        if node in stack:
            pytest.fail("import cycle: " + " -> ".join(stack[stack.index(node):] + [node]))
        if node in done:
            return
        stack.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        stack.pop()
        done.add(node)

    for name in sorted(graph):
        visit(name)


# The layers, most basic first, as docs/architecture.md lists them: each uses only the ones before it.
LAYERS = ["job", "system", "execution", "results", "validate", "train", "checkpoint", "kvcache", "objects", "sweep", "reporting",
          "commands",
          "suites", "(top)"]


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "(top)"


def test_layers_import_only_the_layers_before_them():
    mods = modules()
    assert {layer(m) for m in mods} <= set(LAYERS)
    for name, tree in sorted(mods.items()):
        for used in sorted(imports(name, tree, set(mods))):
            if LAYERS.index(layer(used)) > LAYERS.index(layer(name)):
                pytest.fail(f"{name} imports {used}: the {layer(name)} layer may use only "
                            f"{', '.join(LAYERS[:LAYERS.index(layer(name))]) or 'itself'}")


def test_the_package_face_loads_nothing_until_asked():
    """gdsbench/__init__.py hands its public names on as they are first used, so importing a module
    of the ground floor (job/) loads no module of a floor above it (the runner, say)."""
    code = "import sys, gdsbench.job.units, gdsbench.job.spec; print(' '.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    above = [m for m in loaded if m.startswith("gdsbench.") and m != "gdsbench._native" and layer(m) != "job"]
    assert not above, f"importing gdsbench.job.units and gdsbench.job.spec loads {above}"


def test_the_command_line_starts_without_the_results_store():
    """A spawned worker (--procs) imports the command line's module again, and every command builds the
    whole parser: pandas and pyarrow, which only saving a run needs, would cost each about 0.2 s of CPU
    at start (the parser once imported them through train's reader options, 0.8 s of a 1.5 s start)."""
    code = "import sys, gdsbench.cli; gdsbench.cli.build_parser(); print(' '.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not {"pandas", "pyarrow", "gdsbench.results.store"} & set(loaded)


def test_engines_are_asked_what_they_can_do_not_named():
    """No `engine == "null"` outside the declarations: code asks ENGINE_INFO's capabilities
    (native/engine.hpp), so a new engine is one native file and a registry line."""
    from gdsbench.job.spec import ENGINE_INFO

    for name, line, value in names_compared(ENGINE_INFO, exempt=("gdsbench.job.modes", "gdsbench.job.spec")):
        pytest.fail(f"{name}, line {line}: compares with the engine name {value!r}; "
                    "ask its capabilities (gdsbench.job.spec.ENGINE_INFO) instead")


def names_compared(names, exempt=()):
    """(module, line, name) for every comparison in gdsbench's code, outside `exempt`, with one of `names`."""
    for module, tree in modules().items():
        if module in exempt:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for const in ast.walk(node):
                    if isinstance(const, ast.Constant) and const.value in names:
                        yield module, node.lineno, const.value


def test_the_top_level_holds_few_modules():
    top = [f for f in os.listdir(PACKAGE) if f.endswith(".py")]
    assert len(top) <= 8, top


def test_mode_names_are_compared_only_in_their_declaration():
    """No `mode == "gds"` or `mode in ("bounce", ...)` outside job/modes.py: other code asks the declaration."""
    for name, tree in modules().items():
        if name == "gdsbench.job.modes":
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            for side in [node.left, *node.comparators]:
                for const in ast.walk(side):
                    if isinstance(const, ast.Constant) and const.value in MODES:
                        pytest.fail(f"{name}, line {node.lineno}: compares with the mode name {const.value!r}; "
                                    "ask gdsbench.job.modes instead")


def test_what_a_target_is_is_asked_of_its_kind():
    """No `OPENED_AS ==` and no is_url/is_s3 outside gdsbench/system/targets/: whether a target is
    local, what protocol a name is asked over and which engines read it are answered there
    (targets.is_local, protocol_of, engines_for), so a new kind of target is one file there."""
    for name, tree in modules().items():
        if name.startswith("gdsbench.system.targets"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(n, ast.Attribute) and n.attr == "OPENED_AS"
                                                     for side in [node.left, *node.comparators] for n in ast.walk(side)):
                pytest.fail(f"{name}, line {node.lineno}: compares OPENED_AS; ask gdsbench.system.targets "
                            "(is_local, engines_for) instead")
            named = {ast.Name: "id", ast.Attribute: "attr", ast.alias: "name", ast.FunctionDef: "name"}.get(type(node))
            if named and getattr(node, named) in ("is_url", "is_s3"):
                pytest.fail(f"{name}, line {getattr(node, 'lineno', '?')}: {getattr(node, named)}; ask "
                            "gdsbench.system.targets (protocol_of for a bare name, is_local for a target) instead")


def test_format_names_are_compared_only_in_their_declaration():
    """No `format == "tfrecord"` outside train/formats.py: other code asks the format's declaration,
    so a new dataset format is one entry there and its reader."""
    from gdsbench.train.formats import FORMATS

    for name, line, value in names_compared(FORMATS, exempt=("gdsbench.train.formats",)):
        pytest.fail(f"{name}, line {line}: compares with the format name {value!r}; ask gdsbench.train.formats instead")


def test_help_texts_list_built_in_names_from_their_tables():
    """No built-in workload or model name typed into a help text: help lists them from their
    tables (train/workloads.py, checkpoint/models.py), so adding one is one entry there."""
    from gdsbench.checkpoint.models import BUILT_IN as MODELS
    from gdsbench.train.workloads import BUILT_IN as WORKLOADS

    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "help":
                for const in ast.walk(node.value):
                    typed = [n for n in [*WORKLOADS, *MODELS] if isinstance(const, ast.Constant)
                             and isinstance(const.value, str) and n in const.value]
                    if typed:
                        pytest.fail(f"{name}, line {const.lineno}: a help text types {', '.join(typed)}; list the "
                                    "table's names (BUILT_IN) instead")


ROOT = os.path.dirname(PACKAGE)
ENGINES_DIR = os.path.join(ROOT, "native", "engines")


def test_a_native_engine_is_one_file_a_registry_line_and_a_build_line():
    """Each file in native/engines/ defines one EngineInfo, listed once in registry.cpp and once in
    native/CMakeLists.txt; no other native source names an engine (they ask its Capabilities)."""
    import glob
    import re

    from gdsbench import _native

    registry = open(os.path.join(ENGINES_DIR, "registry.cpp")).read()
    build = open(os.path.join(ROOT, "native", "CMakeLists.txt")).read()
    names = set()
    for path in sorted(glob.glob(os.path.join(ENGINES_DIR, "*.cpp"))):
        file = os.path.basename(path)
        if file == "registry.cpp":
            continue
        declared = set(re.findall(r"const EngineInfo (k\w+Engine) = \{\s*\"(\w+)\"", open(path).read()))
        assert len({k for k, _ in declared}) == 1, f"{file} should define one EngineInfo, found {declared}"
        constant, name = declared.pop()
        names.add(name)
        assert len(re.findall(rf"\b{constant}\b", registry)) == 1, f"{constant} ({file}) is not listed once in registry.cpp"
        assert build.count(f"engines/{file}") == 1, f"engines/{file} is not listed once in native/CMakeLists.txt"
    assert names == {e["name"] for e in _native.engines()}
    core = [p for p in glob.glob(os.path.join(ROOT, "native", "*.[ch]pp"))]
    for path in core:
        for name in names:
            assert f'"{name}"' not in open(path).read(), (f"{os.path.relpath(path, ROOT)} names the {name} engine; "
                                                         "ask its Capabilities (native/engine.hpp) instead")


def test_a_remote_protocol_is_one_file_and_its_name_in_the_registry():
    """Each file in native/engines/curl/ but the registry defines one Protocol, named in protocols.cpp;
    the transport (engines/curl.cpp) spells no scheme, and Python reads the schemes from the native side."""
    import glob
    import re

    from gdsbench import _native
    from gdsbench.system.targets.remote_object import ENGINE, SCHEMES

    folder = os.path.join(ENGINES_DIR, "curl")
    registry = open(os.path.join(folder, "protocols.cpp")).read()
    for path in sorted(glob.glob(os.path.join(folder, "*.cpp"))):
        if os.path.basename(path) != "protocols.cpp":
            declared = re.findall(r"extern const Protocol (k\w+) =", open(path).read())
            assert len(declared) == 1, f"{os.path.basename(path)} should define one Protocol, found {declared}"
            assert len(re.findall(rf"\b{declared[0]}\b", registry)) == 2, f"{declared[0]} is not in protocols.cpp"
    schemes = tuple(s for e in _native.engines() if e["name"] == ENGINE for s in e["schemes"])
    assert schemes and SCHEMES == schemes
    transport = open(os.path.join(ENGINES_DIR, "curl.cpp")).read()
    assert not [s for s in schemes if f'"{s}' in transport], "engines/curl.cpp spells a scheme: its protocol's"


def test_ruff_check_passes():
    """The lint rules of pyproject.toml ([tool.ruff]): unused imports and names, import order, line length."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", ROOT],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_native_code_is_clang_formatted():
    """native/ follows .clang-format (run `find native -name '*.[ch]pp' | xargs clang-format -i` to fix)."""
    import glob
    import shutil
    import subprocess
    import sys

    beside_python = os.path.join(os.path.dirname(sys.executable), "clang-format")  # the venv's, from the test extras
    exe = beside_python if os.path.exists(beside_python) else shutil.which("clang-format")
    assert exe, "clang-format is not installed: pip install -e '.[test]'"
    files = sorted(glob.glob(os.path.join(ROOT, "native", "**", "*.[ch]pp"), recursive=True))
    proc = subprocess.run([exe, "--dry-run", "--Werror", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_run_kinds_are_declared_once():
    """Each kind of run is one RunKind in results/kinds.py (its records' fields, its page module)
    plus that page module: the report command and the end of each command find the page there,
    and no other module lists the kinds (a dict keyed by them) or asks a run's kind by name."""
    import importlib

    from gdsbench.results.kinds import KINDS

    for kind in KINDS:
        assert callable(importlib.import_module(kind.page_module).build), kind.page_module
    names = {k.name for k in KINDS}
    for name, tree in modules().items():
        if name == "gdsbench.results.kinds":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keyed = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names]
                if len(keyed) > 1:
                    pytest.fail(f"{name}, line {node.lineno}: a dict keyed by the run kinds {keyed}; declare what a "
                                "kind has in its RunKind (gdsbench/results/kinds.py)")
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    if isinstance(side, ast.Constant) and side.value in names:
                        pytest.fail(f"{name}, line {node.lineno}: compares with the run kind {side.value!r}; ask its "
                                    "RunKind (gdsbench.results.kinds.kind_of) instead")


def test_progress_is_drawn_in_one_place():
    """Every long task's progress (sweep, validate, prepare, the scratch file) is drawn by
    gdsbench/execution/progress.py: no other module builds a rich progress bar."""
    for name, tree in modules().items():
        if name == "gdsbench.execution.progress":
            continue
        for node in ast.walk(tree):
            found = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if "rich.progress" in found:
                pytest.fail(f"{name}, line {node.lineno}: draws its own progress; use gdsbench.execution.progress")


def test_no_private_name_is_imported_across_packages():
    """No `from gdsbench.X.Y import _name` where X.Y is another package's module: a name another
    package needs is public (processes.Cancelled, not _Cancelled). gdsbench._native, the compiled
    core, is every package's."""
    for name, tree in modules().items():
        package = name.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gdsbench")):
                continue
            if node.module == package or node.module.rsplit(".", 1)[0] == package:
                continue  # its own package's
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")  # (__version__ is public)
                if private and f"{node.module}.{alias.name}" != "gdsbench._native":
                    pytest.fail(f"{name}, line {node.lineno}: imports {node.module}'s private {alias.name}; make it "
                                "public there")


def test_the_loop_a_part_runs_in_is_chosen_in_one_place():
    """Whether a part runs in the native loop or kvikio's, and which sample reader train gets, is
    asked of the mode only in gdsbench/execution/loops.py (run_part, sample_readers,
    sample_data_path): no other module outside job/ reads native_loop or imports kvikio_mode."""
    for name, tree in modules().items():
        if name == "gdsbench.execution.loops" or name.startswith(("gdsbench.job", "gdsbench.execution.kvikio_mode")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "native_loop":
                pytest.fail(f"{name}, line {node.lineno}: asks native_loop; run the part through "
                            "gdsbench.execution.loops instead")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = getattr(node, "module", None) or ""
                found = [module] + [f"{module}.{a.name}" if module else a.name for a in node.names]
                if any(f.startswith("gdsbench.execution.kvikio_mode") for f in found):
                    pytest.fail(f"{name}, line {node.lineno}: imports kvikio_mode; run the part through "
                                "gdsbench.execution.loops instead")
