"""The package's layering, checked on the source (every `import` statement, function-level ones
included): stages import only stages below them, targets are plugins, and nothing cycles.

    core (+ config)  <  space  <  targets/cpu, targets/cuda  <  measure  <  search  <  tuning
    frontend: core and the target registry (allowed: space, measure);  ansor, cli, compile: anything

`ansor.targets` (the registry) may be imported from anywhere: it imports no other ansor module at
import time. `ansor.targets.cpu` and `ansor.targets.cuda` are imported only by themselves (the
registry loads them by name), and never by each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "python" / "ansor"

LAYERS = {"core": 0, "config": 0, "space": 1, "targets": 2, "measure": 3, "search": 4, "tuning": 5,
          "frontend": 4, "": 9, "cli": 9, "compile": 9}


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(("ansor", *parts))] = f
    return out


MODULES = _modules()


def _imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    """The ansor modules `path` imports (`from ansor.x import y` counts ansor.x.y when that is a module)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # `if TYPE_CHECKING:` blocks import nothing at run time
        nodes = [n for n in nodes if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ansor")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ansor") and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
    if not top_level_only:  # TYPE_CHECKING imports are annotations only
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.module:
                        for a in inner.names:
                            found.discard(f"{inner.module}.{a.name}")
                            found.discard(inner.module)
    return found


def _stage(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _target(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "targets" else None


def test_stages_import_only_stages_below() -> None:
    bad = []
    for mod, path in MODULES.items():
        for dep in _imports(path):
            if dep == "ansor.targets" or _stage(dep) == "config":
                continue  # the registry and the configuration are leaves
            if dep == "ansor" or not dep.startswith("ansor."):  # `from ansor import __version__`; ansor_native
                continue
            s, d = _stage(mod), _stage(dep)
            if LAYERS[d] > LAYERS[s] or (s != d and LAYERS[d] == LAYERS[s] and s not in ("", "cli", "compile")):
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def test_targets_are_plugins() -> None:
    bad = []
    for mod, path in MODULES.items():
        for dep in _imports(path):
            t = _target(dep)
            if t is not None and _target(mod) != t:
                bad.append(f"{mod} -> {dep}")
    assert not bad, "target code imported from outside its own package:\n" + "\n".join(sorted(bad))


def test_registry_is_a_leaf() -> None:
    assert _imports(MODULES["ansor.targets"], top_level_only=True) == set()


def test_no_import_cycles() -> None:
    graph = {m: {d for d in _imports(p, top_level_only=True) if d in MODULES and d != m} for m, p in MODULES.items()}
    # a package's __init__ importing its own submodules is how packages re-export: not a cycle edge back
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (cycle := visit(d)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_unknown_target_is_a_one_line_error() -> None:
    from ansor.core.task import TaskError, create_task
    from ansor.frontend import workloads
    from ansor.targets import UnknownTargetError, get_target

    with pytest.raises(TaskError, match=r"unknown target 'gpu' \(known: cpu, cuda\)"):
        create_task(workloads.get("matmul-512"), target="gpu")
    with pytest.raises(UnknownTargetError, match="unknown target 'rocm'"):
        get_target("rocm")
