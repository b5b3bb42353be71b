"""Fused elementwise chains: one generated module per chain structure.

``ember.fusion`` describes a chain of deferred elementwise ops by a *key*, a tuple of
plain strings and ints that names everything the generated code depends on:

- ``leaves``: one entry per input, ``("a", None)`` for an array read element by element,
  ``("s", dtype)`` for a one-element input (a constant such as the ``0.9`` of ``x * 0.9``)
  read once and converted to ``dtype``.  Values are kernel arguments, never baked into the
  code, so ``x * 0.9`` and ``x * 0.8`` share one kernel.
- ``nodes``: the ops in topological order, ``(scalar op, result dtype, args)``; an arg
  ``i >= 0`` is leaf ``i``, ``i < 0`` is node ``-1 - i``.  The scalar op is a function name
  of ``kernels/scalar.py`` (or its float32 twin), exactly what the eager kernel would use.
- ``outputs``: the nodes written out, in order.

``source(key)`` is the module's text.  Every op's result is converted to its dtype, as the
eager kernels do when they store it, so fused and unfused results are identical.

- ``chain``: one scalar function for the whole chain, called per element by ``cuda_map``
  (CUDA: a grid-stride loop, the chain as a device function).
- ``flat`` and ``strided`` (CPU): a task of up to ``CHUNK`` elements walks them in blocks
  of ``BLOCK``; each op is a call of a per-op loop over the block (``loop_<kinds>`` of
  ``loop_source``, bound to the scalar op and result type), from L1-resident blocks of its
  inputs into a scratch row or an output's slice (see ``_blocked`` for why).

Scalar ops and per-op loops are called by name; the builders (``kernels/cpu/fused.py``,
``kernels/cuda/fused.py``) bind those names (and ``TASK``, ``GATHER``, ``CHAIN``, ``cuda``), as they
bind ``OP`` in the fixed templates.
``load(key)`` writes the module under the kernel cache directory (named by a hash of the
key) and imports it, so the source can be read and Numba's disk cache, which needs a real
file and stable names, works across processes.
"""
import hashlib
import importlib.util
import os
import sys
import threading

from .cache import generated_dir

CHUNK = 1 << 14   # elements per task, as the fixed elementwise templates
BLOCK = 1024      # elements per op loop on the CPU: a few blocks of them stay in L1

# source name of the numpy type each Ember dtype converts to
TYPES = {"float32": "float32", "float64": "float64", "int8": "int8", "int16": "int16",
         "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
         "uint32": "uint32", "uint64": "uint64", "bool": "bool_",
         "complex64": "complex64", "complex128": "complex128"}

_MODULES = {}
_LOCK = threading.Lock()


def name(key):
    """The module (and kernel) name of ``key``: a hash of its text, stable across processes."""
    return "ember_fused_" + hashlib.sha256(repr(key).encode()).hexdigest()[:24]


def scalar_ops(key):
    """The scalar op names the chain of ``key`` calls."""
    return sorted({fn for fn, _, _ in key[1]})


def _ref(i):
    return f"v{i}" if i >= 0 else f"t{-1 - i}"


def _chain(key):
    leaves, nodes, outputs = key
    lines = [f"def chain({', '.join(f'v{i}' for i in range(len(leaves)))}):"]
    for k, (fn, dtype, args) in enumerate(nodes):
        lines.append(f"    t{k} = {TYPES[dtype]}({fn}({', '.join(_ref(i) for i in args)}))")
    lines.append(f"    return {', '.join(f't{k}' for k in outputs)}")
    return lines


def _call(key, values):
    """Lines that call the chain on ``values`` and store its results with ``store(k, r)``."""
    n_out = len(key[2])
    if n_out == 1:
        return [f"CHAIN({', '.join(values)})"]
    return [f"{', '.join(f'r{k}' for k in range(n_out))} = CHAIN({', '.join(values)})"]


def _store(key, indent, call, target):
    """The loop body: ``target(k)`` is the output element ``k`` is written to."""
    pad = " " * indent
    if len(key[2]) == 1:
        return [f"{pad}{target(0)} = {call[0]}"]
    return [pad + call[0]] + [f"{pad}{target(k)} = r{k}" for k in range(len(key[2]))]


def _scalar_prologue(leaves, read):
    """Convert each one-element input once, before the loop (``read(i)`` is its value)."""
    return [f"    c{i} = {TYPES[dt]}({read(i)})" for i, (kind, dt) in enumerate(leaves) if kind == "s"]


def _slots(key):
    """Where each node's block of values lives: an output's slice (``y<k>``) or a scratch row
    (``t_<dtype>_<r>``), rows reused once their node's last reader has run.

    Never in place: a node's row is chosen before its arguments' rows are freed.  Each op is
    a call (``_blocked``), and LLVM vectorises a loop whose output may overlap an input only
    behind a runtime overlap check, which a call writing over its own input fails (measured:
    ``tanh_f32`` over 512 values in place 16x slower).

    Returns ({node: name}, {dtype: rows needed}).
    """
    _, nodes, outputs = key
    last = {}
    for k, (_, _, args) in enumerate(nodes):
        for i in args:
            if i < 0:
                last[-1 - i] = k
    names, free, rows = {}, {}, {}
    for k, (_, dtype, args) in enumerate(nodes):
        if k in outputs:
            names[k] = f"y{outputs.index(k)}"
        elif free.get(dtype):
            names[k] = free[dtype].pop()
        else:
            r = rows.get(dtype, 0)
            rows[dtype] = r + 1
            names[k] = f"t_{dtype}_{r}"
        for i in set(args):   # arguments read for the last time free their rows
            a = -1 - i
            if i < 0 and last.get(a) == k and a not in outputs:
                free.setdefault(nodes[a][1], []).append(names[a])
    return names, rows


def _kinds(leaves, args):
    """Per argument of a node: ``a`` for a block of values, ``s`` for a one-value input."""
    return "".join("a" if i < 0 else leaves[i][0] for i in args)


def loop_name(fn, dtype, kinds):
    """The per-op loop of scalar op ``fn`` with result ``dtype`` over arguments ``kinds``."""
    return f"loop_{kinds}__{fn}__{dtype}"


def loops(key):
    """(name, scalar op, result dtype, argument kinds) of each per-op loop the chain calls."""
    leaves, nodes, _ = key
    found = {(fn, dtype, _kinds(leaves, args)) for fn, dtype, args in nodes}
    return sorted((loop_name(*f), *f) for f in found)


def _blocked(key, indent):
    """The ops of the chain, one call each to a per-op loop over a block of ``L`` values.

    Each loop (``loop_source``) reads at most three arrays and writes one, so LLVM vectorises
    it as it does the eager kernels, while the block stays in L1: one expression for the
    whole chain is latency-bound when it holds several transcendental ops (measured: two
    chained exp_f32 in one loop took 2.6x one, not 2x).  The loops are functions of their
    own, shared by every chain and cached on disk: written inline, a chain of 146 ops took
    24 s to compile (Numba's SSA repair after inlining the scalar ops grows with ops x ops),
    and with calls about 4 s (``perf/fused_compile_time.py``).
    """
    leaves, nodes, _ = key
    names, _ = _slots(key)
    pad = " " * indent

    def value(i):
        if i < 0:
            return names[-1 - i]
        return f"x{i}" if leaves[i][0] == "a" else f"c{i}"
    return [f"{pad}{loop_name(fn, dtype, _kinds(leaves, args))}"
            f"({names[k]}, {', '.join(value(i) for i in args)}, L)"
            for k, (fn, dtype, args) in enumerate(nodes)]


def loop_source(kinds):
    """The text of the per-op loop template for arguments ``kinds`` (``a``: a block, read
    element by element; ``s``: one value); the builder binds ``OP`` and ``OUT`` (the result
    type, converted to as the eager kernels' stores do)."""
    params = ", ".join(f"v{i}" for i in range(len(kinds)))
    values = ", ".join(f"v{i}[j]" if kind == "a" else f"v{i}" for i, kind in enumerate(kinds))
    return "\n".join([
        '"""A per-op loop of fused chains, generated by ember.kernels.fused (do not edit)."""',
        "", "",
        f"def loop_{kinds}(dst, {params}, L):",
        "    for j in range(L):",
        f"        dst[j] = OUT(OP({values}))",
        ""])


def loop_module(kinds):
    """The generated module holding ``loop_<kinds>``, written once and imported."""
    modname = "ember_loop_" + kinds
    return generated_module(modname, modname, lambda: loop_source(kinds))


def _scratch(key, indent):
    """Allocate the scratch rows of one task (per dtype) and name them."""
    _, rows = _slots(key)
    pad = " " * indent
    lines = []
    for dtype, n in sorted(rows.items()):
        lines.append(f"{pad}w_{dtype} = empty(({n}, BLOCK), {TYPES[dtype]})")
        lines += [f"{pad}t_{dtype}_{r} = w_{dtype}[{r}]" for r in range(n)]
    return lines


def _unpack(names, packed):
    return [f"    {', '.join(names)}, = {packed}"] if names else []


def _flat(key):
    # every array input is contiguous with the output's shape: one flat index.  ``flat``
    # only spreads tasks over threads and ``flat_task`` does the work: Numba's parallel
    # passes take time superlinear in the size of a prange body (a 40-op chain compiled in
    # 24 s inline, see docs/decisions.md), a call keeps that body small; the task number is
    # made an int64 (prange gives a uint64 in parallel builds: a second compile of the task)
    leaves, _, outputs = key
    arrays = [i for i, (kind, _) in enumerate(leaves) if kind == "a"]
    scalars = [i for i, (kind, _) in enumerate(leaves) if kind == "s"]
    ins = f"({''.join(f'a{i}, ' for i in arrays)})"
    ks = f"({''.join(f'k{i}, ' for i in scalars)})"
    outs = f"({''.join(f'o{k}, ' for k in range(len(outputs)))})"
    params = ["n"] + [f"a{i}" if kind == "a" else f"k{i}" for i, (kind, _) in enumerate(leaves)]
    params += [f"o{k}" for k in range(len(outputs))]
    driver = [f"def flat({', '.join(params)}):",
              "    ntasks = (n + CHUNK - 1) // CHUNK",
              "    for task in prange(ntasks):",
              f"        TASK(int64(task), n, {ins}, {ks}, {outs})"]
    lines = ["def flat_task(task, n, ins, ks, outs):"]
    lines += _unpack([f"a{i}" for i in arrays], "ins")
    lines += _unpack([f"k{i}" for i in scalars], "ks")
    lines += _unpack([f"o{k}" for k in range(len(outputs))], "outs")
    lines += _scalar_prologue(leaves, lambda i: f"k{i}")
    lines += ["    start = task * CHUNK",
              "    stop = min(start + CHUNK, n)"]
    lines += _scratch(key, 4)
    lines += ["    for b in range(start, stop, BLOCK):",
              "        L = min(BLOCK, stop - b)"]
    lines += [f"        x{i} = a{i}[b:b + L]" for i in arrays]
    lines += [f"        y{k} = o{k}[b:b + L]" for k in range(len(outputs))]
    lines += _blocked(key, 8)
    return lines + ["", ""] + driver


def _strided(key):
    # array inputs as (1-D buffer, element offset, element strides) over merged dims; the
    # outputs are fresh C-contiguous arrays, so row r, column c is element r * inner + c.
    # An input that is not C-contiguous with the output (a view, a broadcast) is gathered
    # into a block first, so the ops' loops are the same as in ``flat``.
    leaves, _, outputs = key
    arrays = [i for i, (kind, _) in enumerate(leaves) if kind == "a"]
    scalars = [i for i, (kind, _) in enumerate(leaves) if kind == "s"]
    packs = [f"({''.join(f'{c}{i}, ' for i in arrays)})" for c in "afs"]
    ks = f"({''.join(f'k{i}, ' for i in scalars)})"
    outs = f"({''.join(f'o{k}, ' for k in range(len(outputs)))})"
    params = ["shape"]
    for i, (kind, _) in enumerate(leaves):
        params += [f"a{i}", f"f{i}", f"s{i}"] if kind == "a" else [f"k{i}"]
    params += [f"o{k}" for k in range(len(outputs))]
    # a task is one CHUNK of a long row, or as many short rows as make about a CHUNK (a
    # task per short row paid its scratch allocations per row: a 2048 x 64 bias-add + tanh
    # took 1.5 ms, 11 ns an element)
    driver = [f"def strided({', '.join(params)}):",
              "    nd = shape.shape[0]",
              "    inner = shape[nd - 1]",
              "    rows = int64(1)",   # (a literal 1 reached TASK as Literal[int](1) in the
              "    for d in range(nd - 1):",   # parallel driver: a second compile of TASK)
              "        rows *= shape[d]",
              "    per_row = (inner + CHUNK - 1) // CHUNK",
              "    per_task = max(1, CHUNK // max(inner, 1)) if per_row == 1 else 1",
              "    ntasks = per_row * ((rows + per_task - 1) // per_task)",
              "    for task in prange(ntasks):",
              f"        TASK(int64(task), shape, per_row, per_task, rows, {', '.join(packs)}, "
              f"{ks}, {outs})"]
    # Short rows (m < BLOCK) go several to a block, so each op's loop runs over up to BLOCK
    # values and not one row: a loop call per op and row cost a 128 x 2 softmax chain ~40 us
    # and a 2048 x 64 bias-add + tanh 2.5x its flat time.  A block is ``nr`` rows of
    # ``cols`` values from column ``b`` (several whole short rows, or a piece of one long
    # row).  Inputs C-contiguous with the output (``whole<i>``, judged on 1-D and 2-D merged
    # shapes) are sliced; the others are gathered by ``GATHER``, one small loop shared by
    # every chain (written out per input, the gathers added ~1 s to each chain's compile):
    # on 1-D and 2-D merged shapes a block's rows in one call, whose offsets need no
    # division (a call per row took 2048 x 64 ``m * m[:, :1] + 1`` from 40 to 147 us), past
    # two dims a call per row.  The ops are written once.
    lines = ["def strided_task(task, shape, per_row, per_task, rows, ins, offs, strs, ks, outs):"]
    lines += _unpack([f"a{i}" for i in arrays], "ins")
    lines += _unpack([f"f{i}" for i in arrays], "offs")
    lines += _unpack([f"s{i}" for i in arrays], "strs")
    lines += _unpack([f"k{i}" for i in scalars], "ks")
    lines += _unpack([f"o{k}" for k in range(len(outputs))], "outs")
    lines += _scalar_prologue(leaves, lambda i: f"k{i}")
    lines += ["    nd = shape.shape[0]",
              "    inner = shape[nd - 1]",
              "    row = (task // per_row) * per_task",
              "    start = (task % per_row) * CHUNK",
              "    m = min(inner - start, CHUNK)",
              "    last = min(row + per_task, rows)",
              "    per_block = max(1, BLOCK // max(m, 1))"]
    for i in arrays:
        lines += [f"    u{i} = s{i}[nd - 1]",
                  f"    v{i} = s{i}[nd - 2] if nd > 1 else 0",
                  f"    whole{i} = nd <= 2 and u{i} == 1 and (nd == 1 or v{i} == inner)",
                  # a row broadcast over short rows (a bias): every block of the task
                  # gathers the same rows, so the first block's gather serves them all
                  f"    same{i} = nd <= 2 and v{i} == 0 and per_block > 1",
                  f"    held{i} = False"]
    lines += _scratch(key, 4)
    lines += [f"    g{i} = empty(BLOCK, a{i}.dtype)" for i in arrays]
    lines += ["    b = 0",
              "    while row < last:",
              "        nr = min(per_block, last - row) if per_block > 1 else 1",
              "        cols = m if per_block > 1 else min(BLOCK, m - b)",
              "        L = nr * cols",
              "        q = row * inner + start + b",
              # nr rows from row ``row``: on 1-D and 2-D merged shapes one GATHER per input
              # and block, past two dims a row's offsets by division and a GATHER per row
              "        if nd <= 2:"]
    for i in arrays:
        lines += [f"            if not whole{i} and not held{i}:",
                  f"                GATHER(g{i}, int64(0), a{i}, "
                  f"f{i} + (start + b) * u{i} + row * v{i}, u{i}, v{i}, cols, nr)"]
    if not arrays:
        lines += ["            pass"]
    lines += ["        else:",
              "            for r in range(nr):",
              "                e = row + r"]
    lines += [f"                p{i} = f{i} + start * u{i}" for i in arrays]
    lines += ["                for d in range(nd - 2, -1, -1):",
              "                    w = e % shape[d]",
              "                    e //= shape[d]"]
    lines += [f"                    p{i} += w * s{i}[d]" for i in arrays]
    if not arrays:
        lines += ["                    pass"]
    for i in arrays:
        lines += [f"                if not whole{i} and not held{i}:",
                  # (int64: literals would compile GATHER once more)
                  f"                    GATHER(g{i}, r * cols, a{i}, p{i} + b * u{i}, u{i}, "
                  "int64(0), cols, int64(1))"]
    for i in arrays:
        lines += [f"        held{i} = same{i}",
                  f"        if whole{i}:",
                  f"            x{i} = a{i}[f{i} + q:f{i} + q + L]",
                  "        else:",
                  f"            x{i} = g{i}[:L]"]
    lines += [f"        y{k} = o{k}[q:q + L]" for k in range(len(outputs))]
    lines += _blocked(key, 8)
    lines += ["        b += cols",
              "        if b >= m:",
              "            b = 0",
              "            row += nr"]
    return lines + ["", ""] + driver


def row_offsets(arrays, col, indent):
    """Lines setting ``p<i>``, the element offset of array input ``i`` at column ``col`` of row
    ``row`` of ``shape`` (C order; ``nd`` dims), and ``u<i>``, its stride along the row
    (inputs are 1-D buffers ``a<i>`` with offset ``f<i>`` and strides ``s<i>``)."""
    pad = " " * indent
    return ([f"{pad}u{i} = s{i}[nd - 1]" for i in arrays]
            + [f"{pad}p{i} = f{i} + {col} * u{i}" for i in arrays]
            + [f"{pad}r = row",
               f"{pad}for d in range(nd - 2, -1, -1):",
               f"{pad}    e = r % shape[d]",
               f"{pad}    r //= shape[d]"]
            + [f"{pad}    p{i} += e * s{i}[d]" for i in arrays])


def gather_blocks(arrays, b, indent):
    """Lines making ``x<i>`` the ``L`` values of array input ``i`` from ``b`` elements past
    ``p<i>`` along the row (``b`` None: from ``p<i>``): a slice when unit-stride, else
    gathered into the block ``g<i>``."""
    pad = " " * indent
    lines = []
    for i in arrays:
        start = f"p{i} + {b}" if b else f"p{i}"
        at = f"({b} + j)" if b else "j"
        lines += [f"{pad}if u{i} == 1:",
                  f"{pad}    x{i} = a{i}[{start}:{start} + L]",
                  f"{pad}else:",
                  f"{pad}    for j in range(L):",
                  f"{pad}        g{i}[j] = a{i}[p{i} + {at} * u{i}]",
                  f"{pad}    x{i} = g{i}"]
    return lines


def _cuda_map(key):
    # a grid-stride loop over the output's elements; every input (one-element ones too) is
    # (1-D device buffer, element offset, element strides) over merged dims, as in
    # kernels/cuda/elementwise.py; the outputs are fresh C-contiguous buffers
    leaves, _, outputs = key
    arrays = [i for i, (kind, _) in enumerate(leaves) if kind == "a"]
    params = ["n", "shape"]
    for i, (kind, _) in enumerate(leaves):
        params += [f"a{i}", f"f{i}", f"s{i}"] if kind == "a" else [f"a{i}", f"f{i}"]
    params += [f"o{k}" for k in range(len(outputs))]
    lines = [f"def cuda_map({', '.join(params)}):"]
    lines += _scalar_prologue(leaves, lambda i: f"a{i}[f{i}]")
    lines += ["    nd = len(shape)",
              "    for i in range(cuda.grid(1), n, cuda.gridsize(1)):",
              "        r = i"]
    lines += [f"        p{j} = f{j}" for j in arrays]
    lines += ["        for d in range(nd - 1, -1, -1):",
              "            e = r % shape[d]",
              "            r //= shape[d]"]
    lines += [f"            p{j} += e * s{j}[d]" for j in arrays]
    values = [f"a{j}[p{j}]" if kind == "a" else f"c{j}" for j, (kind, _) in enumerate(leaves)]
    lines += _store(key, 8, _call(key, values), lambda k: f"o{k}[i]")
    return lines


def _describe(key):
    leaves, nodes, outputs = key
    out = []
    for k, (fn, dtype, args) in enumerate(nodes):
        mark = "  -> output" if k in outputs else ""
        out.append(f"    t{k} = {fn}({', '.join(_ref(i) for i in args)}) as {dtype}{mark}")
    return out


def source(key):
    """The text of the generated module for chain ``key``."""
    leaves = key[0]
    doc = ['"""Fused elementwise chain, generated by ember.kernels.fused (do not edit).', "",
           "Inputs: " + ", ".join(f"v{i} " + ("array" if kind == "a" else f"{dt} scalar")
                                  for i, (kind, dt) in enumerate(leaves)),
           *_describe(key), '"""']
    header = [*doc,
              "from numba import prange  # noqa: F401  (a plain range in serial builds)",
              f"from numpy import empty, {', '.join(sorted(set(TYPES.values())))}  # noqa: F401",
              "",
              f"CHUNK = {CHUNK}",
              f"BLOCK = {BLOCK}",
              "# the builders bind the scalar ops (CUDA), the per-op loops (CPU), TASK (a loop's task),",
              "# GATHER (a strided row into a block), CHAIN (the chain) and `cuda`"]
    parts = [header, _chain(key), _flat(key), _strided(key), _cuda_map(key)]
    return "\n\n\n".join("\n".join(p) for p in parts) + "\n"


def load(key):
    """The generated module of ``key``, written once under the kernel cache and imported."""
    return generated_module(key, name(key), lambda: source(key))


def generated_module(cache_key, modname, text):
    """Module ``modname`` of source ``text()`` (called only to create it), written under the
    kernel cache and imported once per process and ``cache_key``, also when threads ask at once."""
    mod = _MODULES.get(cache_key)
    if mod is not None:
        return mod
    with _LOCK:   # threads forcing the same new chain: one writes and imports it, once
        mod = _MODULES.get(cache_key)
        if mod is None:
            mod = _MODULES[cache_key] = import_generated(modname, text())
    return mod


def import_generated(modname, text):
    """Module ``modname`` of source ``text``, written under the kernel cache's generated
    directory (unless the file there already holds it) and imported from that file."""
    path = os.path.join(generated_dir(), modname + ".py")
    try:
        with open(path) as f:
            current = f.read()
    except OSError:
        current = None
    if current != text:
        # written under a temporary name and renamed: a concurrent process never imports half
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod
