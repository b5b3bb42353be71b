"""The device-free tier: the layering of docs/architecture.md holds (no kernel runs here).

- every IR op has a launcher in both backends' op tables;
- every op that can produce a float result from a tracked input has a gradient rule, or is
  listed below as never recorded (with the reason);
- the engine's modules import each other without a cycle (module-level imports);
- above the backends, nothing imports a kernel module or touches a backend's private members.
"""
import ast
import pathlib
import re

import pytest

from ember.ir import ELEMENTWISE, Op

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"

# ops that never reach autograd's record hook, and why
NEVER_RECORDED = {
    Op.ARGMAX: "int result", Op.ARGMIN: "int result", Op.NONZERO: "int result",
    Op.EQ: "bool result", Op.NE: "bool result", Op.LT: "bool result", Op.LE: "bool result",
    Op.GT: "bool result", Op.GE: "bool result", Op.ISNAN: "bool result",
    Op.ISINF: "bool result", Op.ISFINITE: "bool result", Op.LOGICAL_NOT: "bool result",
    Op.ANY_: "bool result", Op.ALL: "bool result", Op.SIGNBIT: "bool result",
    Op.SEARCHSORTED: "int result",
    Op.BIT_NOT: "int inputs", Op.AND: "int/bool inputs", Op.OR: "int/bool inputs",
    Op.XOR: "int/bool inputs", Op.SHL: "int inputs", Op.SHR: "int inputs",
    Op.FUSED: "planned below the record hook", Op.FUSED_REDUCE: "planned below the record hook",
    Op.QUANT_CALIBRATE: "quantized storage never records",
    Op.QUANTIZE: "quantized storage never records",
    Op.DEQUANTIZE: "quantized storage never records", Op.PACK: "quantized storage never records",
    Op.UNPACK: "quantized storage never records",
    Op.QMATMUL: "recorded as MATMUL (its rule reads the quantized operand)",
    Op.FULL: "creation: no tensor input", Op.ARANGE: "creation: no tensor input",
    Op.RANDOM: "creation: no tensor input", Op.FROM_HOST: "creation: no tensor input",
    Op.TO_HOST: "returns a host array",
    Op.CHOLESKY_BACKWARD: "applied by CHOLESKY's gradient rule to saved values, never tracked",
}


def test_every_ir_op_has_both_backends():
    from ember.backends.cpu import _TABLE
    from ember.backends.cuda import _LAUNCHERS
    assert set(_TABLE) == set(Op)
    assert set(_LAUNCHERS) == set(Op)
    assert all(callable(f) for f in (*_TABLE.values(), *_LAUNCHERS.values()))


def test_every_float_op_has_a_gradient_rule():
    from ember.autograd.rules import RULES
    missing = [op.name for op in Op if op not in RULES and op not in NEVER_RECORDED]
    assert not missing, f"ops without a gradient rule: {missing}"
    both = [op.name for op in NEVER_RECORDED if op in RULES]
    assert not both, f"listed as never recorded but with a rule: {both}"
    assert ELEMENTWISE <= set(RULES) | set(NEVER_RECORDED)


def _module_name(path):
    rel = path.relative_to(ENGINE).with_suffix("")
    parts = ["ember", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(path):
    """The ember.* modules a file imports at module level (not inside functions)."""
    tree = ast.parse(path.read_text())
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            if mod and mod.startswith("ember"):
                # "from . import x" names a module x; "from .m import y" the module m
                for alias in node.names:
                    sub = f"{mod}.{alias.name}"
                    out.add(sub if (ENGINE / pathlib.Path(*sub.split(".")[1:])).with_suffix(".py").exists()
                            or (ENGINE / pathlib.Path(*sub.split(".")[1:]) / "__init__.py").exists()
                            else mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("ember"))
    return {m for m in out if not m.startswith(("ember.kernels", "ember.autograd"))}


def test_engine_modules_import_without_cycles():
    graph = {_module_name(p): _top_level_imports(p) for p in ENGINE.rglob("*.py")}
    # a package imports its parent's __init__ implicitly: only module edges count
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        if state.get(m) == "active":
            cycle = path[path.index(m):] + [m]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        state[m] = "active"
        for dep in sorted(graph.get(m, ())):
            if dep != m:
                visit(dep, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])


PLANNERS = ["engine/fusion.py", "engine/dispatch.py", "engine/optim.py",
            *(str(p.relative_to(ROOT)) for p in (ENGINE / "quant").glob("*.py"))]


@pytest.mark.parametrize("path", PLANNERS)
def test_planners_import_no_kernel_and_touch_no_backend_private(path):
    text = (ROOT / path).read_text()
    code = "\n".join(line.split("#")[0] for line in text.splitlines())
    assert not re.search(r"^\s*(from|import)\s+(ember\.kernels|\.+kernels)", code, re.M), path
    assert not re.search(r"backend\._[a-z]", code), path


# what a rule must not reach to be replayable: a formula picked by the data, or a value read
_VALUE_READS = {"_tracing", "_has", "_used", "_check_phase", "_divide", "item", "numpy",
                "tolist", "_host", "linalg"}


def _names_reached(code, module, seen):
    """Global and attribute names ``code`` uses, through nested code objects and the module
    functions it calls."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names_reached(const, module, seen)
    for name in list(names):
        fn = getattr(module, name, None)
        if callable(fn) and getattr(fn, "__module__", None) == module.__name__ and name not in seen:
            seen.add(name)
            if hasattr(fn, "__code__"):
                names |= _names_reached(fn.__code__, module, seen)
    return names


def test_replayable_rules_read_no_values():
    """graph.backward replays the traced walk of a graph of REPLAYABLE ops: their rules (and
    their complex forms) must compute the same ops whatever the values."""
    from ember.autograd import rules
    for op in rules.REPLAYABLE:
        for table in (rules.RULES, rules.COMPLEX_RULES):
            rule = table.get(op)
            if rule is None:
                continue
            fn = rule.backward
            code = fn.__code__ if hasattr(fn, "__code__") else fn.__call__.__code__
            reached = _names_reached(code, rules, set())
            closure = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())]
            for c in closure:
                if hasattr(c, "__code__"):
                    reached |= _names_reached(c.__code__, rules, set())
            assert not reached & _VALUE_READS, (op, reached & _VALUE_READS)
    # and the rules that do read values are not replayable
    for op in (Op.CUMPROD, Op.DET, Op.SLOGDET, Op.EIGH, Op.SVD, Op.SOLVE, Op.CHOLESKY):
        assert op not in rules.REPLAYABLE
