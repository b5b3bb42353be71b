"""``ember.compile``: trace a step once per input signature, then replay its launches.

A traced call runs ``fn`` eagerly (real values) with a recorder installed at the backends'
seam (``ember.backends.set_recorder``): every launch any backend executes — forward ops,
``loss.backward()``'s, an optimizer's update, fused chains as fusion planned them, BALANCED
recomputes — is recorded with its input and output arrays.  The program is those launches in
order, each input resolved by array identity to what produced it: an earlier launch's
output, an argument of the call, a parameter or state tensor of an ``ember.optim`` optimizer
(read from the optimizer at every call, written back after it), or else a constant (a tensor
made outside the step, a cached scalar, a creation inside it: captured by reference).
Launches nothing reads are dropped.  Later calls with the same signature run the program:
no ``fn`` Python, no dispatch, no autodiff bookkeeping, no fusion planning — as one tape of
the backend's (``Backend.tape``: the CPU's for tiny float64 programs) or, else, as one
generated Python function calling each launch as the backend bound it.

Decisions (docs/decisions.md, "ember.compile"):

- The signature is the arguments' structure (tuples, lists, dicts), each tensor's shape,
  dtype and device (with its autodiff flag and strategy), and every other leaf by value
  (Python numbers, strings, None): Python numbers are static, a new value traces again (pass a
  0-d tensor for a value that changes every call).  The optimizers a step steps are guarded by
  their hyperparameters: changing ``opt.lr`` traces again.
- Reading a tensor's value while tracing (``item()``, ``float(t)``, ``bool(t)``, ``numpy()``,
  ``tolist()``, printing) raises ``CompileError`` naming the read and the line.  Ember's own
  data-dependent checks (index ranges) become checks of the program, made at every replay.
- Results are tensors without a graph (the step's backward already ran inside it), on the
  devices the trace gave them; an optimizer's new parameters are marked leaves, as
  ``opt.step`` returns them.
"""
import builtins
import functools
import traceback
import weakref

from . import backends
from .ir import Op
from .storage import TensorBase, make

__all__ = ["compile", "CompileError"]


class CompileError(RuntimeError):
    """A traced ``ember.compile`` step did something a replay cannot repeat (a value read)."""


_PACKAGE_DIRS = None


def _user_line():
    """``file:line`` of the innermost frame outside Ember's own packages."""
    global _PACKAGE_DIRS
    if _PACKAGE_DIRS is None:
        import ember
        import ember.autograd
        import ember.kernels
        _PACKAGE_DIRS = tuple(m.__path__[0] for m in (ember, ember.autograd, ember.kernels))
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_PACKAGE_DIRS):
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def value_read(what):
    """The ``CompileError`` of reading a tensor's value (``what``) while a step is traced."""
    return CompileError(
        f"{what}: reads a tensor's value inside a step traced by ember.compile (at "
        f"{_user_line()}); a traced step records launches, it cannot branch on data or "
        f"return host values. Read values outside the compiled function, or return the tensor.")


# --- optimizers a step may read and update ------------------------------------------------------
_OPTIMIZERS = weakref.WeakSet()


def register_optimizer(opt):
    """Called by ``ember.optim.Optimizer``: its parameters and state are read and written by the
    steps that use them (never captured as constants)."""
    _OPTIMIZERS.add(opt)


# --- tracing -------------------------------------------------------------------------------------
class _Recorder:
    """What a traced call launched: ``(backend, op, inputs, params, out)`` per launch, and the
    checks of data-dependent validation (``check``)."""

    def __init__(self):
        self.steps = []
        self.paused = False

    def launch(self, backend, op, inputs, params, out):
        if not self.paused:
            self.steps.append(("launch", backend, op, inputs, params, out))

    def check(self, backend, arrays, check):
        """``check(*values)`` of host copies of ``arrays``, now and at every replay."""
        self.steps.append(("check", backend, arrays, check))
        self.paused = True
        try:
            values = [backend.execute(Op.TO_HOST, a).reshape(()).item() for a in arrays]
        finally:
            self.paused = False
        check(*values)


def _flatten(obj, leaves, path=()):
    """The structure of ``obj`` (a hashable description) and its leaves, in order."""
    if isinstance(obj, TensorBase):
        leaves.append(obj)
        d = obj._device
        return ("T", obj._buf.shape, obj._dtype.name, d.type, d.index, d._autodiff,
                d.checkpointing)
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_flatten(x, leaves) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(obj[k], leaves)) for k in obj))
    if obj is None or isinstance(obj, (bool, int, float, complex, str)):
        return ("V", type(obj).__name__, obj)
    raise CompileError(f"ember.compile: an argument of type {type(obj).__name__} is neither a "
                       f"tensor, a Python number or string, nor a tuple, list or dict of them")


def _rebuild(spec, leaves):
    """The structure ``spec`` (of ``_flatten``) with its tensor slots filled from ``leaves``."""
    kind = spec[0]
    if kind == "T":
        return next(leaves)
    if kind == "V":
        return spec[2]
    if kind == "dict":
        return {k: _rebuild(v, leaves) for k, v in spec[1]}
    items = [_rebuild(x, leaves) for x in spec[1]]
    return tuple(items) if kind == "tuple" else items


def _arrays(out, acc):
    """The arrays in a launch's result (an array, or tuples and lists of them)."""
    if isinstance(out, (tuple, list)):
        for x in out:
            _arrays(x, acc)
    elif hasattr(out, "shape"):
        acc.append(out)
    return acc


class _Program:
    """One traced signature: the replay of its kept launches, and how to pick its inputs
    from a call and make the results and the optimizers' new state from its outputs."""

    def __init__(self, replay, arg_pick, opt_reads, out_spec, results, opt_writes, guards):
        self.replay = replay        # replay(*ins) -> the arrays of the program's outputs
        self.arg_pick = arg_pick    # per argument input, the leaf that holds it
        self.opt_reads = opt_reads  # per further input: (optimizer, "param"|key, index)
        self.out_spec = out_spec    # the result's structure (``_flatten`` of the traced result)
        self.results = results      # per result tensor: (output, class, device, dtype)
        self.opt_writes = opt_writes  # (optimizer, index, "param"|key, output, device, dtype, mark)
        self.guards = guards        # (optimizer, its hyperparameters at trace time)

    def valid(self):
        for opt, h in self.guards:
            if opt._hyperparameters() != h:
                return False
        return True

    def run(self, leaves):
        """The results of a call with these argument ``leaves``; the optimizers' parameters
        and state advanced (``_runner``'s function: a line per input and output)."""
        return self._run(leaves)


def _runner(program, out_leaves):
    """``run(leaves)`` of ``program`` as one generated function: each input read and each
    result and new optimizer parameter or state made by a line of its own, the optimizers,
    classes, devices and dtypes as globals (a loop over the program's tables cost ~40% more
    Python per call: an MLP step has some 20 inputs and outputs)."""
    from ember.autograd.graph import leaf
    names = {"REPLAY": program.replay, "make": make, "leaf": leaf}
    opts = {}

    def opt_name(opt):
        if opt not in opts:
            opts[opt] = f"O{len(opts)}"
            names[opts[opt]] = opt
        return opts[opt]

    def slot(opt, what, i):
        return f"{opt_name(opt)}._params[{i}]" if what == "param" else \
            f"{opt_name(opt)}._state[{i}][{what!r}]"

    ins = [f"leaves[{i}]._data" for i in program.arg_pick]
    ins += [slot(opt, what, i) + "._data" for opt, what, i in program.opt_reads]
    n_out = 1 + max([j for j, *_ in program.results] + [w[3] for w in program.opt_writes] + [-1])
    lines = ["def run(leaves):",
             f"    {''.join(f'o{j}, ' for j in range(n_out))}= REPLAY({', '.join(ins)})"]
    made = []
    for k, (j, cls, device, dtype) in enumerate(program.results):
        names.update({f"C{k}": cls, f"D{k}": device, f"T{k}": dtype})
        made.append(f"make(C{k}, o{j}, D{k}, T{k})")
    for k, (opt, i, what, j, device, dtype, mark) in enumerate(program.opt_writes):
        t = next(t for o, ii, w, t, _ in out_leaves if o is opt and ii == i and w == what)
        names.update({f"WC{k}": type(t), f"WD{k}": device, f"WT{k}": dtype})
        if what == "param":
            names.update({f"SH{k}": t.shape, f"M{k}": mark})
            lines.append(f"    {slot(opt, what, i)} = make(WC{k}, o{j}, WD{k}, WT{k}, "
                         f"leaf(SH{k}, M{k}))")
        else:
            lines.append(f"    {slot(opt, what, i)} = make(WC{k}, o{j}, WD{k}, WT{k})")
    lines.append(f"    return {_literal(program.out_spec, iter(made), names)}")
    exec(builtins.compile("\n".join(lines), "<ember.compile run>", "exec"), names)
    return names["run"]


def _literal(spec, made, names):
    """The expression that builds the structure ``spec`` (``_flatten``'s) with its tensor slots
    the expressions ``made``, in order: a result's structure is written out, not rebuilt by a
    walk at every call (the optimizers' replays return ~30 tensors in lists and dicts); other
    values are globals of ``names``."""
    kind = spec[0]
    if kind == "T":
        return next(made)
    if kind == "V":
        name = f"V{len(names)}"
        names[name] = spec[2]
        return name
    if kind == "dict":
        items = []
        for k, v in spec[1]:
            key = f"K{len(names)}"
            names[key] = k
            items.append(f"{key}: {_literal(v, made, names)}")
        return "{" + ", ".join(items) + "}"
    items = "".join(_literal(x, made, names) + ", " for x in spec[1])
    return f"({items})" if kind == "tuple" else f"[{items}]"


# launches without inputs whose result depends on their params alone: a program keeps the
# trace's array (tensors are values) instead of filling a new one per replay
_CREATIONS = frozenset((Op.FULL, Op.ARANGE))


def _replay(kept, constants, inputs, outputs):
    """``replay(*ins) -> outs`` running the kept steps: the backend's tape when every launch is
    on one backend that can run them as one (``Backend.tape``), else a generated Python
    function with a line per launch.  ``inputs`` maps each input register, in call order, to
    its array in the trace; ``outputs`` are the registers a call returns, in order."""
    backends_used = {s[1] for s in kept}
    if len(backends_used) == 1:
        tape = backends_used.pop().tape(kept, constants, inputs, outputs)
        if tape is not None:
            return tape
    return _bound_replay(kept, constants, list(inputs), outputs)


def _bound_replay(kept, constants, in_regs, outputs):
    """The kept steps as one generated Python function ``replay(*ins)`` returning the output
    arrays: a line per launch calling what the backend bound for it (``Backend.bind``: the op
    table's lookup and the keyword parsing done once), registers as local variables ``r<k>``
    (constants as globals of the same names), so a replay pays no loop, closure or
    ``execute`` frame per launch."""
    names = {"_spread": _spread}
    lines = [f"def replay({', '.join(f'r{k}' for k in in_regs)}):"]
    # each register is dropped after its last read (the outputs excepted), as eager code drops
    # its temporaries: the memory is reused while still in cache, and a step's peak stays what
    # the eager call's was
    last = {}
    for j, s in enumerate(kept):
        for k in (s[3] if s[0] == "launch" else s[2]):
            last[k] = j
    dead = {}
    keep = set(outputs)
    assigned = set(in_regs)
    for j, s in enumerate(kept):
        if s[0] == "launch":
            assigned.update(s[5])
    for k, j in last.items():
        if k not in keep and k in assigned:
            dead.setdefault(j, []).append(k)
    for k in sorted(set(last) | keep):
        if k not in in_regs and constants[k] is not None:
            if k in assigned:   # (a launch that returns its input: a local from the start)
                names[f"c{k}"] = constants[k]
                lines.append(f"    r{k} = c{k}")
            else:
                names[f"r{k}"] = constants[k]
    for j, s in enumerate(kept):
        if s[0] == "launch":
            _, backend, op, ins, params, outs, single, inputs, out = s
            names[f"F{j}"] = backend.bind(op, params, inputs, out)
            call = f"F{j}({', '.join(f'r{k}' for k in ins)})"
            if single:
                lines.append(f"    r{outs[0]} = {call}")
            elif isinstance(out, (tuple, list)) and all(hasattr(a, "shape") for a in out):
                lines.append(f"    {''.join(f'r{k}, ' for k in outs)}= {call}")   # unpacked
            else:   # nested
                lines.append(f"    {''.join(f'r{k}, ' for k in outs)}= _spread({call})")
        else:
            _, backend, regs, check = s
            names[f"F{j}"] = _check_call(backend, check)
            lines.append(f"    F{j}({', '.join(f'r{k}' for k in regs)})")
        if j in dead:
            lines.append(f"    {' = '.join(f'r{k}' for k in dead[j])} = None")
    lines.append(f"    return ({''.join(f'r{k}, ' for k in outputs)})")
    exec(builtins.compile("\n".join(lines), "<ember.compile replay>", "exec"), names)
    return names["replay"]


def _spread(out):
    """The arrays of a launch that returns several, nested in tuples and lists, in order."""
    return _arrays(out, [])


def _check_call(backend, check):
    def run(*arrays):
        check(*[backend.execute(Op.TO_HOST, a).reshape(()).item() for a in arrays])
    return run


def _build(recorder, arg_leaves, snapshot, out_spec, out_leaves, opt_after):
    regs = []
    where = {}        # id(array) -> register

    def reg(array, value=None):
        k = where.get(id(array))
        if k is None:
            k = where[id(array)] = len(regs)
            regs.append(value)
        return k

    inputs = {}       # input register -> its array in the trace, in call order
    arg_pick = []
    for i, t in enumerate(arg_leaves):
        if id(t._data) not in where:
            inputs[reg(t._data)] = t._data
            arg_pick.append(i)
    # an array held by several optimizer slots (two optimizers over the same parameters) is
    # read from the slot the step writes back: the one whose value advances call by call
    written = {(opt, what, i) for opt, i, what, *_ in opt_after}
    opt_reads = []
    for (opt, what, i), array in sorted(snapshot.items(), key=lambda kv: kv[0] not in written):
        if id(array) not in where:
            inputs[reg(array)] = array
            opt_reads.append((opt, what, i))
    # the launches: inputs not made by an earlier launch (nor inputs) are constants
    raw = []
    for s in recorder.steps:
        if s[0] == "launch":
            _, backend, op, arrays_in, params, out = s
            if op in _CREATIONS:   # a value fixed by its params: made once, by the trace
                reg(out, out)
                continue
            ins = []
            for a in arrays_in:
                k = where.get(id(a))
                if k is None:
                    k = reg(a, a)   # a constant: captured by reference
                ins.append(k)
            arrays = _arrays(out, [])
            outs = [reg(a) for a in arrays]
            raw.append(("launch", backend, op, ins, params, outs, hasattr(out, "shape"), arrays_in,
                        out))
        else:
            _, backend, arrays, check = s
            raw.append(("check", backend, [where[id(a)] for a in arrays], check))
    # what the call returns and writes back: the program's outputs, each register once
    outputs = []
    index = {}

    def output(array):
        k = where.get(id(array))
        if k is None:
            k = reg(array, array)
        if k not in index:
            index[k] = len(outputs)
            outputs.append(k)
        return index[k]

    results = [(output(t._data), type(t), t._device, t._dtype) for t in out_leaves]
    opt_writes = [(opt, i, what, output(t._data), t._device, t._dtype, mark)
                  for opt, i, what, t, mark in opt_after]
    # keep the launches something needs: outputs and checks (in reverse order)
    live = set(outputs)
    kept = []
    for s in reversed(raw):
        if s[0] == "launch":
            if not any(k in live for k in s[5]):
                continue
            live.update(s[3])
        else:
            live.update(s[2])
        kept.append(s)
    kept.reverse()
    guards = tuple({opt: opt._hyperparameters() for opt, *_ in opt_after}.items())
    replay = _replay(kept, regs, inputs, outputs)
    program = _Program(replay, arg_pick, opt_reads, out_spec, results, opt_writes, guards)
    program._run = _runner(program, opt_after)
    program.launches = sum(s[0] == "launch" for s in kept)
    program.instructions = getattr(replay, "instructions", None)   # a tape's, or None
    return program


def _force_all(leaves):
    for t in leaves:
        t._data  # noqa: B018  (computes a pending value: its launches are recorded)


class Compiled:
    """A function traced once per input signature and replayed (see the module docstring)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._programs = {}
        self.traces = 0

    def __call__(self, *args, **kwargs):
        if backends.recorder() is not None:   # inside another step's trace: part of it
            return self.fn(*args, **kwargs)
        leaves = []
        spec = _flatten((args, kwargs), leaves)
        program = self._programs.get(spec)
        if program is not None and program.valid():
            return program.run(leaves)
        out, program = self._trace(args, kwargs, leaves)
        self._programs[spec] = program
        return out

    def _trace(self, args, kwargs, leaves):
        self.traces += 1
        return trace(self.fn, args, kwargs, leaves)

    def clear(self):
        """Forget every traced signature (the next call traces again)."""
        self._programs.clear()


def trace(fn, args, kwargs, leaves, optimizers=True):
    """``(fn(*args, **kwargs), program)``: one eager call of ``fn`` recorded, and the program
    whose ``run(leaves)`` replays it for tensors ``leaves`` of the structure of ``args`` and
    ``kwargs`` (``_flatten``'s leaves, in order) and returns what ``fn`` would.  What a
    ``Compiled`` function does per signature; ``ember.optim`` replays its updates with it and
    ``backward`` its walks, both with ``optimizers`` false: the optimizers' tensors are then
    neither read at every call nor written back (an array ``fn`` reads that is not in
    ``leaves`` is a constant)."""
    _force_all(leaves)
    snapshot = {}
    for opt in list(_OPTIMIZERS) if optimizers else ():
        for i, p in enumerate(opt._params):
            snapshot[opt, "param", i] = p._data
            for key, v in opt._state[i].items():
                if isinstance(v, TensorBase):
                    snapshot[opt, key, i] = v._data
    before = {opt: (list(opt._params), [dict(s) for s in opt._state])
              for opt in (_OPTIMIZERS if optimizers else ())}
    recorder = _Recorder()
    previous = backends.set_recorder(recorder)
    try:
        out = fn(*args, **kwargs)
        out_leaves = []
        out_spec = _flatten(out, out_leaves)
        _force_all(out_leaves)
        opt_after = []
        for opt, (params, states) in before.items():
            for i, p in enumerate(opt._params):
                if p is not params[i]:
                    opt_after.append((opt, i, "param", p, p._node.distributed if p._node else None))
                for key, v in opt._state[i].items():
                    if isinstance(v, TensorBase) and v is not states[i].get(key):
                        opt_after.append((opt, i, key, v, None))
        _force_all([t for *_, t, _ in opt_after])
    finally:
        backends.set_recorder(previous)
    program = _build(recorder, leaves, snapshot, out_spec, out_leaves, opt_after)
    # results of the trace itself: as a replay returns them (no graph)
    results = iter([make(cls, t._data, device, dtype)
                    for t, (_, cls, device, dtype) in zip(out_leaves, program.results)])
    return _rebuild(out_spec, results), program


def compile(fn=None):
    """``fn`` traced once per input signature, its launches replayed on later calls.

    >>> @ember.compile
    ... def step(x, w):
    ...     return (x @ w).tanh().sum()
    """
    if fn is None:
        return compile
    return Compiled(fn)
